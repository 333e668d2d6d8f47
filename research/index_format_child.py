"""The child process of ``research/index_format.py``: builds or measures one index
with whichever Quillian ``PYTHONPATH`` names (this tree or a baseline one), so it uses
only what both provide. Run by path (``python -P this_file.py ...``); prints one JSON
object on its last line of stdout.

``build CORPUS OUT EXTRACTOR EMBEDDER``: ``quillian index`` of ``CORPUS`` into ``OUT``.
``measure OUT EMBEDDER K ROUNDS QUESTIONS_JSON``: open time, resident memory before and
after the open and after the queries, the p50/p95 time of ``sa`` (query vectors embedded
first), the p50 of the thread's CPU time (which a loaded machine disturbs less), and
each method's top ``K`` chunk ids per question.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

METHODS = ("sa", "ppr", "dense", "bm25")


def rss_mb() -> float:
    """This process's resident memory now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build(corpus: str, out: str, extractor: str, embedder: str) -> dict[str, Any]:
    start = time.perf_counter()
    index = ["index", corpus, "--out", out, "--extractor", extractor, "--embedder", embedder]
    cli = [sys.executable, "-P", "-m", "quillian.cli.main", *index]  # the edge, run as one
    code = subprocess.run(cli, stdout=sys.stderr, check=False).returncode
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    return {
        "exit": code,
        "seconds": time.perf_counter() - start,
        "stage_seconds": manifest.get("build_seconds", {}),
        "counts": manifest.get("counts", {}),
    }


def measure(out: str, embedder_name: str, k: int, rounds: int, questions: list[str]) -> Any:
    import numpy as np

    from quillian.components.embedding.factory import make_embedder
    from quillian.components.factories import make_retriever
    from quillian.index import open_index

    embedder = make_embedder(embedder_name)
    vectors = embedder.embed(questions)  # loads the model: before the open is measured
    before = rss_mb()
    start = time.perf_counter()
    index = open_index(out, embedder)
    open_seconds = time.perf_counter() - start
    after_open = rss_mb()
    context = index.context
    top: dict[str, list[list[str]]] = {}
    first_query = 0.0
    for method in METHODS:
        retriever = make_retriever(context, method)
        found = []
        for i, (q, v) in enumerate(zip(questions, vectors, strict=True)):
            start = time.perf_counter()
            result = retriever.retrieve(q, k, query_vector=v)
            if method == "sa" and i == 0:
                first_query = time.perf_counter() - start
            found.append([p.chunk_id for p in result.passages])
        top[method] = found
    sa = make_retriever(context, "sa")
    times, cpu = [], []
    for _ in range(rounds):
        for q, v in zip(questions, vectors, strict=True):
            start, start_cpu = time.perf_counter(), time.thread_time()
            sa.retrieve(q, k, query_vector=v)
            times.append(time.perf_counter() - start)
            cpu.append(time.thread_time() - start_cpu)
    return {
        "open_seconds": open_seconds,
        "rss_before_open_mb": before,
        "rss_after_open_mb": after_open,
        "rss_after_queries_mb": rss_mb(),
        "sa_first_query_ms": first_query * 1000,
        "sa_p50_ms": float(np.percentile(times, 50)) * 1000,
        "sa_p95_ms": float(np.percentile(times, 95)) * 1000,
        "sa_cpu_p50_ms": float(np.percentile(cpu, 50)) * 1000,
        "top": top,
    }


def main(argv: list[str]) -> None:
    mode, *rest = argv
    if mode == "build":
        result: Any = build(*rest)
    elif mode == "measure":
        out, embedder, k, rounds, questions = rest
        asked = json.loads(Path(questions).read_text())
        result = measure(out, embedder, int(k), int(rounds), asked)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    sys.stdout.write("\n" + json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
