"""What the exactness tests share: index locations per storage backend, and a full
description of an index to compare two of them.

Every test that takes ``index_location`` runs once per backend in ``BACKENDS``: the
embedded stores, and PostgreSQL, whose locations are workspaces on the test server
(started by :mod:`quillian.testing.postgres`), derived from the ``postgres_url``
fixture, one per name a test asks for.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import numpy as np
import pytest

from quillian.components.embedding.base import Embedder
from quillian.components.factories import make_retriever
from quillian.components.graph.builder import description_node_id
from quillian.index import open_index, open_storage
from quillian.stores.protocols import DocStatus
from quillian.stores.snapshot import EdgeKind, NodeKind

#: Storage backends the exactness tests run on.
BACKENDS = ["embedded", "postgres"]
#: Queries and methods whose results two equal indexes must share.
METHODS = ("sa", "ppr", "dense", "bm25")
#: Digits scores are compared to: the same graph gives the same scores up to float sums.
DIGITS = 5

Location = Callable[[str], str]


@pytest.fixture(
    params=[pytest.param(b, marks=pytest.mark.postgres) if b == "postgres" else b for b in BACKENDS]
)
def index_location(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    """A factory of fresh, distinct index locations (one per name) on the backend."""
    if request.param == "embedded":
        return lambda name: str(tmp_path / name)
    if request.param == "postgres":
        url = urlsplit(request.getfixturevalue("postgres_url"))
        query = parse_qs(url.query)
        base = query.pop("workspace", ["quillian"])[0]

        def workspace(name: str) -> str:
            params = urlencode({**query, "workspace": f"{base}_{name}"}, doseq=True)
            return urlunsplit(url._replace(query=params))

        return workspace
    raise AssertionError(f"unknown backend {request.param}")


def index_state(
    location: str, embedder: Embedder, queries: tuple[str, ...], namespaces: tuple[str, ...]
) -> dict[str, Any]:
    """Everything that makes an index what it is, in a form two indexes compare by ``==``:
    documents and statuses, chunks, the graph (nodes with kinds; edges with kinds,
    weights and the text and provenance of their relation), the entity, description and
    relation tables, vectors by chunk and by text, the keys stored in each of the
    key-value ``namespaces`` (caches included), and the results of every method in
    ``METHODS`` for ``queries``. Orders that carry no meaning (node numbering) are left
    out: everything is keyed by content-derived ids."""
    index = open_index(location, embedder)
    context, kg = index.context, index.context.kg
    snap = kg.snapshot
    ids = snap.ids.ids_of(range(snap.n_nodes))
    relation = [
        (r.subject, r.predicate, r.object, r.description, r.provenance) for r in kg.relations
    ]
    edges = []
    for node in range(snap.n_nodes):
        for at in range(snap.indptr[node], snap.indptr[node + 1]):
            rel = int(snap.edge_relations[at])
            kind = EdgeKind(snap.edge_kinds[at]).name
            why = repr(relation[rel]) if rel >= 0 else ""
            edges.append((ids[node], ids[snap.indices[at]], kind, float(snap.weights[at]), why))
    chunk_vectors = context.chunk_vectors.get(np.arange(len(kg.chunk_ids)))
    text_rows = {
        d.text: int(row) for d, row in zip(kg.descriptions, context.description_rows, strict=True)
    }
    text_rows |= {
        r.description or f"{r.subject} {r.predicate} {r.object}": int(row)
        for r, row in zip(kg.relations, context.relation_rows, strict=True)
    }
    texts = context.text_vectors.get(np.array(sorted(set(text_rows.values())), dtype=np.int64))
    assert len(context.text_vectors) == len(set(text_rows.values())), "stale text vectors"
    row_of = {row: i for i, row in enumerate(sorted(set(text_rows.values())))}
    with open_storage(location) as storage:
        statuses = {
            r.doc_id: (r.status.value, r.error)
            for status in DocStatus
            for r in storage.status.with_status(status)
        }
        documents = storage.documents.get_documents(sorted(statuses))
        chunks = sorted(
            (c.id, c.doc_id, c.index, c.title, c.text) for c in storage.documents.iter_chunks()
        )
        stored = {n: list(storage.kv.keys(n)) for n in namespaces}
    results = {
        (method, query): [
            (p.chunk_id, round(p.score, DIGITS))
            for p in make_retriever(context, method).retrieve(query, 5).passages
        ]
        for method in METHODS
        for query in queries
    }
    return {
        "manifest": {k: index.manifest[k] for k in ("state", "counts")},
        "documents": [(d.id, d.title, d.text) if d else None for d in documents],
        "statuses": statuses,
        "chunks": chunks,
        "nodes": {i: NodeKind(k).name for i, k in zip(ids, snap.kinds.tolist(), strict=True)},
        "edges": sorted(edges),
        "entities": sorted((e.node_id, e.name, e.type, tuple(e.aliases)) for e in kg.entities),
        "descriptions": sorted(
            (description_node_id(kg.entities[d.entity].node_id, d.chunk_id, d.text), d.text)
            for d in kg.descriptions
        ),
        "relations": sorted(map(repr, relation)),
        "chunk vectors": {c: chunk_vectors[i].tobytes() for i, c in enumerate(kg.chunk_ids)},
        "text vectors": {t: texts[row_of[r]].tobytes() for t, r in text_rows.items()},
        "stored keys": stored,
        "results": results,
    }


def assert_same_index(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Compare two :func:`index_state` results part by part, naming the first that differs."""
    assert got.keys() == want.keys()
    for part in want:
        assert got[part] == want[part], f"the indexes differ in their {part}"


@pytest.fixture
def same_index() -> Callable[..., None]:
    """``same_index(got, want, embedder, queries, namespaces)``: assert that the indexes
    at two locations are equal in every part :func:`index_state` describes."""

    def check(
        got: str,
        want: str,
        embedder: Embedder,
        queries: tuple[str, ...],
        namespaces: tuple[str, ...],
    ) -> None:
        assert_same_index(
            index_state(got, embedder, queries, namespaces),
            index_state(want, embedder, queries, namespaces),
        )

    return check
