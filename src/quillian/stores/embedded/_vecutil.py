"""Validation, id lookup and top-k helpers shared by the embedded vector indexes."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError, InputError, UnknownIdError
from quillian.stores.snapshot import distinct_order

__all__ = [
    "BLOCK",
    "TIE_MARGIN",
    "GrowableIds",
    "GrowableRows",
    "RowLookup",
    "Segment",
    "UnknownIdError",
    "as_ids",
    "as_matrix",
    "check_k",
    "exact_topk",
    "keep_last",
    "merge_topk",
    "rescore",
    "search_among",
    "topk",
]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


def as_ids(ids: npt.ArrayLike) -> I64:
    """``ids`` as a 1-D int64 array, every id non-negative."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InputError(f"ids must be one-dimensional, got shape {arr.shape}", field="ids")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"ids must be integers, got {arr.dtype}", field="ids")
    out = arr.astype(np.int64, copy=False)
    if out.size and out.min() < 0:
        raise InputError(f"ids must be non-negative, got {int(out.min())}", field="ids")
    return out


def as_matrix(vectors: npt.ArrayLike, dim: int, field: str = "vectors") -> F32:
    """``vectors`` as a finite 2-D float32 array of ``dim`` columns (a 1-D one is one row)."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InputError(f"expected {dim}-dimensional vectors, got shape {arr.shape}", field=field)
    if not np.isfinite(arr).all():
        raise InputError("vectors contain NaN or infinite values", field=field)
    return np.ascontiguousarray(arr)


def check_k(k: int) -> int:
    """``k`` itself when it is a positive int."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k <= 0:
        raise InputError(f"k must be a positive integer, got {k!r}", field="k")
    return int(k)


def check_dim(dim: int | None, directory: object) -> int:
    """The dimension of a new index, which must be given and positive."""
    if dim is None:
        raise ConfigError(f"{directory}: no index there yet, so its dim must be given")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
        raise ConfigError(f"dim must be a positive integer, got {dim!r}")
    return dim


def keep_last(ids: I64, vectors: F32) -> tuple[I64, F32]:
    """Drop all but the last occurrence of each repeated id (later wins)."""
    if len(np.unique(ids)) == len(ids):
        return ids, vectors
    _, first_in_reversed = np.unique(ids[::-1], return_index=True)
    keep = np.sort(len(ids) - 1 - first_in_reversed)
    return ids[keep], vectors[keep]


class RowLookup:
    """Maps ids to rows: a sorted array for the bulk plus a dict of recent updates.

    About 16 bytes per id instead of ~100 for a dict; the dict is folded into the
    arrays once it outgrows a quarter of them, so updates stay amortised O(log n).
    """

    def __init__(self, ids: I64 | None = None) -> None:
        ids = np.empty(0, np.int64) if ids is None else np.asarray(ids, np.int64)
        order = distinct_order(ids)
        self._keys: I64 = ids[order]
        self._rows: I64 = order.astype(np.int64)
        self._recent: dict[int, int] = {}

    @classmethod
    def of(cls, ids: I64, rows: I64) -> RowLookup:
        """A lookup of distinct ``ids`` at the given ``rows``."""
        lookup = cls()
        order = distinct_order(ids)
        lookup._keys, lookup._rows = ids[order], np.asarray(rows, np.int64)[order]
        return lookup

    def copy(self) -> RowLookup:
        """A lookup of the same rows that changes apart from this one (the sorted
        arrays shared: :meth:`set` never changes them in place)."""
        twin = RowLookup()
        twin._keys, twin._rows, twin._recent = self._keys, self._rows, dict(self._recent)
        return twin

    def rows_of(self, ids: I64) -> I64:
        """Row of each id, -1 where absent."""
        rows = np.full(len(ids), -1, dtype=np.int64)
        if len(self._keys):
            pos = np.minimum(np.searchsorted(self._keys, ids), len(self._keys) - 1)
            hit = self._keys[pos] == ids
            rows[hit] = self._rows[pos[hit]]
        if self._recent:
            for i, key in enumerate(ids.tolist()):
                rows[i] = self._recent.get(key, rows[i])
        return rows

    def set(self, ids: I64, rows: I64) -> None:
        """Point each of ``ids`` at its row in ``rows``."""
        self._recent.update(zip(ids.tolist(), rows.tolist(), strict=True))
        if len(self._recent) > max(4096, len(self._keys) // 4):
            self._fold()

    def _fold(self) -> None:
        new_keys = np.fromiter(self._recent.keys(), np.int64, len(self._recent))
        new_rows = np.fromiter(self._recent.values(), np.int64, len(self._recent))
        stale = np.isin(self._keys, new_keys)
        keys = np.concatenate([self._keys[~stale], new_keys])
        rows = np.concatenate([self._rows[~stale], new_rows])
        order = distinct_order(keys)
        self._keys, self._rows, self._recent = keys[order], rows[order], {}


class GrowableRows:
    """An in-memory ``(n, dim)`` array plus ids that grows by doubling its capacity."""

    def __init__(self, dim: int, dtype: npt.DTypeLike) -> None:
        self._vectors = np.empty((0, dim), dtype=dtype)
        self._ids = np.empty(0, dtype=np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def vectors(self) -> npt.NDArray[np.generic]:
        return self._vectors[: self._n]

    @property
    def ids(self) -> I64:
        return self._ids[: self._n]

    def append(self, ids: I64, vectors: npt.NDArray[np.generic]) -> I64:
        """Append rows; returns their row numbers."""
        need = self._n + len(ids)
        if need > len(self._ids):
            capacity = max(need, 2 * len(self._ids), 1024)
            grown = np.empty((capacity, self._vectors.shape[1]), dtype=self._vectors.dtype)
            grown[: self._n] = self.vectors
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_ids[: self._n] = self.ids
            self._vectors, self._ids = grown, grown_ids
        self._vectors[self._n : need] = vectors
        self._ids[self._n : need] = ids
        rows = np.arange(self._n, need, dtype=np.int64)
        self._n = need
        return rows

    def overwrite(self, rows: I64, vectors: npt.NDArray[np.generic]) -> None:
        """Replace the vectors of existing ``rows``."""
        self._vectors[rows] = vectors


class GrowableIds:
    """An in-memory int64 array that grows by doubling its capacity."""

    def __init__(self, ids: I64 | None = None) -> None:
        self._ids = np.array([] if ids is None else ids, dtype=np.int64)
        self._n = len(self._ids)

    def __len__(self) -> int:
        return self._n

    @property
    def array(self) -> I64:
        """The ids (a view: writing to it updates the column)."""
        return self._ids[: self._n]

    def append(self, ids: I64) -> I64:
        """Append ids; returns their row numbers."""
        need = self._n + len(ids)
        if need > len(self._ids):
            grown = np.empty(max(need, 2 * len(self._ids), 1024), dtype=np.int64)
            grown[: self._n] = self.array
            self._ids = grown
        self._ids[self._n : need] = ids
        rows = np.arange(self._n, need, dtype=np.int64)
        self._n = need
        return rows


def topk(scores: F32, k: int) -> npt.NDArray[np.intp]:
    """Column indices of the ``k`` best scores of each row (unordered)."""
    if k >= scores.shape[1]:
        return np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    return np.argpartition(-scores, k - 1, axis=1)[:, :k]


def merge_topk(ids: I64, scores: F32, new_ids: I64, new_scores: F32, k: int) -> tuple[I64, F32]:
    """Keep the ``k`` best of two candidate sets per row (unordered)."""
    all_ids = np.concatenate([ids, new_ids], axis=1)
    all_scores = np.concatenate([scores, new_scores], axis=1)
    best = topk(all_scores, k)
    return np.take_along_axis(all_ids, best, 1), np.take_along_axis(all_scores, best, 1)


def sort_desc(ids: I64, scores: F32) -> tuple[I64, F32]:
    """Order each row best first (ties broken by the smaller id)."""
    order = np.lexsort((ids, -scores), axis=-1) if ids.size else np.zeros(ids.shape, np.intp)
    return np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)


#: Scores computed per matrix product: bounds the scratch memory of a search (64 MiB).
BLOCK = 1 << 24
_QUERY_BLOCK = 1024

Segment = tuple[npt.NDArray[np.generic], npt.NDArray[np.int64], npt.NDArray[np.bool_] | None]


def exact_topk(queries: F32, segments: Iterable[Segment], k: int) -> tuple[I64, F32]:
    """Exact inner-product top-``k`` over row blocks of ``(vectors, ids, dead)`` segments.

    Rows marked in ``dead`` are skipped. Blocks are cast to float32 one at a time, so a
    float16 or memory-mapped matrix is never materialised whole. ``k`` must not exceed
    the number of live rows. Returns ``(ids, scores)`` best first.
    """
    segments = list(segments)
    parts = [
        _topk_queries(queries[s : s + _QUERY_BLOCK], segments, k)
        for s in range(0, len(queries), _QUERY_BLOCK)
    ]
    if not parts:
        return np.empty((0, k), np.int64), np.empty((0, k), np.float32)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _topk_queries(queries: F32, segments: list[Segment], k: int) -> tuple[I64, F32]:
    n_q = len(queries)
    best_ids = np.empty((n_q, 0), np.int64)
    best_scores = np.empty((n_q, 0), np.float32)
    for vectors, ids, dead in segments:
        step = max(256, min(BLOCK // max(n_q, 1), BLOCK // max(vectors.shape[1], 1)))
        for start in range(0, len(vectors), step):
            stop = start + step
            scores = queries @ np.asarray(vectors[start:stop], dtype=np.float32).T
            if dead is not None:
                scores[:, dead[start:stop]] = -np.inf
            cols = topk(scores, k)
            block_ids = np.asarray(ids[start:stop])[cols]
            block_scores = np.take_along_axis(scores, cols, 1)
            best_ids, best_scores = merge_topk(best_ids, best_scores, block_ids, block_scores, k)
    return sort_desc(best_ids, best_scores)


#: Candidates beyond twice ``k`` that a float32 search passes on to :func:`rescore`, so
#: that ties at the k-th place are all seen: a matrix product may score two copies of
#: one vector a float32 ulp apart (their rows summed in other lanes).
TIE_MARGIN = 8


def rescore(
    queries: F32, candidates: I64, vectors_of: Callable[[I64], F32], k: int
) -> tuple[I64, F32]:
    """The ``k`` best of each query's ``candidates`` (ids, -1 for none), scored again
    one vector at a time in float64 and ranked by score, then the smaller id: the same
    ranking wherever the vectors lie in an index. ``k`` must not exceed any row's
    candidates."""
    unique = np.unique(candidates[candidates >= 0])
    matrix = vectors_of(unique).astype(np.float64)
    ids = np.empty((len(queries), k), np.int64)
    scores = np.empty((len(queries), k), np.float32)
    for j, found in enumerate(candidates):
        found = found[found >= 0]
        rows = matrix[np.searchsorted(unique, found)]
        exact = (rows @ queries[j].astype(np.float64)).astype(np.float32)
        order = np.lexsort((found, -exact))[:k]
        ids[j], scores[j] = found[order], exact[order]
    return ids, scores


def search_among(queries: F32, k: int, ids: I64, vectors: F32) -> tuple[I64, F32]:
    """Exact top-``k`` among the given rows only (the ``allowed`` search of both indexes)."""
    return exact_topk(queries, [(vectors, ids, None)], min(k, len(ids)))
