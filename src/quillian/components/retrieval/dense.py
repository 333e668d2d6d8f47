"""Dense retrieval: the top-k chunks by cosine similarity to the query."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.base import RetrievalResult, check_k
from quillian.components.retrieval.context import RetrievalContext

__all__ = ["DenseRetriever"]


class DenseRetriever:
    """Top-k chunks by inner product of normalised embeddings (cosine similarity)."""

    name = "dense"

    def __init__(self, context: RetrievalContext) -> None:
        self.context = context

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        check_k(k)
        ctx = self.context
        q = ctx.embed_query(query) if query_vector is None else query_vector
        passages = [ctx.passage(c, s) for c, s in ctx.dense_ranking(q, k)]
        return RetrievalResult(self.name, query, passages)
