"""Top-k chunks by BM25 (:class:`~quillian.components.retrieval.bm25_index.BM25Index`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.base import RetrievalResult, check_k
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.context import RetrievalContext

__all__ = ["BM25Retriever"]


class BM25Retriever:
    """Top-k chunks by BM25."""

    name = "bm25"

    def __init__(self, context: RetrievalContext, index: BM25Index) -> None:
        self.context = context
        self.index = index

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        check_k(k)
        ids, scores = self.index.search(query, k)
        return RetrievalResult(self.name, query, self.context.passages(ids, scores))
