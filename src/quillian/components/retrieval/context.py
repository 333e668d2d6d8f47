"""What retrievers read: the graph, its tables and the vector indexes, in one view.

A :class:`RetrievalContext` is assembled once when an index is opened (or built in a
test) and shared by every retriever; retrievers never write to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.retrieval.base import ScoredPassage, Seed
from quillian.components.retrieval.seeding import EntityLexicon, description_seeds
from quillian.stores.protocols import VectorIndex

__all__ = ["RetrievalContext"]


@dataclass(frozen=True, eq=False)
class RetrievalContext:
    """Read-only view of an index for retrieval.

    Vector index ids: ``chunk_vectors`` by chunk position (order of ``kg.chunk_ids``),
    ``description_vectors`` by description position, ``relation_vectors`` by the row in
    ``relation_rows`` (relations sharing a text share a row).
    """

    kg: KnowledgeGraph
    embedder: Embedder
    chunk_vectors: VectorIndex
    description_vectors: VectorIndex
    relation_vectors: VectorIndex
    relation_rows: npt.NDArray[np.int64]
    chunk_titles: Sequence[str]
    chunk_texts: Sequence[str]
    bm25: object | None = field(default=None)

    @cached_property
    def lexicon(self) -> EntityLexicon:
        return EntityLexicon.from_names(
            (i, [e.name, *e.aliases]) for i, e in enumerate(self.kg.entities)
        )

    @cached_property
    def description_entity(self) -> npt.NDArray[np.int32]:
        return np.array([d.entity for d in self.kg.descriptions], dtype=np.int32)

    def passage(self, chunk: int, score: float) -> ScoredPassage:
        """The chunk at position ``chunk`` as a scored passage with its title and text."""
        return ScoredPassage(chunk, self.kg.chunk_ids[chunk], score, self.chunk_titles[chunk],
                             self.chunk_texts[chunk])

    def entity_name(self, entity: int) -> str:
        return self.kg.entities[entity].name

    def seeds(
        self,
        query: str,
        q: npt.NDArray[np.float32],
        mode: Literal["description", "lexical", "both"],
        k: int,
    ) -> list[Seed]:
        """Initially activated entities: lexical matches first, then the entities of the
        top-``k`` descriptions by cosine (SA-RAG), without duplicates."""
        found: dict[int, Seed] = {}
        if mode in ("lexical", "both"):
            for m in self.lexicon.match(query):
                name = self.entity_name(m.entity)
                found.setdefault(m.entity, Seed(m.entity, name, 1.0, "lexical"))
        if mode in ("description", "both"):
            for entity, score in description_seeds(
                self.description_vectors, self.description_entity, q, k
            ):
                name = self.entity_name(entity)
                found.setdefault(entity, Seed(entity, name, score, "description"))
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
            sims = self.relation_vectors.get(unique) @ query_vector
            out[valid] = sims[inverse]
        return out
