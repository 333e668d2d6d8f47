"""One retriever under several option settings on an index already built: latency and
whether the rankings agree, in one run.

    python research/options.py --index indexes/report/2wiki-all --dataset 2wiki \\
        --questions ../shared/bench/2wiki/questions.jsonl --method ppr \\
        --setting tolerance=1e-8 --setting tolerance=1e-6 --json

The index is opened, never built or updated (unlike ``quillian bench retrieval``), so
settings can be compared on an index of an older layout. Questions are embedded first;
each setting then ranks every question ``--rounds`` times, the settings taking turns
round by round so that load on the machine falls on all of them alike. Reported per
setting: p50 and p95 milliseconds, and the share of questions whose ordered top ``k``
equals the first setting's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.embedding.factory import embedder_name, make_embedder
from quillian.components.factories import RETRIEVERS, make_retriever
from quillian.eval.datasets import load_questions
from quillian.index import open_index, read_manifest

__all__ = ["main", "parse_setting"]


def parse_setting(text: str) -> dict[str, Any]:
    """``name=value,name=value`` as options (values read as JSON, else as text)."""
    options: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        try:
            options[name.strip()] = json.loads(value)
        except ValueError:
            options[name.strip()] = value
    return options


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--dataset", choices=("2wiki", "musique", "hotpotqa"), required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--method", choices=RETRIEVERS, default="ppr")
    parser.add_argument("--setting", action="append", required=True, help="name=value,...")
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    config = read_manifest(args.index).get("config", {})
    index = open_index(args.index, make_embedder(embedder_name(config)))
    questions = load_questions(args.dataset, args.questions)
    vectors = index.context.embedder.embed([q.question for q in questions])
    settings = [parse_setting(s) for s in args.setting]
    retrievers = [make_retriever(index.context, args.method, **s) for s in settings]
    times: list[list[float]] = [[] for _ in retrievers]
    ranked: list[list[list[int]]] = [[] for _ in retrievers]
    for retriever in retrievers:
        retriever.retrieve(questions[0].question, args.k, vectors[0])  # warm-up
    for round_ in range(args.rounds):
        for i, retriever in enumerate(retrievers):
            for q, v in zip(questions, vectors, strict=True):
                start = time.perf_counter()
                result = retriever.retrieve(q.question, args.k, v)
                times[i].append((time.perf_counter() - start) * 1000)
                if round_ == 0:
                    ranked[i].append([p.chunk for p in result.passages])
    rows = []
    for setting, ms, top in zip(args.setting, times, ranked, strict=True):
        same = sum(a == b for a, b in zip(top, ranked[0], strict=True)) / len(questions)
        rows.append(
            {
                "setting": setting,
                "p50_ms": round(float(np.percentile(ms, 50)), 2),
                "p95_ms": round(float(np.percentile(ms, 95)), 2),
                "same_top_k_as_first": round(same, 4),
            }
        )
    report = {
        "index": str(args.index),
        "method": args.method,
        "questions": len(questions),
        "k": args.k,
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "settings": rows,
    }
    json.dump(report, sys.stdout, indent=None if args.json else 2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
