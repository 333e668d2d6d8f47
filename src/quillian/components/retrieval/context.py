"""What retrievers read: the graph, its tables and the vector indexes, in one view.

A :class:`RetrievalContext` is assembled once when an index is opened (or built in a
test) and shared by every retriever; retrievers never write to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.retrieval.base import ScoredPassage, Seed
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.seeding import EntityLexicon
from quillian.components.retrieval.triple_store import TripleStore
from quillian.stores.protocols import VectorIndex
from quillian.stores.snapshot import EdgeKind

__all__ = ["RetrievalContext", "SeedMode"]

SeedMode = Literal["description", "lexical", "both", "auto"]


@dataclass(frozen=True, eq=False)
class RetrievalContext:
    """Read-only view of an index for retrieval.

    Vector index ids: ``chunk_vectors`` by chunk position (order of ``kg.chunk_ids``);
    ``text_vectors`` holds each distinct description or relation text once, and
    ``description_rows``/``relation_rows`` give each description's and relation's row.
    """

    kg: KnowledgeGraph
    embedder: Embedder
    chunk_vectors: VectorIndex
    text_vectors: VectorIndex
    description_rows: npt.NDArray[np.int64]
    relation_rows: npt.NDArray[np.int64]
    chunk_titles: Sequence[str]
    chunk_texts: Sequence[str]
    bm25: BM25Index | None = field(default=None)
    triples: TripleStore | None = field(default=None)
    """Triples with their source sentences (KAGS), when the index was built for them."""
    directory: Path | None = field(default=None)
    """The index directory, where a method's own build artifacts live (KAG's graph)."""

    @cached_property
    def lexicon(self) -> EntityLexicon:
        return EntityLexicon.from_names(
            (i, [e.name, *e.aliases]) for i, e in enumerate(self.kg.entities)
        )

    @cached_property
    def description_entity(self) -> npt.NDArray[np.int32]:
        return np.array([d.entity for d in self.kg.descriptions], dtype=np.int32)

    @cached_property
    def _descriptions_by_row(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return self._by_row(self.description_rows)

    @cached_property
    def _relations_by_row(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return self._by_row(self.relation_rows)

    def _by_row(
        self, rows: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """CSR of the items (descriptions or relations) whose text sits in each row."""
        order = np.argsort(rows, kind="stable")
        indptr = np.zeros(len(self.text_vectors) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(self.text_vectors)), out=indptr[1:])
        return indptr, order

    @cached_property
    def entity_specificity(self) -> npt.NDArray[np.float64]:
        """Per entity, ``log(N / df) / log(N)``: 1 for an entity one chunk mentions, near
        0 for one every chunk mentions (N chunks, df chunks linked to the entity)."""
        snapshot, n_ent = self.kg.snapshot, self.kg.n_entities
        rows = np.repeat(np.arange(snapshot.n_nodes), np.diff(snapshot.indptr))
        to_chunk = (np.asarray(snapshot.edge_kinds) == EdgeKind.DESCRIBED_BY) & (
            np.asarray(snapshot.indices) >= self.kg.chunk_offset
        )
        df = np.bincount(rows[to_chunk], minlength=snapshot.n_nodes)[:n_ent]
        n = max(len(self.kg.chunk_ids), 2)
        return np.clip(np.log(n / np.maximum(df, 1)) / np.log(n), 0.05, 1.0)

    def top_descriptions(self, q: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The ``k`` entity descriptions most similar to the query: ``(description, cos)``.

        Texts are searched once each; a text shared by several descriptions ranks them
        together, in description order.
        """
        if len(self.description_rows) == 0:
            return []
        return self._top_texts(q, k, self._descriptions_by_row)

    def top_relations(self, q: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The ``k`` relations whose texts (source sentences) are most similar to the
        query: ``(relation, cos)``, ranked like :meth:`top_descriptions`."""
        if len(self.relation_rows) == 0:
            return []
        return self._top_texts(q, k, self._relations_by_row)

    def _top_texts(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        by_row: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    ) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        indptr, order = by_row
        found: list[tuple[int, float]] = []
        fetch = k
        while True:
            rows, scores = self.text_vectors.search(q[None, :], fetch)
            found = []
            for row, score in zip(rows[0].tolist(), scores[0].tolist(), strict=True):
                if row < 0:
                    continue
                for item in order[indptr[row] : indptr[row + 1]].tolist():
                    found.append((item, score))
            if len(found) >= k or fetch >= len(self.text_vectors):
                return found[:k]
            fetch = min(len(self.text_vectors), fetch * 4)

    def passage(self, chunk: int, score: float) -> ScoredPassage:
        """The chunk at position ``chunk`` as a scored passage with its title and text."""
        return ScoredPassage(
            chunk,
            self.kg.chunk_ids[chunk],
            score,
            self.chunk_titles[chunk],
            self.chunk_texts[chunk],
        )

    def dense_ranking(self, q: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The ``k`` chunks most similar to the query vector: ``(chunk, cosine)``, best first."""
        ids, scores = self.chunk_vectors.search(q[None, :], k)
        return [
            (int(i), float(s))
            for i, s in zip(ids[0].tolist(), scores[0].tolist(), strict=True)
            if i >= 0
        ]

    def passages(self, ids: npt.ArrayLike, scores: npt.ArrayLike) -> list[ScoredPassage]:
        """Scored passages for parallel chunk positions and scores; -1 padding is skipped."""
        return [
            self.passage(int(i), float(s))
            for i, s in zip(np.asarray(ids).tolist(), np.asarray(scores).tolist(), strict=True)
            if i >= 0
        ]

    def entity_name(self, entity: int) -> str:
        return self.kg.entities[entity].name

    def seeds(
        self,
        query: str,
        q: npt.NDArray[np.float32],
        mode: SeedMode,
        k: int,
        triples: int = 0,
    ) -> list[Seed]:
        """Initially activated entities, without duplicates.

        ``lexical``: entities named in the query; ``description``: the entities of the
        top-``k`` descriptions by cosine (SA-RAG); ``both``: lexical first, then
        description; ``auto``: lexical, or description when the query names no entity.
        ``triples``: also the subjects and objects of the ``triples`` relations whose
        source sentences are nearest the query (their cosine), after the others.
        """
        found: dict[int, Seed] = {}
        if mode in ("lexical", "both", "auto"):
            for m in self.lexicon.match(query):
                name = self.entity_name(m.entity)
                found.setdefault(m.entity, Seed(m.entity, name, 1.0, "lexical"))
        if mode in ("description", "both") or (mode == "auto" and not found):
            for desc, score in self.top_descriptions(q, k):
                entity = int(self.description_entity[desc])
                name = self.entity_name(entity)
                found.setdefault(entity, Seed(entity, name, score, "description"))
        for relation, score in self.top_relations(q, triples):
            for end in (self.kg.relation_subject[relation], self.kg.relation_object[relation]):
                entity = int(end)
                if entity >= 0:
                    found.setdefault(
                        entity, Seed(entity, self.entity_name(entity), score, "triple")
                    )
        return list(found.values())

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        return self.embedder.embed([query])[0]

    def chunk_similarity(
        self, query_vector: npt.NDArray[np.float32], chunks: npt.ArrayLike
    ) -> npt.NDArray[np.float32]:
        """Cosine similarity between the query and the given chunk positions."""
        ids = np.asarray(chunks, dtype=np.int64)
        if len(ids) == 0:
            return np.zeros(0, np.float32)
        return (self.chunk_vectors.get(ids) @ query_vector).astype(np.float32)

    def relation_similarity(
        self, query_vector: npt.NDArray[np.float32], relations: npt.ArrayLike
    ) -> npt.NDArray[np.float32]:
        """Cosine similarity between the query and the given relations' texts."""
        rel = np.asarray(relations, dtype=np.int64)
        out = np.zeros(len(rel), np.float32)
        valid = rel >= 0
        if valid.any():
            rows = self.relation_rows[rel[valid]]
            unique, inverse = np.unique(rows, return_inverse=True)
            sims = self.text_vectors.get(unique) @ query_vector
            out[valid] = sims[inverse]
        return out
