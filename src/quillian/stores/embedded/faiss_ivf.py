"""Approximate search over a bulk-built FAISS inverted-file index (optional extra ``ann``).

A :class:`FaissIVFIndex` is a read-only companion of an
:class:`~quillian.stores.embedded.vectors.ExactVectorIndex` with millions of rows: the
vectors are split into ``nlist`` lists by a spherical k-means (a flat coarse quantizer
trained on a sample), and a search scans only the ``nprobe`` lists nearest the query.
Kinds, by how a list stores its vectors:

* ``ivf-sq8`` - one byte per dimension (8-bit scalar quantizer, per-dimension ranges);
* ``ivf-fp16`` - two bytes per dimension;
* ``ivf-pq`` - product quantization (``pq_m`` bytes per vector); the ``rerank`` best
  candidates are then scored exactly from the float vectors of the exact index.

Any kind may re-rank (``rerank`` > 0). The index is written once by :meth:`build`,
committed like the other embedded indexes (``index.json`` names generation files:
``ivf-NNNNNN.faiss``), and opened memory-mapped, so opening is instant and untouched
lists cost no memory. FAISS is imported when an index is built or opened, never at
module import; without it :class:`~quillian.errors.MissingExtraError` names the extra.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError, IndexIncompleteError, InputError, StoreError
from quillian.stores.embedded._vecutil import as_matrix, check_k, search_among
from quillian.stores.embedded.faiss_hnsw import import_faiss
from quillian.stores.embedded.files import Generations
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.types import Progress, no_progress

__all__ = ["IVF_KINDS", "FaissIVFIndex", "IVFOptions", "default_nlist"]

log = logging.getLogger(__name__)

IVF_KINDS = ("ivf-sq8", "ivf-fp16", "ivf-pq")


@dataclass(frozen=True)
class IVFOptions:
    """How a :class:`FaissIVFIndex` is built (and the search defaults it records)."""

    kind: str = "ivf-sq8"
    """``ivf-sq8``, ``ivf-fp16`` or ``ivf-pq`` (see the module docstring)."""
    nlist: int | None = None
    """Number of lists; None: :func:`default_nlist` of the vector count."""
    nprobe: int = 128
    """Lists scanned per query by default (searches may pass another). At 4.3M vectors
    (2048 lists) 128 costs about 23 ms a query on 2 cores, leaving room for the query
    embedding under 50 ms; on WordNet's glosses (256 lists) it finds 98% of the exact
    top 10 (``research/kg_ann.py``, ``kg_scale``)."""
    rerank: int | None = None
    """Candidates re-scored exactly from the float vectors (0: none); None: 100 for
    ``ivf-pq``, 0 otherwise."""
    pq_m: int = 48
    """``ivf-pq``: sub-quantizers, i.e. bytes per vector; must divide the dimension."""
    train_per_list: int = 40
    """Training sample size per list (k-means and the vector quantizer)."""
    niter: int = 10
    """k-means iterations."""
    batch: int = 65_536
    """Vectors read and added per step (bounds the build's extra memory)."""
    seed: int = 0
    """Seed of the training sample and the k-means."""

    def __post_init__(self) -> None:
        if self.kind not in IVF_KINDS:
            raise ConfigError(f"kind must be one of {', '.join(IVF_KINDS)}, got {self.kind!r}")
        positive = {"nprobe": self.nprobe, "pq_m": self.pq_m, "niter": self.niter}
        positive |= {"train_per_list": self.train_per_list, "batch": self.batch}
        if self.nlist is not None:
            positive["nlist"] = self.nlist
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{name} must be greater than 0, got {value}")
        if self.rerank is not None and self.rerank < 0:
            raise ConfigError(f"rerank must be >= 0, got {self.rerank}")

    @property
    def rerank_count(self) -> int:
        """``rerank`` with its per-kind default applied."""
        if self.rerank is not None:
            return self.rerank
        return 100 if self.kind == "ivf-pq" else 0


def default_nlist(n: int) -> int:
    """Lists for ``n`` vectors: the power of two nearest ``sqrt(n)`` (2048 for 4.3M),
    kept below ``n / 39`` so that k-means has enough points per list.

    The textbook ``4 * sqrt(n)`` makes search cheaper but the flat coarse assignment of
    every vector four times dearer: at 4.3M vectors of 384 dimensions on 2 cores,
    about 11 minutes for 8192 lists against 3 for 2048 (measured).
    """
    if n <= 0:
        return 1
    nearest = 2 ** round(math.log2(max(1.0, math.sqrt(n))))
    ceiling = 2 ** int(math.log2(max(1, n // 39))) if n >= 39 else 1
    return max(1, min(nearest, ceiling))


class FaissIVFIndex:
    """Approximate inner-product search over FAISS inverted lists; read-only.

    Args:
        directory: an index written by :meth:`build`.
        exact: the exact index it was built from; needed to re-rank (``ivf-pq``).
        nprobe: lists scanned per query (default: the one recorded at build time).
        rerank: candidates re-scored exactly (default: recorded; 0 turns it off).

    Results carry the source index's ids. When the scanned lists hold fewer than ``k``
    vectors, a row is padded with id -1 and score -inf.
    """

    KIND = "faiss-ivf"

    def __init__(
        self,
        directory: str | Path,
        *,
        exact: ExactVectorIndex | None = None,
        nprobe: int | None = None,
        rerank: int | None = None,
    ) -> None:
        self._faiss = import_faiss()
        self._files = Generations(Path(directory), self.KIND)
        meta = self._files.read()
        if meta is None:
            raise IndexIncompleteError(f"{directory}: no committed IVF index")
        self.meta = meta
        path = self._files.path("ivf", int(meta["generation"]), ".faiss")
        try:
            self._index = self._faiss.read_index(str(path), self._faiss.IO_FLAG_MMAP)
        except (OSError, RuntimeError) as exc:
            raise IndexIncompleteError(f"{path}: cannot read the index: {exc}") from exc
        if self._index.ntotal != meta["count"] or self._index.d != meta["dim"]:
            raise IndexIncompleteError(f"{path}: does not hold what {self._files.MANIFEST} says")
        self.nprobe = int(nprobe if nprobe is not None else meta["nprobe"])
        self.rerank = int(rerank if rerank is not None else meta["rerank"])
        if self.nprobe <= 0 or self.rerank < 0:
            raise ConfigError(f"nprobe must be > 0 and rerank >= 0, got {nprobe}, {rerank}")
        if self.rerank and exact is None:
            raise ConfigError(f"{directory}: re-ranking needs the exact index (exact=...)")
        self._exact = exact

    @classmethod
    def build(
        cls,
        directory: str | Path,
        source: ExactVectorIndex,
        options: IVFOptions | None = None,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """Build an index of every vector of ``source`` in the new ``directory``; returns
        what its manifest records (kind, nlist, nprobe, rerank, seconds, bytes)."""
        faiss = import_faiss()
        options = options or IVFOptions()
        files = Generations(Path(directory), cls.KIND)
        if files.read() is not None:
            raise StoreError(f"{directory}: already holds an IVF index")
        n, dim = len(source), source.dim
        if not n:
            raise InputError("cannot build an IVF index of no vectors", field="vectors")
        nlist = min(options.nlist or default_nlist(n), n)
        if options.kind == "ivf-pq" and dim % options.pq_m:
            raise ConfigError(f"pq_m {options.pq_m} does not divide the dimension {dim}")
        started = time.perf_counter()
        sample = _training_sample(source, options.train_per_list * nlist, options)
        progress("ann-train", 0, 1)
        index = _new_index(faiss, options, dim, nlist, sample)
        progress("ann-train", 1, 1)
        trained = time.perf_counter()
        _add_sized(faiss, index, source, options.batch, progress)
        files.directory.mkdir(parents=True, exist_ok=True)
        path = files.path("ivf", 1, ".faiss")
        faiss.write_index(index, str(path))
        del index
        meta = {
            "generation": 1,
            "dim": dim,
            "count": n,
            "method": options.kind,
            "nlist": nlist,
            "nprobe": min(options.nprobe, nlist),
            "rerank": options.rerank_count,
            "options": asdict(options),
            "train_points": len(sample),
            "seconds": {
                "train": round(trained - started, 1),
                "add": round(time.perf_counter() - trained, 1),
            },
            "bytes": path.stat().st_size,
        }
        files.commit(meta, [path])
        return meta

    @property
    def directory(self) -> Path:
        """The index directory."""
        return self._files.directory

    @property
    def method(self) -> str:
        """``ivf-sq8``, ``ivf-fp16`` or ``ivf-pq``."""
        return str(self.meta["method"])

    @property
    def nlist(self) -> int:
        return int(self.meta["nlist"])

    @property
    def dim(self) -> int:
        return int(self._index.d)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return (
            f"FaissIVFIndex({str(self.directory)!r}, {self.method}, nlist={self.nlist}, "
            f"nprobe={self.nprobe}, rerank={self.rerank})"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def search(
        self, queries: npt.ArrayLike, k: int, *, nprobe: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The (approximately) ``k`` best ids and inner-product scores per query."""
        if self._index is None:
            raise StoreError(f"{self.directory}: the IVF index is closed")
        q = as_matrix(queries, self.dim, field="queries")
        k = min(check_k(k), len(self))
        params = self._faiss.SearchParametersIVF()
        params.nprobe = min(nprobe or self.nprobe, self.nlist)
        shortlist = min(max(k, self.rerank), len(self))
        scores, ids = self._index.search(q, shortlist, params=params)
        ids = ids.astype(np.int64)
        if self.rerank and self._exact is not None:
            return self._rescore(q, ids, k)
        return ids[:, :k], np.where(ids[:, :k] >= 0, scores[:, :k], -np.inf).astype(np.float32)

    def close(self) -> None:
        """Release the memory-mapped index; closing twice is harmless."""
        self._index = None

    def _rescore(
        self, queries: npt.NDArray[np.float32], candidates: npt.NDArray[np.int64], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Exact scores of each query's candidates, the best ``k`` first."""
        assert self._exact is not None
        out_ids = np.full((len(queries), k), -1, dtype=np.int64)
        out_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        for row, (query, found) in enumerate(zip(queries, candidates, strict=True)):
            found = np.unique(found[found >= 0])
            if not len(found):
                continue
            ids, scores = search_among(query[None, :], k, found, self._exact.get(found))
            out_ids[row, : ids.shape[1]] = ids[0]
            out_scores[row, : ids.shape[1]] = scores[0]
        return out_ids, out_scores


def _training_sample(
    source: ExactVectorIndex, size: int, options: IVFOptions
) -> npt.NDArray[np.float32]:
    """``size`` rows of ``source`` drawn at random, read in one streamed pass."""
    n = len(source)
    rng = np.random.default_rng(options.seed)
    rows = np.sort(rng.choice(n, min(size, n), replace=False))
    parts = []
    offset = 0
    for _, vectors in source.read_batches(options.batch):
        lo, hi = np.searchsorted(rows, [offset, offset + len(vectors)])
        parts.append(vectors[rows[lo:hi] - offset])
        offset += len(vectors)
    return np.ascontiguousarray(np.concatenate(parts))


def _add_sized(
    faiss: Any, index: Any, source: ExactVectorIndex, batch: int, progress: Progress
) -> None:
    """Add every vector of ``source``, each inverted list allocated once at its final size.

    ``add_with_ids`` would grow the lists by doubling, so the build could hold up to
    twice the codes' memory. Here a first pass assigns every vector to its list (8
    bytes a vector), the lists are sized, and a second pass encodes and places them.
    """
    n = len(source)
    lists = np.empty(n, dtype=np.int64)
    done = 0
    for _, vectors in source.read_batches(batch):
        _, assigned = index.quantizer.search(vectors, 1)
        lists[done : done + len(vectors)] = assigned[:, 0]
        done += len(vectors)
        progress("ann-assign", done, n)
    invlists = index.invlists
    counts = np.bincount(lists, minlength=index.nlist)
    for number in np.flatnonzero(counts).tolist():
        invlists.resize(number, int(counts[number]))
    filled = np.zeros(index.nlist, dtype=np.int64)
    done = 0
    for ids, vectors in source.read_batches(batch):
        assigned = lists[done : done + len(ids)]
        codes = np.empty((len(ids), index.code_size), dtype=np.uint8)
        index.encode_vectors(
            len(ids), faiss.swig_ptr(vectors), faiss.swig_ptr(assigned), faiss.swig_ptr(codes)
        )
        order = np.argsort(assigned, kind="stable")
        by_list = assigned[order]
        ids, codes = np.ascontiguousarray(ids[order]), np.ascontiguousarray(codes[order])
        starts = np.flatnonzero(np.r_[True, by_list[1:] != by_list[:-1]]).tolist()
        for start, stop in zip(starts, [*starts[1:], len(ids)], strict=True):
            number = int(by_list[start])
            invlists.update_entries(
                number,
                int(filled[number]),
                stop - start,
                faiss.swig_ptr(ids[start:stop]),
                faiss.swig_ptr(codes[start:stop]),
            )
            filled[number] += stop - start
        done += len(ids)
        progress("ann-add", done, n)
    index.ntotal = n


def _new_index(
    faiss: Any, options: IVFOptions, dim: int, nlist: int, sample: npt.NDArray[np.float32]
) -> Any:
    """A trained, empty index: spherical k-means centroids, then the vector codec."""
    kmeans = faiss.Kmeans(dim, nlist, niter=options.niter, spherical=True, seed=options.seed)
    kmeans.cp.min_points_per_centroid = 1  # few points per list is the caller's choice
    kmeans.train(sample)
    quantizer = faiss.IndexFlatIP(dim)
    quantizer.add(kmeans.centroids)
    ip = faiss.METRIC_INNER_PRODUCT
    if options.kind == "ivf-pq":
        index = faiss.IndexIVFPQ(quantizer, dim, nlist, options.pq_m, 8, ip)
    else:
        sq = faiss.ScalarQuantizer
        codec = {"ivf-sq8": sq.QT_8bit, "ivf-fp16": sq.QT_fp16}
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, codec[options.kind], ip, False)
    index.train(sample)  # the quantizer is trained: this trains the codec only
    return index
