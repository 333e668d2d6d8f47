"""PPR's two solvers on the walks of built indexes: sparse products per query and
whether each ranking equals the exact solution's, on the resets ``ppr`` makes for the
dev questions.

    python -m quillian.bench.ppr_solvers --bench ../shared/bench \\
        --index 2wiki:indexes/report/2wiki-all --index musique:indexes/report/musique-gpt

Each index (``DATASET:DIR``) is opened, never built. ``ppr`` (its default options) ranks
every question once, its reset vectors are kept, and each solver then solves every reset
to ``--tolerance``; the exact solution is power iteration to 1e-13. Reported per index
and solver: mean and largest number of products, the share of questions whose ordered
top ``k`` chunks equal the exact solution's, and how often Chebyshev's safeguard handed
over to power iteration. Timings are left to ``quillian.bench.options``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
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
    """A transposed walk matrix that counts its products and keeps the first vector of
    each solve (the normalised reset: both solvers start with ``P^T r``)."""

    def __init__(self, matrix: Any) -> None:
        self.matrix, self.products = matrix, 0
        self.first: list[npt.NDArray[np.float64]] = []

    def __matmul__(self, p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        if self.products == 0:
            self.first.append(p.copy())
        self.products += 1
        return np.asarray(self.matrix @ p)


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
    walk = retriever._walk
    resets: list[npt.NDArray[np.float64]] = []
    for q, v in zip(questions, vectors, strict=True):
        recorder = _Counted(walk.transposed)
        retriever.__dict__["_walk"] = Walk(recorder, walk.dangling)  # the cached walk
        retriever.retrieve(q.question, k, v)
        resets += recorder.first
    retriever.__dict__["_walk"] = walk
    offset = index.context.kg.chunk_offset

    def top(scores: npt.NDArray[np.float64]) -> list[int]:
        return np.argsort(-scores[offset:], kind="stable")[:k].tolist()

    exact = [top(personalized_pagerank(walk, r, 0.5, 1e-13, 1000, "power")) for r in resets]
    out: dict[str, Any] = {"index": str(index_dir), "questions": len(resets)}
    log = logging.getLogger(personalized_pagerank.__module__)
    for solver in SOLVERS:
        products, same, handovers = [], 0, _Handovers()
        log.addHandler(handovers)
        level, log.level = log.level, logging.DEBUG
        try:
            for reset, want in zip(resets, exact, strict=True):
                counted = _Counted(walk.transposed)
                scores = personalized_pagerank(
                    Walk(counted, walk.dangling), reset, 0.5, tolerance, 100, solver
                )
                products.append(counted.products)
                same += top(scores) == want
        finally:
            log.removeHandler(handovers)
            log.setLevel(level)
        out[solver] = {
            "products_mean": round(float(np.mean(products)), 2),
            "products_max": int(max(products)),
            "same_top_k_as_exact": round(same / len(resets), 4),
            "fallbacks": handovers.count,
        }
    return out


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
