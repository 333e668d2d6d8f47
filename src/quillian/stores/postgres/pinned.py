"""A vector collection held in memory as it was read: what a server replica searches, so
it answers from the build it opened while another process rewrites the collection.

A build empties a PostgreSQL collection and fills it again (ids by position); a replica
that searched the table meanwhile would find it empty, half filled, or holding ids its
own build never had (a passage position past its chunk list). A pinned copy is read
once, when the index is opened (between the two reads of the manifest's generation
that prove the files and rows belong to one build), and searched exactly, ties by the
smaller id (the best candidates scored again in float64, so copies of a vector tie), as
the table is searched up to its exact-search size. It costs
``4 * dim`` bytes of memory per vector (a 384-dimensional collection: 1.5 KiB each).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.errors import StoreError
from quillian.stores.embedded._vecutil import (
    UnknownIdError,
    as_ids,
    as_matrix,
    check_k,
    search_among,
)
from quillian.stores.protocols import VectorIndex

__all__ = ["PinnedVectors"]

#: Candidates beyond twice ``k`` that the float32 search passes on to be scored again
#: in float64, so that ties at the k-th place are all seen: a matrix product may score
#: two copies of one vector a float32 ulp apart (their rows summed in other lanes),
#: where pgvector scores them alike and ranks them by id.
TIE_MARGIN = 8


class PinnedVectors:
    """A read-only :class:`~quillian.stores.protocols.VectorIndex` over ids and
    vectors in memory."""

    def __init__(self, name: str, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]):
        order = np.argsort(ids, kind="stable")
        self.name = name
        self._ids = np.ascontiguousarray(ids[order])
        self._vectors = np.ascontiguousarray(vectors[order])
        self._dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0

    @classmethod
    def read(cls, name: str, index: VectorIndex) -> PinnedVectors:
        """Every vector of ``index`` (a collection written with ids ``0..n-1``, as the
        build writes them), read now; the handle is closed."""
        try:
            ids = np.arange(len(index), dtype=np.int64)
            vectors = index.get(ids) if len(ids) else np.zeros((0, index.dim), np.float32)
            pinned = cls(name, ids, vectors.reshape(len(ids), index.dim))
        finally:
            index.close()
        return pinned

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"PinnedVectors({self.name!r}, {len(self)} vectors)"

    def search(
        self, queries: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best ids and inner-product scores per query, best first (exact)."""
        q = as_matrix(queries, self._dim, field="queries")
        k = check_k(k)
        if not len(self._ids):
            width = (len(q), 0)
            return np.full(width, -1, np.int64), np.full(width, -np.inf, np.float32)
        k = min(k, len(self._ids))
        candidates, _ = search_among(q, min(2 * k + TIE_MARGIN, len(self._ids)), self._ids,
                                     self._vectors)  # fmt: skip
        ids = np.empty((len(q), k), np.int64)
        scores = np.empty((len(q), k), np.float32)
        for j, found in enumerate(candidates):  # rescored one by one: copies tie exactly
            rows = self._vectors[np.searchsorted(self._ids, found)].astype(np.float64)
            exact = (rows @ q[j].astype(np.float64)).astype(np.float32)
            order = np.lexsort((found, -exact))[:k]
            ids[j], scores[j] = found[order], exact[order]
        return ids, scores

    def get(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Vectors in the order of ``ids``; raises :class:`UnknownIdError`."""
        wanted = as_ids(ids)
        rows = np.minimum(np.searchsorted(self._ids, wanted), max(len(self._ids) - 1, 0))
        missing = self._ids[rows] != wanted if len(self._ids) else np.ones(len(wanted), bool)
        if missing.any():
            raise UnknownIdError(np.unique(wanted[missing]))
        return self._vectors[rows]

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        raise StoreError(f"vector collection {self.name!r} is a read-only copy")

    def flush(self) -> None:
        """Nothing to write."""

    def close(self) -> None:
        """Nothing to release (the memory goes with the object)."""
