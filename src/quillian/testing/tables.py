"""What a graph build wrote, read back by position, for tests that compare two builds:
an index grown in steps against one built at once, a writer's output against another's.
Rows are keyed by ids each writer chooses (:mod:`quillian.index.tables`), so they are
compared through the positions the order arrays give, never as stored."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.extraction.assemble import RELATED_TO
from quillian.components.factories import make_retriever
from quillian.components.graph.builder import description_node_id
from quillian.index.tables import (
    IN_CHUNK,
    KEYED,
    KEYED_BODIES,
    KEYED_TEXTS,
    KEYED_WHOLE_TEXTS,
    KEYED_WORDS,
    LAYOUT,
    TABLES_DB,
    StoredTables,
    entity_name,
    relation_words,
    text_functions,
    text_of,
)
from quillian.stores.packed import unpack_text
from quillian.stores.snapshot import GraphSnapshot
from quillian.types import key64

__all__ = [
    "ORDERS",
    "assert_same_outputs",
    "assert_same_snapshot",
    "chunk_texts_in_texts",
    "description_chunk_ids",
    "graph_outputs",
    "relation_words_in_rows",
    "table_rows",
    "whole_texts",
]


#: The arrays giving rows by position, whose values are keys of the writer's choosing:
#: compared through the rows they place.
ORDERS = {
    "chunk_order",
    "entity_order",
    "description_order",
    "relation_order",
    "entity_positions",
}


def table_rows(directory: Path) -> dict[str, Any]:
    """Every table's rows by position (texts by value, entities by position), and every
    text's reference count checked against the rows referring to it."""
    tables = StoredTables(directory)
    conn = sqlite3.connect(directory / TABLES_DB)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        text_functions(conn)
        texts = dict(conn.execute(f"SELECT t.id, {tables._text('t')} FROM texts t").fetchall())
        if tables.keyed:
            chunk_texts = ("SELECT text FROM chunks",) if meta[LAYOUT] == KEYED_TEXTS else ()
            refs = Counter(
                i
                for sql in (
                    "SELECT title FROM chunks",
                    *chunk_texts,
                    "SELECT text FROM descriptions",
                    "SELECT description FROM relations",
                    "SELECT sentence FROM relations",
                )
                for (i,) in conn.execute(sql)
                if i is not None and i != IN_CHUNK
            )
            stored = dict(conn.execute("SELECT id, refs FROM texts").fetchall())
            assert stored == dict(refs), "text reference counts"
            (unused,) = conn.execute(
                "SELECT count(*) FROM sources WHERE id NOT IN (SELECT source FROM relations"
                " WHERE source IS NOT NULL)"
            ).fetchone()
            assert unused == 0, "sources no relation reads"
        if meta.get(LAYOUT) == KEYED:  # a word its row implies is never kept
            subject, obj = entity_name("r.subject_entity"), entity_name("r.object_entity")
            (kept,) = conn.execute(
                f"SELECT count(*) FROM relations r WHERE r.subject = {subject}"
                f" OR r.object = {obj} OR r.predicate = ?",
                (RELATED_TO,),
            ).fetchone()
            assert kept == 0, "relations keeping words their rows imply"
        names = conn.execute("SELECT key, entity, titled FROM names ORDER BY key").fetchall()
        alias_ids = conn.execute("SELECT id, entity FROM alias_ids ORDER BY id").fetchall()
        relations = conn.execute(
            f"SELECT r.{tables._key}, {', '.join(tables._words('r'))}, r.description,"
            " s.doc_id, s.chunk_id, r.start, r.end, r.sentence FROM relations r"
            " LEFT JOIN sources s ON s.id = r.source"
        ).fetchall()
    finally:
        conn.close()
    order = tables._order("relations")
    by_key = {r[0]: r[1:] for r in relations}
    keys = order.tolist() if order is not None else sorted(by_key)
    graph = tables.graph(GraphSnapshot.load(directory / "graph", verify=False))
    out = {
        "meta": {k: v for k, v in meta.items() if k not in ("entity_fingerprint", "generation")},
        "texts": sorted(texts.values()),
        "chunks": list(zip(graph.chunk_ids, tables.chunk_titles, tables.chunk_texts, strict=True)),
        "entities": list(graph.entities),
        "descriptions": list(graph.descriptions),
        "relations": [
            (
                *by_key[k][:3],
                texts.get(by_key[k][3]),
                *by_key[k][4:8],
                by_key[k][8] if by_key[k][8] in (None, IN_CHUNK) else texts[by_key[k][8]],
            )
            for k in keys
        ],
        "names": [(k, tables.entity_position(e), t) for k, e, t in names],
        "alias_ids": [(i, tables.entity_position(e)) for i, e in alias_ids],
    }
    tables.db.close()
    return out


def relation_words_in_rows(directory: Path, snapshot: GraphSnapshot | None = None) -> None:
    """Turn the tables under ``directory`` into layout ``keyed-4``, as a build before
    relations' rows left out the words their entities imply wrote them: every relation's
    subject, predicate and object in its row."""
    conn = sqlite3.connect(directory / TABLES_DB)
    subject, predicate, obj = relation_words("relations")
    conn.execute(
        f"UPDATE relations SET subject = {subject}, predicate = {predicate}, object = {obj}"
    )
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (KEYED_WORDS, LAYOUT))
    conn.commit()
    conn.close()


def whole_texts(directory: Path, snapshot: GraphSnapshot | None = None) -> None:
    """Turn the tables under ``directory`` into layout ``keyed-3``, as a build before
    texts were kept as spans of their chunks wrote them: every text whole (and, as in
    ``keyed-4``, every relation's words in its row)."""
    relation_words_in_rows(directory)
    conn = sqlite3.connect(directory / TABLES_DB)
    text_functions(conn)
    conn.execute(
        f"UPDATE texts SET text = {text_of('texts')}, chunk = NULL, start = NULL, end = NULL"
    )
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (KEYED_WHOLE_TEXTS, LAYOUT))
    conn.commit()
    conn.close()


def description_chunk_ids(directory: Path, snapshot: GraphSnapshot | None = None) -> None:
    """Turn the tables under ``directory`` into layout ``keyed-2``, as a build before
    descriptions named their chunk by its key alone wrote them: each description's row
    holding its chunk's id and its node id too (``snapshot``: the graph's, where it is
    not stored under ``directory``), and every text whole (as in ``keyed-3``)."""
    if snapshot is None:
        snapshot = GraphSnapshot.load(directory / "graph", verify=False)
    whole_texts(directory)
    positions = np.load(directory / "tables" / "entity_positions.npy")
    conn = sqlite3.connect(directory / TABLES_DB)
    conn.execute("ALTER TABLE descriptions ADD COLUMN chunk_id TEXT")
    conn.execute(
        "UPDATE descriptions SET chunk_id ="
        " (SELECT id FROM chunks c WHERE c.row = descriptions.chunk)"
    )
    conn.execute("ALTER TABLE descriptions ADD COLUMN node TEXT")
    rows = conn.execute(
        "SELECT d.row, d.entity, d.chunk_id, t.text FROM descriptions d"
        " JOIN texts t ON t.id = d.text"
    ).fetchall()
    for row, entity, chunk_id, text in rows:
        (entity_node,) = snapshot.ids.ids_of([int(positions[entity])])
        node = description_node_id(entity_node, chunk_id, text)
        conn.execute("UPDATE descriptions SET node = ? WHERE row = ?", (node, row))
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (KEYED_BODIES, LAYOUT))
    conn.commit()
    conn.close()


def chunk_texts_in_texts(directory: Path, snapshot: GraphSnapshot | None = None) -> None:
    """Turn the tables under ``directory`` into layout ``keyed-1``, as a build before
    chunk texts were rows' bodies wrote them: a chunk's text in ``texts`` (counted with
    the other rows referring to it), its row holding the text's id (and, as in
    ``keyed-2``, each description's row its chunk's id)."""
    description_chunk_ids(directory, snapshot)
    conn = sqlite3.connect(directory / TABLES_DB)
    conn.execute("ALTER TABLE chunks ADD COLUMN text INTEGER")
    for row, body in conn.execute("SELECT row, body FROM chunks").fetchall():
        text = unpack_text(body)
        conn.execute(
            "INSERT INTO texts (id, text, refs) VALUES (?, ?, 1)"
            " ON CONFLICT (id) DO UPDATE SET refs = refs + 1",
            (key64(text), text),
        )
        conn.execute("UPDATE chunks SET text = ? WHERE row = ?", (key64(text), row))
    conn.execute("ALTER TABLE chunks DROP COLUMN body")
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (KEYED_TEXTS, LAYOUT))
    conn.commit()
    conn.close()


def assert_same_snapshot(got: GraphSnapshot, want: GraphSnapshot) -> None:
    """The same graph, every array of the same type (``indptr`` of any integer width: a
    saved snapshot keeps it in 32 bits where it fits)."""
    assert got.ids.ids_of(range(len(got.ids))) == want.ids.ids_of(range(len(want.ids)))
    for name in ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations"):
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        same_type = a.dtype == b.dtype or (name == "indptr" and a.dtype.kind == b.dtype.kind)
        assert same_type and np.array_equal(a, b), name


def graph_outputs(directory: Path) -> dict[str, Any]:
    """The graph tables' rows by position (:func:`table_rows`), the arrays stored beside
    them (but the order arrays, whose values are row keys), and the snapshot's arrays."""
    out: dict[str, Any] = table_rows(directory)
    for path in sorted((directory / "tables").glob("*.npy")):
        if path.stem not in ORDERS:
            out[path.name] = np.load(path).tolist()
    snapshot = GraphSnapshot.load(directory / "graph", verify=False)
    out["ids"] = snapshot.ids.ids_of(range(snapshot.n_nodes))
    for name in ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations"):
        out[name] = np.asarray(getattr(snapshot, name)).tolist()
    return out


def assert_same_outputs(got: Path, want: Path) -> None:
    """``got`` holds what ``want`` holds: the tables' rows, the arrays, the graph."""
    got_rows, want_rows = table_rows(got), table_rows(want)
    for table, rows in want_rows.items():
        assert got_rows[table] == rows, table
    arrays = sorted(p.name for p in (want / "tables").glob("*.npy"))
    assert sorted(p.name for p in (got / "tables").glob("*.npy")) == arrays
    for name in arrays:
        if name.removesuffix(".npy") in ORDERS:
            continue
        a, b = np.load(got / "tables" / name), np.load(want / "tables" / name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    loaded = (GraphSnapshot.load(d / "graph", verify=False) for d in (got, want))
    assert_same_snapshot(*loaded)


def ranked(context: Any, questions: Sequence[str], methods: Sequence[str]) -> dict[str, Any]:
    """Each method's top 5 chunk ids for each question, of the opened index ``context``
    (a :class:`~quillian.components.retrieval.context.RetrievalContext`)."""
    return {
        method: [
            [p.chunk_id for p in make_retriever(context, method).retrieve(q, 5).passages]
            for q in questions
        ]
        for method in methods
    }
