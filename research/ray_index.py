"""Indexing on Ray against the single-process build, side by side in one run.

(a) ``quillian index CORPUS`` and ``quillian index CORPUS --ray local`` (2 workers on a
2-CPU local instance), each in its own process: wall time and peak memory (the sum of
the resident memory of the process and everything it started, Ray's GCS, raylet and
workers included, sampled every 0.1 s; shared pages count once per process), then
whether the two indexes hold the same contents (counts, documents, chunks, graph
tables, vectors, and the top 5 of ``sa``, ``ppr``, ``dense`` and ``bm25`` for a few
questions).

(b) LLM extraction through Ray with the scripted chat model answering after
``--latency`` seconds a call (two calls a passage: entities, then relations):
passages a second at total concurrency 1, 4 and 16 (workers times each worker's cap),
from the first extraction call's start to the last one's end (actor start-up and the
rebuild left out; the whole job's seconds beside it), against the linear ideal
``concurrency / (2 * latency)``.

    python research/ray_index.py /work/shared/bench/hotpotqa/corpus.json --limit 300

The machine's load average is printed with the figures: on a shared machine they move.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from quillian.components.embedding.factory import make_embedder
from quillian.components.extraction.base import Extraction
from quillian.components.extraction.llm import LLMExtractor
from quillian.components.factories import make_retriever
from quillian.components.ingestion.readers import read_documents
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.engine import IndexSettings, RayOptions, index_on_ray
from quillian.index import open_index
from quillian.index.ray_cluster import listeners_off_loopback, ray_session
from quillian.types import Chunk

METHODS = ("sa", "ppr", "dense", "bm25")
CONCURRENCY = (1, 4, 16)
NER_REPLY = json.dumps([{"name": "Alpha", "type": "MISC"}, {"name": "Beta", "type": "MISC"}])
RELATIONS_REPLY = json.dumps({"triples": [["Alpha", "precedes", "Beta"]]})


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ray-index-") as tmp:
        work = Path(tmp)
        print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        if not args.skip_build:
            corpus = _prepare(args.corpus, args.limit, work / "corpus.json")
            _compare_builds(corpus, work, args.embedder)
        if not args.skip_llm:
            _llm_throughput(work, args.latency, args.passages_per_slot)
        print(f"load average after: {os.getloadavg()[0]:.1f}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, nargs="?", help="a corpus the readers take")
    parser.add_argument("--limit", type=int, default=300, help="first N documents")
    parser.add_argument("--embedder", default="keyword", help="the build's embedder")
    parser.add_argument("--latency", type=float, default=0.5, help="(b): seconds a call")
    parser.add_argument(
        "--passages-per-slot", type=int, default=12, help="(b): passages per unit of concurrency"
    )
    parser.add_argument("--skip-build", action="store_true", help="only (b)")
    parser.add_argument("--skip-llm", action="store_true", help="only (a)")
    return parser


def _prepare(corpus: Path | None, limit: int, out: Path) -> Path:
    if corpus is None:
        raise SystemExit("give a CORPUS for (a), or --skip-build")
    docs = []
    for doc in read_documents(corpus):
        docs.append({"title": doc.title, "text": doc.text})
        if len(docs) >= limit:
            break
    out.write_text(json.dumps(docs))
    print(f"corpus: the first {len(docs)} documents of {corpus}")
    return out


def _compare_builds(corpus: Path, work: Path, embedder: str) -> None:
    base = [sys.executable, "-m", "quillian.cli.main", "index", str(corpus)]
    base += ["--embedder", embedder]
    runs = {
        "single process": [*base, "--out", str(work / "single")],
        "--ray local (2 workers)": [*base, "--out", str(work / "ray"), "--ray", "local"],
    }
    print(f"\n(a) build of {corpus.name}, embedder {embedder}")
    print(f"{'executor':<26}{'wall s':>9}{'peak MB':>10}")
    for name, command in runs.items():
        seconds, peak = _measured(command)
        print(f"{name:<26}{seconds:>9.1f}{peak / 2**20:>10.0f}")
    questions = [" ".join(d["text"].split()[:8]) for d in json.loads(corpus.read_text())[::50][:6]]
    same = _digest(work / "single", embedder, questions) == _digest(
        work / "ray", embedder, questions
    )
    print(f"index contents identical: {same}")


def _measured(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak summed RSS of ``command`` and its descendants."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        root = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            total = 0
            for p in [root, *_children(root)]:
                with suppress(psutil.Error):
                    total += p.memory_info().rss
            peak = max(peak, total)
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed: {errors.read().decode()[-2000:]}")
    return seconds, peak


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _digest(location: Path, embedder: str, questions: list[str]) -> dict[str, Any]:
    """What two equal indexes share (a compact form of the exactness tests' state)."""
    index = open_index(str(location), make_embedder(embedder))
    kg = index.context.kg
    vectors = index.context.chunk_vectors.get(list(range(len(kg.chunk_ids))))
    order = sorted(range(len(kg.chunk_ids)), key=lambda i: kg.chunk_ids[i])
    return {
        "counts": {k: v for k, v in index.manifest["counts"].items()},
        "chunks": sorted(kg.chunk_ids),
        "entities": sorted((e.node_id, e.name) for e in kg.entities),
        "descriptions": sorted(
            (kg.entities[d.entity].node_id, d.chunk_id, d.text) for d in kg.descriptions
        ),
        "relations": sorted(
            repr((r.subject, r.predicate, r.object, r.description)) for r in kg.relations
        ),
        "chunk vectors": hashlib.sha256(b"".join(vectors[i].tobytes() for i in order)).hexdigest(),
        "top 5": {
            (m, q): [
                (p.chunk_id, round(p.score, 5))
                for p in make_retriever(index.context, m).retrieve(q, 5).passages
            ]
            for m in METHODS
            for q in questions
        },
    }


class TimedExtractor:
    """An LLM extractor on the scripted model (made in each worker) that appends each
    call's start, end and passages to a file of ``folder`` named by its process."""

    def __init__(self, latency: float, cap: int, folder: str) -> None:
        model = ScriptedChatModel(
            {"sa-rag.ner": NER_REPLY, "sa-rag.relations": RELATIONS_REPLY}, latency=latency
        )
        self.inner = LLMExtractor(TaskRunner(model, default_registry()), concurrency=cap)
        self.name = self.inner.name
        self.log = Path(folder) / f"{os.getpid()}.log"

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        start = time.time()
        out = self.inner.extract(chunks)
        with self.log.open("a") as log:
            log.write(f"{start} {time.time()} {len(chunks)}\n")
        return out


def _llm_throughput(work: Path, latency: float, per_slot: int) -> None:
    """Passages a second from the first extraction call's start to the last one's end,
    across the workers: what a job costs whatever its size (starting the actors, the
    rebuild) is left out, and given beside it."""
    print(f"\n(b) LLM extraction on Ray, scripted model, {latency} s a call, 2 calls a passage")
    print(
        f"{'concurrency':>11}{'workers':>8}{'cap':>5}{'passages':>9}{'extract s':>10}"
        f"{'job s':>7}{'pass/s':>8}{'ideal':>7}{'of ideal':>9}"
    )
    with ray_session("local", num_cpus=2):
        off = listeners_off_loopback()
        if off:
            raise SystemExit(f"Ray listens off loopback: {off}")
        for concurrency in CONCURRENCY:
            workers = 1 if concurrency == 1 else 2
            cap = concurrency // workers
            n = per_slot * concurrency
            job, calls = _llm_job(work, n, workers, cap, latency)
            span = max(end for _, end, _ in calls) - min(start for start, _, _ in calls)
            rate = sum(k for _, _, k in calls) / span
            ideal = concurrency / (2 * latency)
            print(
                f"{concurrency:>11}{workers:>8}{cap:>5}{n:>9}{span:>10.1f}{job:>7.1f}"
                f"{rate:>8.2f}{ideal:>7.1f}{rate / ideal:>9.0%}"
            )


def _llm_job(
    work: Path, n: int, workers: int, cap: int, latency: float
) -> tuple[float, list[tuple[float, float, int]]]:
    """The Ray ingestion of ``n`` passages: its seconds, and each extraction call's
    (start, end, passages)."""
    name = f"llm-{n}-{workers}-{cap}"
    corpus, calls = work / f"{name}.jsonl", work / f"{name}-calls"
    calls.mkdir()
    corpus.write_text(
        "".join(
            json.dumps({"title": f"Passage {i}", "text": f"Alpha met Beta in year {i}."}) + "\n"
            for i in range(n)
        )
    )
    options = RayOptions(workers=workers, batch_size=max(4, 2 * cap), extract_cpus=0.25)
    report = index_on_ray(
        work / f"{name}-index",
        [corpus],
        IndexSettings(embedder="keyword"),
        options,
        extractor=partial(TimedExtractor, latency, cap, str(calls)),
    )
    records = [
        (float(a), float(b), int(k))
        for log in calls.glob("*.log")
        for a, b, k in (line.split() for line in log.read_text().splitlines())
    ]
    return report.seconds["ingest_extract"], records


if __name__ == "__main__":
    main()
