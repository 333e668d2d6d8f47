"""Triples that keep their source sentence, stored through the index's own stores.

* the key-value store holds one record per triple (namespace :data:`NAMESPACE`, key
  the zero-padded row): subject, predicate, object, source sentence, and provenance
  (document, chunk id, chunk position in the index, sentence span);
* two vector collections, both keyed by row: :data:`TRIPLE_VECTORS`, the embedding of
  ``"s p o"``, and :data:`SENTENCE_VECTORS`, the embedding of the source sentence;
* the entity graph with the triple on each edge (:class:`TripleGraph`) is derived from
  the records when the store is read, so it always agrees with them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property

import numpy as np

from quillian.components.embedding.base import Embedder
from quillian.components.graph.triple_hops import TripleGraph
from quillian.errors import IndexIncompleteError
from quillian.stores.protocols import KeyValueStore, VectorIndex
from quillian.types import Progress, no_progress, stable_id

logger = logging.getLogger(__name__)

__all__ = [
    "NAMESPACE",
    "SENTENCE_VECTORS",
    "TRIPLE_VECTORS",
    "StoredTriple",
    "TripleStore",
    "read_triples",
    "write_triples",
]

NAMESPACE = "kags:triples"
#: Holds ``count``: written last, so a store without it was never completed.
META = "kags:meta"
TRIPLE_VECTORS = "kags-triples"
SENTENCE_VECTORS = "kags-sentences"
#: Texts embedded per call.
WINDOW = 4096

OpenVectors = Callable[..., VectorIndex]
"""``storage.vectors``: ``(name, dim=None, *, fresh=False)`` to a vector collection."""


@dataclass(frozen=True, slots=True)
class StoredTriple:
    """One triple with its source sentence and where that sentence is."""

    subject: str
    predicate: str
    object: str
    sentence: str
    doc_id: str
    chunk_id: str
    chunk: int
    """The chunk's position in the index (a :class:`ScoredPassage`'s ``chunk``)."""
    start: int = -1
    end: int = -1

    @property
    def text(self) -> str:
        """What is embedded for the triple: ``"s p o"``."""
        return f"{self.subject} {self.predicate} {self.object}"


def _key(row: int) -> str:
    return f"{row:09d}"


@dataclass(frozen=True, eq=False)
class TripleStore:
    """The stored triples, their two vector fields and their entity graph."""

    triples: tuple[StoredTriple, ...]
    triple_vectors: VectorIndex
    sentence_vectors: VectorIndex

    def __len__(self) -> int:
        return len(self.triples)

    @cached_property
    def graph(self) -> TripleGraph:
        return TripleGraph.from_ends([(t.subject, t.object) for t in self.triples])


def chunks_fingerprint(chunk_ids: Sequence[str]) -> str:
    """Identifies the index's chunk table: triples name chunks by position in it."""
    return stable_id("chunks", *chunk_ids)


def write_triples(
    kv: KeyValueStore,
    open_vectors: OpenVectors,
    embedder: Embedder,
    triples: Sequence[StoredTriple],
    chunk_ids: Sequence[str],
    progress: Progress = no_progress,
) -> None:
    """Replace the stored triples with ``triples`` (row = position) and embed both
    fields; each distinct sentence is embedded once. ``chunk_ids`` is the index's
    chunk table, which the triples' chunk positions refer to."""
    kv.delete_many(META, ["count", "chunks"])
    kv.delete_many(NAMESPACE, list(kv.keys(NAMESPACE)))
    records = {_key(i): json.dumps(asdict(t)).encode() for i, t in enumerate(triples)}
    for start in range(0, len(triples), WINDOW):
        kv.put_many(NAMESPACE, dict(list(records.items())[start : start + WINDOW]))
    sentences = list(dict.fromkeys(t.sentence for t in triples))
    row_of = {s: i for i, s in enumerate(sentences)}
    texts = [t.text for t in triples]
    triple_index = open_vectors(TRIPLE_VECTORS, embedder.dim, fresh=True)
    _embed(triple_index, embedder, texts, None, progress, "embed:kags-triples")
    _embed(
        open_vectors(SENTENCE_VECTORS, embedder.dim, fresh=True),
        embedder,
        sentences,
        [row_of[t.sentence] for t in triples],
        progress,
        "embed:kags-sentences",
    )
    kv.put_many(
        META,
        {"chunks": chunks_fingerprint(chunk_ids).encode(), "count": str(len(triples)).encode()},
    )


def _embed(
    index: VectorIndex,
    embedder: Embedder,
    texts: list[str],
    rows: list[int] | None,
    progress: Progress,
    stage: str,
) -> None:
    """Embed ``texts``; store text ``i`` under id ``i``, or under every id ``j`` with
    ``rows[j] == i`` when ``rows`` is given."""
    try:
        vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        for start in range(0, len(texts), WINDOW):
            vectors[start : start + WINDOW] = embedder.embed(texts[start : start + WINDOW])
            progress(stage, min(start + WINDOW, len(texts)), len(texts))
        if rows is None:
            index.add(np.arange(len(texts)), vectors)
        elif rows:
            index.add(np.arange(len(rows)), vectors[np.asarray(rows)])
        index.flush()
    finally:
        index.close()


def read_triples(
    kv: KeyValueStore, open_vectors: OpenVectors, chunk_ids: Sequence[str]
) -> TripleStore | None:
    """The stored triples, or None when this index has none: no KAGS stage completed
    in its build, or a later build without one changed the chunks (logged)."""
    count, chunks = kv.get_many(META, ["count", "chunks"])
    if count is None:
        return None
    if chunks is None or chunks.decode() != chunks_fingerprint(chunk_ids):
        logger.warning("the KAGS triples are stale (the chunks changed since); ignoring them")
        return None
    keys = [_key(i) for i in range(int(count))]
    triples = tuple(
        StoredTriple(**json.loads(raw)) for raw in kv.get_many(NAMESPACE, keys) if raw is not None
    )
    if len(triples) != len(keys):
        raise IndexIncompleteError(f"{len(keys) - len(triples)} stored KAGS triples are missing")
    return TripleStore(triples, open_vectors(TRIPLE_VECTORS), open_vectors(SENTENCE_VECTORS))
