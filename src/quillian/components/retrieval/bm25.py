"""Top-k chunks by BM25 (:class:`~quillian.components.retrieval.bm25_index.BM25Index`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.base import RetrievalResult, check_k
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.context import RetrievalContext

__all__ = ["BM25Retriever"]


class BM25Retriever:
    """Top-k chunks by BM25: exactly ``min(k, chunks)`` of them. When fewer chunks share
    a word with the query, the rest follow in index order with their BM25 score, 0."""

    name = "bm25"

    def __init__(self, context: RetrievalContext, index: BM25Index) -> None:
        self.context = context
        self.index = index

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        check_k(k)
        ids, scores = self.index.search(query, k)
        wanted = min(k, len(self.context.kg.chunk_ids))
        if len(ids) < wanted:
            unmatched = np.setdiff1d(np.arange(wanted + len(ids)), ids)[: wanted - len(ids)]
            ids = np.concatenate([ids, unmatched])
            scores = np.concatenate([scores, np.zeros(len(unmatched), np.float32)])
        return RetrievalResult(self.name, query, self.context.passages(ids, scores))
