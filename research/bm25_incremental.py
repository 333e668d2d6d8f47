"""Benchmark the incremental BM25 index against bm25s rebuilt whole, in one run.

Run ``python research/bm25_incremental.py CORPUS.jsonl --work DIR [--hold 101]
[--queries 300]``, CORPUS a JSON Lines file of ``{"title", "text"}`` passages (for
example ``research/scale_corpus.py``'s ``scale-100k.jsonl``). Each passage is one
chunk (``title\\ntext``, as the build indexes it), keyed by a content-derived id and
kept in id order (the index order shifts as passages come and go, as a build's does).
``--hold`` passages (at least 101) are left out of the first build. Both sides then:

1. build over the rest (bm25s: tokenize, index, save; the incremental index: its first
   build);
2. add 1, then 100 of the held passages; delete 1, then 100 passages: bm25s rebuilds
   and saves the whole index each time (today's ``BM25Stage``), the incremental index
   updates (``update_bm25``, as the stage calls it);
3. open the saved index and answer ``--queries`` questions (passage titles) for the top
   10: p50 and p95 per query, on the index the updates left and, for the incremental
   index, on a fresh build too (one segment).

The top 10 scores of both sides are compared on the final index (their largest
difference), and the questions are asked again of both, interleaved (one question to
bm25s, the same to the incremental index, and so on), so a busy machine weighs on both
alike (``interleaved``). ``--queries-only`` does just that on the indexes an earlier run
left in ``DIR``. It prints one JSON object, with the machine's load before and after, and
writes it to ``DIR/bm25_incremental.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.retrieval.bm25_incremental import SegmentedBM25, update_bm25
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.types import stable_id

__all__ = ["main"]


def _read(path: Path) -> tuple[list[str], list[str], list[str]]:
    """Chunk ids, texts and titles of the corpus, in id order."""
    rows = []
    with path.open(encoding="utf-8") as lines:
        for i, line in enumerate(lines):
            item = json.loads(line)
            text = f"{item['title']}\n{item['text']}" if item.get("title") else item["text"]
            rows.append((stable_id("chunk", str(i), "0", text), text, item.get("title") or ""))
    rows.sort()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return round(time.perf_counter() - start, 4)


class _Corpus:
    """The passages an index holds at a step, in id order."""

    def __init__(self, ids: list[str], texts: list[str], held: set[int]) -> None:
        self.ids, self.texts = ids, texts
        self.held = set(held)

    def current(self) -> tuple[list[str], list[str]]:
        keep = [i for i in range(len(self.ids)) if i not in self.held]
        return [self.ids[i] for i in keep], [self.texts[i] for i in keep]


def _steps(corpus: _Corpus, rng: random.Random) -> list[tuple[str, Callable[[], None]]]:
    """The four changes, each applied to ``corpus`` when called."""
    held = sorted(corpus.held)
    adds = iter(held)

    def add(n: int) -> Callable[[], None]:
        return lambda: corpus.held.difference_update(next(adds) for _ in range(n))

    def delete(n: int) -> Callable[[], None]:
        def run() -> None:
            present = [i for i in range(len(corpus.ids)) if i not in corpus.held]
            corpus.held.update(rng.sample(present, n))

        return run

    return [
        ("add 1", add(1)),
        ("add 100", add(100)),
        ("delete 1", delete(1)),
        ("delete 100", delete(100)),
    ]


def _bm25s_build(texts: Sequence[str], directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    BM25Index.build(texts).save(directory)


def _ours_update(ids: Sequence[str], texts: Sequence[str], directory: Path) -> None:
    update_bm25(directory, ids, lambda positions: [texts[i] for i in positions])


def _latency(index: BM25Index, questions: Sequence[str]) -> dict[str, float]:
    index.search(questions[0], 10)  # warm
    seconds = []
    for q in questions:
        start = time.perf_counter()
        index.search(q, 10)
        seconds.append(time.perf_counter() - start)
    ms = np.array(seconds) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
    }


def _side(
    name: str,
    work: Path,
    corpus: _Corpus,
    rng: random.Random,
    write: Callable[[Sequence[str], Sequence[str], Path], None],
) -> dict[str, Any]:
    directory = work / name
    shutil.rmtree(directory, ignore_errors=True)
    out: dict[str, Any] = {}
    ids, texts = corpus.current()
    out["passages"] = len(ids)
    out["build_s"] = _timed(lambda: write(ids, texts, directory))
    for step, change in _steps(corpus, rng):
        change()
        ids, texts = corpus.current()
        out[f"{step}_s"] = _timed(partial(write, ids, texts, directory))
    out["passages_after"] = len(ids)
    out["disk_bytes"] = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return out


def _bm25s_writer(ids: Sequence[str], texts: Sequence[str], directory: Path) -> None:
    _bm25s_build(texts, directory)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--hold", type=int, default=101, help="at least 101")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--queries-only", action="store_true")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"load_before": os.getloadavg(), "cpus": os.cpu_count()}
    ids, texts, titles = _read(args.corpus)
    rng = random.Random(47)
    held = set(rng.sample(range(len(ids)), args.hold))
    questions = [titles[i] for i in rng.sample(range(len(ids)), args.queries)]
    report["corpus"] = {"file": str(args.corpus), "passages": len(ids), "held": args.hold}
    if args.queries_only:
        return _write(args.work, {**report, **_interleaved(args.work, questions)})
    for name, write in (("bm25s", _bm25s_writer), ("incremental", _ours_update)):
        corpus = _Corpus(ids, texts, held)
        report[name] = _side(name, args.work, corpus, random.Random(1), write)
        report[name]["query"] = _latency(BM25Index.load(args.work / name), questions)
    final = SegmentedBM25.load(args.work / "incremental")
    assert final is not None
    report["incremental"]["segments_after"] = len(final.segments)
    report["incremental"]["tombstones_after"] = int((np.asarray(final.positions) < 0).sum())
    fresh = args.work / "incremental-fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    corpus = _Corpus(ids, texts, held)
    for _, change in _steps(corpus, random.Random(1)):
        change()
    now_ids, now_texts = corpus.current()
    report["incremental"]["fresh_build_s"] = _timed(lambda: _ours_update(now_ids, now_texts, fresh))
    report["incremental"]["query_fresh"] = _latency(BM25Index.load(fresh), questions)
    report["top10_max_score_difference"] = _difference(
        BM25Index.load(args.work / "bm25s"), BM25Index.load(args.work / "incremental"), questions
    )
    report.update(_interleaved(args.work, questions))
    return _write(args.work, report)


def _write(work: Path, report: dict[str, Any]) -> int:
    report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=2)
    (work / "bm25_incremental.json").write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
    return 0


def _interleaved(work: Path, questions: Sequence[str]) -> dict[str, Any]:
    """p50 and p95 of both indexes in ``work``, asked the questions in turn."""
    sides = {
        "bm25s": BM25Index.load(work / "bm25s"),
        "incremental": BM25Index.load(work / "incremental"),
    }
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    for index in sides.values():
        index.search(questions[0], 10)
    for q in questions:
        for name, index in sides.items():
            start = time.perf_counter()
            index.search(q, 10)
            seconds[name].append(time.perf_counter() - start)
    return {
        "interleaved": {
            name: {
                f"p{p}_ms": round(float(np.percentile(np.array(s) * 1000, p)), 3) for p in (50, 95)
            }
            for name, s in seconds.items()
        }
    }


def _difference(a: BM25Index, b: BM25Index, questions: Sequence[str]) -> float:
    worst = 0.0
    for q in questions:
        sa, sb = a.search(q, 10)[1], b.search(q, 10)[1]
        if len(sa) != len(sb):
            return float("inf")
        worst = max(worst, float(np.abs(sa - sb).max(initial=0.0)))
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
