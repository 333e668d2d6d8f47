"""Embedders side by side, in one run: throughput, agreement, retrieval, build time.

    python research/embedders.py --bench ../shared/bench --json

For each embedder (default: ``minilm`` on torch, the reference, and ``minilm-int8`` on
ONNX Runtime), on the same machine in the same process:

* load seconds (first call, model files already on disk or exported);
* throughput in texts per second on short texts (2Wiki titles) and on passages (2Wiki
  passages, title and text), each run ``--repeats`` times, alternating embedders so
  machine load falls on both alike; the median is reported with the ratio to the first;
* agreement: cosine between each embedder's vector and the reference's for the same
  texts (mean and minimum);
* retrieval: ``quillian bench retrieval`` on 2Wiki-800, MuSiQue (recorded GPT-3.5
  triples) and HotpotQA with an index built per embedder, and each method's difference
  from the reference question by question (paired bootstrap interval, permutation p);
* with ``--full``: the full 2Wiki corpus (6,119 passages) built once per embedder,
  with each build's stage seconds (the embed stage is most of a build).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from quillian.bench.retrieval import BenchSettings, read_corpus, run_retrieval_bench
from quillian.components.embedding.base import Embedder
from quillian.components.embedding.factory import make_embedder
from quillian.engine import IndexSettings, index_documents
from quillian.eval.stats import paired

__all__ = ["DATASETS", "agreement", "bench_settings", "main", "section", "throughput"]

#: (name, dataset format, corpus, questions, extractions, first n passages, metric)
DATASETS: list[tuple[str, str, str, str, str | None, int | None, str]] = [
    ("2wiki-800", "2wiki", "2wiki/corpus.json", "2wiki/questions.jsonl", None, 800, "perfect@8"),
    (
        "musique-gpt",
        "musique",
        "musique/corpus.json",
        "musique/questions.jsonl",
        "musique/openie_gpt-3.5-turbo-1106.jsonl",
        None,
        "R@5",
    ),
    ("hotpotqa", "hotpotqa", "hotpotqa/corpus.json", "hotpotqa/questions.json", None, None, "R@5"),
]


def throughput(
    embedders: dict[str, Embedder], sets: Mapping[str, Sequence[str]], repeats: int
) -> dict[str, dict[str, Any]]:
    """Load seconds and texts per second of each embedder on each set of texts; the
    embedders take turns within each repeat so that load on the machine hits all."""
    out: dict[str, dict[str, Any]] = {}
    for name, embedder in embedders.items():
        start = time.perf_counter()
        embedder.embed(["warm up"])
        out[name] = {"load_s": round(time.perf_counter() - start, 2)}
    runs: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):
        for kind, texts in sets.items():
            for name, embedder in embedders.items():
                start = time.perf_counter()
                embedder.embed(list(texts))
                runs.setdefault((name, kind), []).append(time.perf_counter() - start)
    first = next(iter(embedders))
    for (name, kind), seconds in runs.items():
        median = statistics.median(seconds)
        rate = len(sets[kind]) / median
        out[name][f"{kind}_per_s"] = round(rate, 1)
        out[name][f"{kind}_s"] = [round(s, 2) for s in seconds]
        if name != first:
            ratio = statistics.median(runs[(first, kind)]) / median
            out[name][f"{kind}_speedup"] = round(ratio, 2)
    return out


def agreement(
    embedders: dict[str, Embedder], sets: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """Cosine of each embedder's vectors to the first one's, per set: mean and min."""
    names = list(embedders)
    out: dict[str, dict[str, float]] = {}
    for kind, texts in sets.items():
        reference = embedders[names[0]].embed(list(texts))
        for name in names[1:]:
            cosines = (embedders[name].embed(list(texts)) * reference).sum(axis=1)
            out.setdefault(name, {})[f"{kind}_cos_mean"] = round(float(np.mean(cosines)), 4)
            out[name][f"{kind}_cos_min"] = round(float(np.min(cosines)), 4)
    return out


def bench_settings(
    bench: Path, spec: tuple[Any, ...], index_dir: str | Path, **options: Any
) -> BenchSettings:
    """The settings of the dev set ``spec`` (a row of :data:`DATASETS`) read from
    ``bench``, its index at ``index_dir``, with ``options`` (embedder, methods)."""
    _, dataset, corpus, questions, extractions, first_n, _ = spec
    return BenchSettings(
        dataset=dataset,
        corpus=bench / corpus,
        questions=bench / questions,
        index_dir=index_dir,
        first_n=first_n,
        extractions=bench / extractions if extractions else None,
        **options,
    )


def _retrieval(
    bench: Path, root: Path, embedders: Sequence[str], methods: Sequence[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in DATASETS:
        name, metric = spec[0], spec[-1]
        runs = {}
        for embedder in embedders:
            where = root / f"{name}-{embedder}"
            settings = bench_settings(bench, spec, where, embedder=embedder, methods=methods)
            runs[embedder] = run_retrieval_bench(settings)
        reference = runs[embedders[0]]
        rows: dict[str, Any] = {"metric": metric}
        for method in methods:
            row: dict[str, Any] = {}
            for embedder in embedders:
                row[embedder] = runs[embedder][method][metric]
                row[f"{embedder}_ci"] = runs[embedder][method][f"{metric}_ci"]
            for embedder in embedders[1:]:
                row[f"{embedder}_vs_{embedders[0]}"] = paired(
                    runs[embedder]["_per_question"][method][metric],
                    reference["_per_question"][method][metric],
                ).as_dict()
            rows[method] = row
        rows["build_s"] = {e: runs[e]["_run"]["index"]["build_seconds"] for e in embedders}
        out[name] = rows
    return out


def _full_build(bench: Path, root: Path, embedders: Sequence[str]) -> dict[str, Any]:
    """The full 2Wiki corpus built from scratch once per embedder."""
    settings = BenchSettings(
        dataset="2wiki",
        corpus=bench / "2wiki/corpus.json",
        questions=bench / "2wiki/questions.jsonl",
        index_dir=root,
    )
    documents = read_corpus(settings)
    out: dict[str, Any] = {"passages": len(documents)}
    for embedder in embedders:
        target = root / f"2wiki-all-build-{embedder}-{int(time.time())}"
        start = time.perf_counter()
        report = index_documents(target, documents, IndexSettings(embedder=embedder))
        out[embedder] = {
            "build_s": round(time.perf_counter() - start, 1),
            "stage_s": {k: round(v, 1) for k, v in report.seconds.items()},
        }
    return out


def _texts(bench: Path, n_short: int, n_passages: int) -> dict[str, list[str]]:
    corpus = json.loads((bench / "2wiki/corpus.json").read_text(encoding="utf-8"))
    titles = sorted({str(p["title"]) for p in corpus})[:n_short]
    passages = [f"{p['title']}\n{p['text']}" for p in corpus[:n_passages]]
    return {"short": titles, "passages": passages}


def section(result: dict[str, Any], command: str) -> str:
    """The result as a ``docs/benchmarks.md`` section (for ``bench.report --section``)."""
    speed = result["throughput"]
    names = list(speed)
    first = names[0]
    lines = [
        "## Embedders side by side: MiniLM on torch and in int8 on ONNX Runtime",
        "",
        "Same machine, same process, the embedders taking turns; medians of "
        f"{len(speed[first]['short_s'])} runs. Load average at the start: "
        f"{result.get('load_average', '?')}.",
        "",
        "| embedder | load s | short texts/s | passages/s | speed-up short | speed-up passages "
        "| cosine to the first, mean (min), short | passages |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        row, agree = speed[name], result["agreement"].get(name, {})
        lines.append(
            f"| {name} | {row['load_s']} | {row['short_per_s']} | {row['passages_per_s']} | "
            f"{row.get('short_speedup', 1.0)}x | {row.get('passages_speedup', 1.0)}x | "
            f"{_cos(agree, 'short')} | {_cos(agree, 'passages')} |"
        )
    for name, rows in result.get("retrieval", {}).items():
        metric = rows["metric"]
        lines += ["", f"Retrieval on {name} ({metric}, dev questions, no LLM):", ""]
        others = names[1:]
        head = " | ".join(f"{n} - {first}, paired (p; won/lost)" for n in others)
        lines += [f"| method | {' | '.join(names)} | {head} |"]
        lines += ["|---" * (1 + len(names) + len(others)) + "|"]
        for method, row in rows.items():
            if method in ("metric", "build_s"):
                continue
            cells = [f"{row[n]} [{row[f'{n}_ci'][0]}, {row[f'{n}_ci'][1]}]" for n in names]
            diffs = [_paired(row[f"{n}_vs_{first}"]) for n in others]
            lines.append(f"| {method} | {' | '.join(cells + diffs)} |")
    full = result.get("full_build")
    if full:
        lines += ["", f"Full 2Wiki corpus ({full['passages']:,} passages) built from scratch:", ""]
        lines += ["| embedder | build s | of it, embed s |", "|---|---|---|"]
        for name in names:
            lines.append(
                f"| {name} | {full[name]['build_s']} | {full[name]['stage_s'].get('embed', '?')} |"
            )
    lines += ["", f"Command: `{command}`"]
    return "\n".join(lines) + "\n"


def _cos(agree: dict[str, float], kind: str) -> str:
    if f"{kind}_cos_mean" not in agree:
        return "1 (itself)"
    return f"{agree[f'{kind}_cos_mean']} ({agree[f'{kind}_cos_min']})"


def _paired(diff: dict[str, Any]) -> str:
    low, high = diff["ci"]
    return (
        f"{diff['diff']:+.3f} [{low:+.3f}, {high:+.3f}] "
        f"(p {diff['p']:.2f}; {diff['wins']}/{diff['losses']})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bench", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--embedders", default="minilm,minilm-int8")
    parser.add_argument("--index-root", type=Path, default=Path("indexes/embedders"))
    parser.add_argument("--methods", default="sa,ppr,dense")
    parser.add_argument("--short", type=int, default=2000, help="short texts timed")
    parser.add_argument("--passages", type=int, default=500, help="passages timed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-retrieval", action="store_true", help="skip the retrieval runs")
    parser.add_argument("--full", action="store_true", help="also build full 2Wiki per embedder")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--markdown", type=Path, help="also write a docs section here")
    args = parser.parse_args(argv)
    names = args.embedders.split(",")
    embedders = {name: make_embedder(name) for name in names}
    sets = _texts(args.bench, args.short, args.passages)
    result: dict[str, Any] = {"load_average": [round(x, 1) for x in os.getloadavg()]}
    result["throughput"] = throughput(embedders, sets, args.repeats)
    result["agreement"] = agreement(embedders, sets)
    if not args.no_retrieval:
        methods = args.methods.split(",")
        result["retrieval"] = _retrieval(args.bench, args.index_root, names, methods)
    if args.full:
        result["full_build"] = _full_build(args.bench, args.index_root, names)
    if args.markdown:
        command = shlex.join(["python", "research/embedders.py", *(argv or sys.argv[1:])])
        args.markdown.write_text(section(result, command), encoding="utf-8")
    json.dump(result, sys.stdout, indent=None if args.json else 2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
