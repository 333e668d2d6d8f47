"""Benchmark the embedded vector indexes: exact numpy (float32, float16, int8) against FAISS HNSW.

Run ``python research/vectors.py --n 200000 --dim 384 --queries 200``. It prints
one JSON object: per index the build time (add plus flush), reopen time, single-query
latency (p50/p95, after warm-up), batch throughput, recall@k against exact float32 and
memory (bytes on disk, growth of the process's resident set). FAISS is measured at
several ``ef_search`` values. The exact indexes search single queries through their int8
sketch (the default); ``scan`` is the same index searching every float
(``sketch=False``), the two timed query by query in turns, with the time the sketch took
to build and whether both returned the same ids. Progress goes to stderr.

The data are synthetic, clustered like sentence embeddings: ``--clusters`` unit-norm
centres, each point a centre plus Gaussian noise of the same expected norm, normalised
(cosine to its own centre about 0.7). ``--clusters 0`` gives unstructured Gaussian
vectors, the hardest case for an approximate index.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil

from quillian.stores.embedded.faiss_hnsw import FaissHNSWIndex, import_faiss
from quillian.stores.embedded.vectors import ExactVectorIndex

__all__ = ["brute_force", "main", "make_data"]

logger = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
SearchFn = Callable[[F32, int], tuple[I64, F32]]


def make_data(n: int, dim: int, n_queries: int, clusters: int, seed: int) -> tuple[F32, F32]:
    """``n`` data and ``n_queries`` query vectors, L2-normalised float32 (see module doc)."""
    rng = np.random.default_rng(seed)
    centres = _normalise(rng.standard_normal((max(clusters, 1), dim), dtype=np.float32))

    def draw(count: int) -> F32:
        out = np.empty((count, dim), np.float32)
        for start in range(0, count, 50_000):
            m = min(50_000, count - start)
            noise = rng.standard_normal((m, dim), dtype=np.float32) / np.sqrt(dim)
            base = centres[rng.integers(0, clusters, m)] if clusters else 0.0
            out[start : start + m] = _normalise(base + noise)
        return out

    return draw(n), draw(n_queries)


def _normalise(x: F32) -> F32:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _disk_mb(directory: Path) -> float:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file()) / 2**20


def _paired_latency(
    searches: dict[str, SearchFn], queries: F32, k: int
) -> dict[str, dict[str, float]]:
    """Single-query latency in ms of several searches over the same queries, taking
    turns query by query (so a change of the machine's load falls on all alike)."""
    for q in queries[:5]:
        for search in searches.values():
            search(q[None, :], k)
    times: dict[str, list[float]] = {name: [] for name in searches}
    for q in queries:
        for name, search in searches.items():
            start = time.perf_counter()
            search(q[None, :], k)
            times[name].append((time.perf_counter() - start) * 1000)
    return {
        name: {
            "p50_ms": round(float(np.percentile(ts, 50)), 3),
            "p95_ms": round(float(np.percentile(ts, 95)), 3),
        }
        for name, ts in times.items()
    }


def _latency(search: SearchFn, queries: F32, k: int) -> dict[str, float]:
    """Single-query latency in ms after a warm-up of five queries, and batch throughput."""
    figures: dict[str, float] = dict(_paired_latency({"one": search}, queries, k)["one"])
    start = time.perf_counter()
    search(queries, k)
    figures["batch_qps"] = round(len(queries) / (time.perf_counter() - start), 1)
    return figures


def _recall(got: I64, truth: I64, k: int) -> float:
    hits = [len(set(g[:k].tolist()) & set(t[:k].tolist())) for g, t in zip(got, truth, strict=True)]
    return round(float(np.mean(hits)) / k, 4)


def _build(index: Any, ids: I64, x: F32, batch: int = 10_000) -> float:
    start = time.perf_counter()
    for s in range(0, len(ids), batch):
        index.add(ids[s : s + batch], x[s : s + batch])
    index.flush()
    return time.perf_counter() - start


def brute_force(x: F32, q: F32, ids: I64, k: int) -> I64:
    """The true top-``k`` ids per query, by one plain matrix product (the recall reference)."""
    scores = q @ x.T
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return ids[top]


def bench_exact(
    x: F32, q: F32, ids: I64, k: int, dtype: str, workdir: Path, truth: I64
) -> dict[str, Any]:
    """Build, reopen (memory-mapped) and query an exact index."""
    directory = workdir / f"exact-{dtype}"
    gc.collect()
    rss = _rss_mb()
    with ExactVectorIndex(directory, x.shape[1], dtype=dtype) as index:
        build_s = _build(index, ids, x)
    start = time.perf_counter()
    with ExactVectorIndex(directory) as index:
        reopen_s = time.perf_counter() - start  # one index opened, before the scan's
        start = time.perf_counter()
        index.search(q[0], k)  # the first single-query search builds the sketch
        sketch_s = time.perf_counter() - start
        figures = _latency(index.search, q, k)
        found = index.search(q, k)[0]
        with ExactVectorIndex(directory, sketch=False) as scan:
            paired = _paired_latency({"sketch": index.search, "scan": scan.search}, q, k)
            one_by_one = np.concatenate([index.search(v, k)[0] for v in q])
            same = np.array_equal(one_by_one, np.concatenate([scan.search(v, k)[0] for v in q]))
        rss_delta = _rss_mb() - rss
    result = {
        "build_s": round(build_s, 2),
        "reopen_s": round(reopen_s, 4),
        **figures,
        f"recall_at_{k}": _recall(found, truth, k),
        "disk_mb": round(_disk_mb(directory), 1),
        "rss_delta_mb": round(rss_delta, 1),
        "scan": {
            **paired["scan"],
            "sketched_p50_ms": paired["sketch"]["p50_ms"],
            "sketched_p95_ms": paired["sketch"]["p95_ms"],
            "speedup_p50": round(paired["scan"]["p50_ms"] / paired["sketch"]["p50_ms"], 2),
            "sketch_build_s": round(sketch_s, 3),
            "same_ids": bool(same),
        },
    }
    return result


def bench_faiss(
    x: F32, q: F32, ids: I64, k: int, truth: I64, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """Build, reload and query a FAISS HNSW index at each ``ef_search`` value."""
    directory = workdir / "hnsw"
    gc.collect()
    rss = _rss_mb()
    with FaissHNSWIndex(
        directory, x.shape[1], m=args.m, ef_construction=args.ef_construction
    ) as index:
        build_s = _build(index, ids, x)
    start = time.perf_counter()
    index = FaissHNSWIndex(directory)
    reopen_s = time.perf_counter() - start
    sweep = {}
    for ef in args.ef_search:
        index.ef_search = ef
        figures = _latency(index.search, q, k)
        sweep[str(ef)] = {**figures, f"recall_at_{k}": _recall(index.search(q, k)[0], truth, k)}
    rss_delta = _rss_mb() - rss
    index.close()
    return {
        "m": args.m,
        "ef_construction": args.ef_construction,
        "build_s": round(build_s, 2),
        "reopen_s": round(reopen_s, 3),
        "by_ef_search": sweep,
        "disk_mb": round(_disk_mb(directory), 1),
        "rss_delta_mb": round(rss_delta, 1),
    }


def _machine() -> dict[str, Any]:
    faiss = import_faiss()
    return {
        "cpus": os.cpu_count(),
        "faiss_threads": faiss.omp_get_max_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "faiss": faiss.__version__,
        "processor": platform.processor() or platform.machine(),
    }


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python research/vectors.py", description=__doc__)
    parser.add_argument("--n", type=int, default=200_000, help="vectors indexed")
    parser.add_argument("--dim", type=int, default=384, help="vector dimension")
    parser.add_argument("--queries", type=int, default=200, help="queries timed")
    parser.add_argument("--k", type=int, default=10, help="neighbours per query")
    parser.add_argument("--clusters", type=int, default=-1, help="data clusters (default n/200)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--m", type=int, default=32, help="HNSW neighbours per node")
    parser.add_argument("--ef-construction", type=int, default=200, help="HNSW build beam")
    parser.add_argument(
        "--ef-search",
        type=lambda s: [int(v) for v in s.split(",")],
        default=[16, 32, 64, 128, 256],
        help="comma-separated HNSW search beams",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="BLAS and FAISS threads (default: all cores)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where indexes are written")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Every measurement, as the JSON-ready result object."""
    clusters = args.n // 200 if args.clusters < 0 else args.clusters
    logger.info("generating %d x %d vectors (%d clusters)", args.n, args.dim, clusters)
    x, q = make_data(args.n, args.dim, args.queries, clusters, args.seed)
    ids = np.random.default_rng(args.seed + 1).permutation(args.n).astype(np.int64) * 7 + 3
    truth = brute_force(x, q, ids, args.k)
    logger.info("exact float32")
    f32 = bench_exact(x, q, ids, args.k, "float32", workdir, truth)
    logger.info("exact float16")
    f16 = bench_exact(x, q, ids, args.k, "float16", workdir, truth)
    logger.info("exact int8")
    i8 = bench_exact(x, q, ids, args.k, "int8", workdir, truth)
    logger.info("faiss hnsw")
    hnsw = bench_faiss(x, q, ids, args.k, truth, args, workdir)
    return {
        "machine": _machine(),
        "n": args.n,
        "dim": args.dim,
        "queries": args.queries,
        "k": args.k,
        "clusters": clusters,
        "exact_float32": f32,
        "exact_float16": f16,
        "exact_int8": i8,
        "faiss_hnsw": hnsw,
    }


def _limit_threads(threads: int, stack: contextlib.ExitStack) -> None:
    """Cap BLAS (through threadpoolctl, when installed) and FAISS at ``threads``."""
    if threads <= 0:
        return
    import_faiss().omp_set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logger.warning("threadpoolctl is not installed; BLAS threads are not capped")
        return
    stack.enter_context(threadpool_limits(threads))


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: run the benchmark and print one JSON object."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = _parse(argv)
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        _limit_threads(args.threads, stack)
        if args.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qb-")))
        else:
            workdir = args.workdir
            workdir.mkdir(parents=True, exist_ok=True)
        result = run(args, workdir)
    result["machine"]["threads"] = args.threads or "all"
    result["machine"]["load_average_before_after"] = [load_before[0], os.getloadavg()[0]]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
