"""Every row of a large float32 matrix against a few query vectors, memory-bound.

Scoring every tail of a ComplEx query is one product of the entity matrix with the
query (:mod:`quillian.components.kge.scoring`). Over Wikidata5M's 4.3M entities at dim
128 that reads 2.2 GB a query, and numpy's ``query @ entities.T`` reached only about
half of this machine's memory bandwidth on the memory-mapped rows (it calls BLAS's
``sgemm`` with one or a few columns, which is tuned for products that reuse what they
read). :func:`scan_rows` reads each row once, while it is in cache, for all the queries
together, in a numba kernel that releases the GIL, on one contiguous block of rows per
core. The sums are float32 in another order than BLAS's, so scores agree with numpy's
to float32 rounding, not bit for bit.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from quillian.compiled import njit_on_first_call

__all__ = ["read_rows", "scan_rows", "scan_threads"]

Floats = npt.NDArray[np.float32]
T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def scan_threads() -> int:
    """The cores this process may run on (each scans one block of rows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(scan_threads(), thread_name_prefix="quillian-scan")
        return _pool


@njit_on_first_call(nogil=True, fastmath=True, boundscheck=False, cache=True)
def _dot_block(
    rows: Floats, queries: Floats, out: Floats, start: int, stop: int
) -> None:  # pragma: no cover - compiled
    m, d = queries.shape
    for i in range(start, stop):
        for j in range(m):
            acc = np.float32(0.0)
            for k in range(d):
                acc += rows[i, k] * queries[j, k]
            out[j, i] = acc


def scan_rows(rows: npt.ArrayLike, queries: npt.ArrayLike, threads: int | None = None) -> Floats:
    """``queries @ rows.T`` as float32, shape ``(len(queries), len(rows))``: ``rows``
    (``(n, d)``, float32, may be memory-mapped) split into ``threads`` blocks (default:
    :func:`scan_threads`), each scanned once for every query."""
    matrix = np.ascontiguousarray(rows, dtype=np.float32)  # no copy when it already is
    wanted = np.ascontiguousarray(np.atleast_2d(np.asarray(queries, dtype=np.float32)))
    if matrix.ndim != 2 or wanted.ndim != 2 or wanted.shape[1] != matrix.shape[1]:
        raise ValueError(f"cannot scan rows {matrix.shape} with queries {wanted.shape}")
    out = np.empty((len(wanted), len(matrix)), dtype=np.float32)
    _in_blocks(lambda a, b: _dot_block(matrix, wanted, out, a, b), len(matrix), threads)
    return out


@njit_on_first_call(nogil=True, fastmath=True, boundscheck=False, cache=True)
def _sum_block(rows: Floats, start: int, stop: int) -> float:  # pragma: no cover - compiled
    acc = np.zeros(rows.shape[1], dtype=np.float32)
    for i in range(start, stop):
        for k in range(rows.shape[1]):
            acc[k] += rows[i, k]
    return float(acc.sum())


def read_rows(rows: npt.ArrayLike, threads: int | None = None) -> float:
    """Every float of ``rows`` read once, in the blocks and threads of :func:`scan_rows`,
    and summed: the least time any exact float32 scan of them can take here (the memory
    floor the benchmark sets :func:`scan_rows` beside). Returns the sum."""
    matrix = np.ascontiguousarray(rows, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"cannot read rows of shape {matrix.shape}")
    sums = _in_blocks(lambda a, b: _sum_block(matrix, a, b), len(matrix), threads)
    return float(sum(sums))


def _in_blocks(kernel: Callable[[int, int], T], n: int, threads: int | None) -> list[T]:
    """``kernel(start, stop)`` on ``threads`` contiguous blocks of ``range(n)``, one per
    core, each in the pool (the kernels release the GIL); their results in order."""
    blocks = max(1, min(threads or scan_threads(), n))
    cuts = np.linspace(0, n, blocks + 1).astype(np.int64).tolist()
    if blocks == 1:
        return [kernel(0, n)]
    futures = [_executor().submit(kernel, a, b) for a, b in itertools.pairwise(cuts)]
    return [future.result() for future in futures]
