"""PPR's two solvers on the walks of built indexes: sparse products per query and
whether each ranking equals the exact solution's, on the resets ``ppr`` makes for the
dev questions.

    python research/ppr_solvers.py --bench ../shared/bench \\
        --index 2wiki:indexes/report/2wiki-all --index musique:indexes/report/musique-gpt

Each index (``DATASET:DIR``) is opened, never built. ``ppr`` (its default options) ranks
every question once, its reset vectors are kept, and each solver then solves every reset
to ``--tolerance`` on ``ppr``'s walk (description nodes folded, reverse Cuthill-McKee
order, float32), on the same without the reordering, and on the whole walk in float64
(the walk before folding); the exact solution is power iteration to 1e-13 on the last.
Reported per index, solver and walk: mean and largest number of products, the share of
questions whose ordered top ``k`` chunks equal the exact solution's, how often
Chebyshev's safeguard handed over to power iteration, and the median time of a solve
(all six interleaved, three rounds).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.factory import embedder_name, make_embedder
from quillian.components.graph.ppr import Solver, Walk, personalized_pagerank
from quillian.components.retrieval.ppr import PPRRetriever
from quillian.eval.datasets import load_questions
from quillian.index import open_index, read_manifest

__all__ = ["main", "run"]

SOLVERS: tuple[Solver, ...] = ("chebyshev", "power")

QUESTIONS = {
    "2wiki": "2wiki/questions.jsonl",
    "musique": "musique/questions.jsonl",
    "hotpotqa": "hotpotqa/questions.json",
}


class _Counted:
    """A transposed walk matrix that counts its products."""

    def __init__(self, matrix: Any) -> None:
        self.matrix, self.products = matrix, 0

    def __matmul__(self, p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        self.products += 1
        return np.asarray(self.matrix @ p)

    def __getattr__(self, name: str) -> Any:  # shape, dtype
        return getattr(self.matrix, name)


class _Handovers(logging.Handler):
    """Counts the Chebyshev safeguard's hand-overs to power iteration (logged)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "power iteration" in record.getMessage()


def run(dataset: str, index_dir: Path, bench: Path, tolerance: float, k: int) -> dict[str, Any]:
    config = read_manifest(index_dir).get("config", {})
    index = open_index(index_dir, make_embedder(embedder_name(config)))
    questions = load_questions(dataset, bench / QUESTIONS[dataset])  # type: ignore[arg-type]
    vectors = index.context.embedder.embed([q.question for q in questions])
    retriever = PPRRetriever(index.context)
    walk = retriever.walk
    resets = [retriever.reset(q.question, v)[0] for q, v in zip(questions, vectors, strict=True)]
    resets = [r for r in resets if r.sum() > 0]  # a query with no reset is not walked
    offset = index.context.kg.chunk_offset

    def top(scores: npt.NDArray[Any]) -> list[int]:
        return np.argsort(-scores[offset:], kind="stable")[:k].tolist()

    whole = retriever.walk_over(fold=False, dtype=np.float64, reorder=False)  # the reference
    exact = [top(personalized_pagerank(whole, r, 0.5, 1e-13, 1000, "power")) for r in resets]
    out: dict[str, Any] = {"index": str(index_dir), "questions": len(resets)}
    walks = {
        "ppr": walk,  # descriptions folded, reverse Cuthill-McKee order, float32
        "folded-float32": retriever.walk_over(fold=True, dtype=np.float32, reorder=False),
        "whole-float64": whole,  # the walk before folding
    }
    for solver in SOLVERS:
        out[solver] = {name: _solve_all(w, resets, exact, top, solver, tolerance)
                       for name, w in walks.items()}  # fmt: skip
    # timed apart from the counting, interleaved so that load falls on both alike
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(3):
        for reset in resets:
            for solver in SOLVERS:
                for name, w in walks.items():
                    start = time.perf_counter()
                    personalized_pagerank(w, reset, 0.5, tolerance, 100, solver)
                    times.setdefault((solver, name), []).append(time.perf_counter() - start)
    for (method, name), seconds in times.items():
        out[method][name]["p50_ms"] = round(float(np.median(seconds)) * 1000, 3)
    return out


def _solve_all(
    walk: Walk,
    resets: list[npt.NDArray[np.float64]],
    exact: list[list[int]],
    top: Callable[[npt.NDArray[Any]], list[int]],
    solver: Solver,
    tolerance: float,
) -> dict[str, Any]:
    """Products, rankings equal to the exact ones, and safeguard hand-overs of one walk
    and solver over every reset."""
    log = logging.getLogger(personalized_pagerank.__module__)
    products, same, handovers = [], 0, _Handovers()
    log.addHandler(handovers)
    level, log.level = log.level, logging.DEBUG
    try:
        for reset, want in zip(resets, exact, strict=True):
            counted = _Counted(walk.transposed)
            scores = personalized_pagerank(
                replace(walk, transposed=counted), reset, 0.5, tolerance, 100, solver
            )
            products.append(counted.products)
            same += top(scores) == want
    finally:
        log.removeHandler(handovers)
        log.setLevel(level)
    return {
        "products_mean": round(float(np.mean(products)), 2),
        "products_max": int(max(products)),
        "same_top_k_as_exact": round(same / len(resets), 4),
        "fallbacks": handovers.count,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bench", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--index", action="append", required=True, metavar="DATASET:DIR")
    parser.add_argument("--tolerance", type=float, default=1e-6)
    parser.add_argument("-k", type=int, default=8)
    args = parser.parse_args(argv)
    rows = []
    for spec in args.index:
        dataset, _, directory = spec.partition(":")
        if dataset not in QUESTIONS or not directory:
            parser.error(f"--index takes DATASET:DIR with DATASET one of {', '.join(QUESTIONS)}")
        rows.append(run(dataset, Path(directory), args.bench, args.tolerance, args.k))
    json.dump({"tolerance": args.tolerance, "k": args.k, "indexes": rows}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
