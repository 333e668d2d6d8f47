"""A vector collection held in memory as it was read: what a server replica searches
for a collection written by position, so it answers from the build it opened while
another process rewrites the collection.

A build that writes a collection by position (an index built before keyed collections,
until its next build converts it; a method's own collections, such as KAGS's triples)
empties it and fills it again; a replica that searched the table meanwhile would find
it empty, half filled, or holding ids its own build never had. A pinned copy is read
once, when the index is opened (between the two reads of the manifest's generation
that prove the files and rows belong to one build), and searched exactly, ties by the
smaller id (the best candidates scored again in float64, so copies of a vector tie), as
the table is searched up to its exact-search size. It costs ``4 * dim`` bytes of
memory per vector (a 384-dimensional collection: 1.5 KiB each). The default stages'
collections are keyed by content and need no copy: their deletes are deferred
(:mod:`quillian.stores.postgres.vectors`), so the live table serves an older snapshot.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.errors import StoreError
from quillian.stores.embedded._vecutil import (
    TIE_MARGIN,
    UnknownIdError,
    as_ids,
    as_matrix,
    check_k,
    rescore,
    search_among,
)
from quillian.stores.protocols import VectorIndex

__all__ = ["PinnedVectors"]


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
        wide = min(2 * k + TIE_MARGIN, len(self._ids))
        candidates, _ = search_among(q, wide, self._ids, self._vectors)
        return rescore(q, candidates, self.get, k)

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

    def delete(self, ids: npt.ArrayLike) -> None:
        raise StoreError(f"vector collection {self.name!r} is a read-only copy")

    def ids(self) -> npt.NDArray[np.int64]:
        """Every id held, ascending."""
        return self._ids.copy()

    def flush(self) -> None:
        """Nothing to write."""

    def close(self) -> None:
        """Nothing to release (the memory goes with the object)."""
