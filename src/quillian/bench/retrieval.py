"""Retrieval benchmark: every retriever on one index, side by side, in one run.

Metrics: perfect retrieval@8 (all gold passages in the top 8) and its share among
multi-hop questions for 2WikiMultihopQA, with the four peers' figures computed from
``peer_top8``; Recall@2 and Recall@5 (mean share of gold passages retrieved) for MuSiQue
and HotpotQA. Every figure carries its bootstrap 95% interval, and methods are compared
question by question (:mod:`quillian.eval.stats`). Latency excludes the query embedding
(queries are embedded first, in one batch), so it measures the retriever itself.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.factories import RETRIEVERS, SA_RETRIEVERS
from quillian.components.ingestion.readers import read_documents
from quillian.components.retrieval.base import Retriever
from quillian.engine import Engine, IndexSettings, index_documents
from quillian.errors import ConfigError, QuillianError
from quillian.eval.datasets import Dataset, Question, load_questions, passage_key
from quillian.eval.stats import interval, paired
from quillian.index import read_manifest
from quillian.methods.table import method_names, method_spec
from quillian.types import Document, Progress, no_progress

__all__ = [
    "BenchSettings",
    "compare",
    "default_index_dir",
    "default_pairs",
    "per_question",
    "recall_at",
    "run_retrieval_bench",
    "summarize",
]

logger = logging.getLogger(__name__)

METHODS = RETRIEVERS
#: SA-RAG's per-dataset settings (section 5.4); HotpotQA is not in the paper: MuSiQue's.
PAPER_SETTINGS: dict[str, dict[str, Any]] = {
    "2wiki": {"seed_k": 10, "hops": 3},
    "musique": {"seed_k": 3, "hops": 4},
    "hotpotqa": {"seed_k": 3, "hops": 4},
}


@dataclass(frozen=True)
class BenchSettings:
    dataset: Dataset
    corpus: Path
    questions: Path
    index_dir: str | Path
    """Where the index is built or reused: a directory, or a PostgreSQL workspace's
    location (``postgresql://...``)."""
    first_n: int | None = None
    extractions: Path | None = None
    embedder: str | None = None
    """None: the index's own, for a new one the default embedder."""
    methods: Sequence[str] = METHODS
    endpoint_texts: bool | None = None
    """Build the index with relation texts with endpoint names (None: as it was)."""


def default_index_dir(dataset: str, first_n: int | None, extractions: Path | None) -> Path:
    """Where the benchmarks build or reuse an index when not told: one name per dataset,
    corpus prefix and extractor, so the retrieval and QA benchmarks share indexes."""
    extractor = "gpt" if extractions else "spacy"
    return Path("indexes") / f"{dataset}-{first_n or 'all'}-{extractor}"


def recall_at(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Share of ``gold`` keys among the first ``k`` retrieved keys."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    return len(gold_set.intersection(retrieved[:k])) / len(gold_set)


def _perfect(retrieved: Sequence[str], gold: Iterable[str], k: int = 8) -> bool:
    return set(gold) <= set(retrieved[:k])


def per_question(
    dataset: str, ranked: list[list[str]], questions: Sequence[Question]
) -> dict[str, list[float]]:
    """Each metric's score per question: perfect@8 for 2Wiki (and over its multi-hop
    questions alone), Recall@2 and @5 for the others."""
    if dataset == "2wiki":
        perfect = [float(_perfect(r, q.gold)) for r, q in zip(ranked, questions, strict=True)]
        multi = [p for p, q in zip(perfect, questions, strict=True) if q.multihop]
        return {"perfect@8": perfect, "multihop_perfect@8": multi}
    return {
        f"R@{k}": [recall_at(r, q.gold, k) for r, q in zip(ranked, questions, strict=True)]
        for k in (2, 5)
    }


def summarize(scores: dict[str, list[float]]) -> dict[str, Any]:
    """Each metric's mean and its bootstrap 95% interval (``<metric>_ci``)."""
    out: dict[str, Any] = {}
    for metric, values in scores.items():
        out[metric] = round(float(np.mean(values)), 4) if values else 0.0
        low, high = interval(values)
        out[f"{metric}_ci"] = [round(low, 4), round(high, 4)] if values else None
    return out


def compare(
    scores: dict[str, dict[str, list[float]]], pairs: Sequence[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """Paired comparisons ``a vs b`` on every metric, over the same questions."""
    out: dict[str, dict[str, Any]] = {}
    for a, b in pairs:
        if a not in scores or b not in scores:
            missing = a if a not in scores else b
            raise ConfigError(f"cannot compare {a} with {b}: {missing} was not run")
        out[f"{a} vs {b}"] = {
            metric: paired(scores[a][metric], scores[b][metric]).as_dict() for metric in scores[a]
        }
    return out


def default_pairs(methods: Sequence[str], baseline: str = "dense") -> list[tuple[str, str]]:
    """Every method against the dense baseline, when it ran."""
    return [(m, baseline) for m in methods if baseline in methods and m != baseline]


def read_corpus(settings: BenchSettings) -> list[Document]:
    docs = read_documents(settings.corpus)
    return list(islice(docs, settings.first_n) if settings.first_n else docs)


def _staged(names: Sequence[str]) -> list[str]:
    """The retrievers compared that are also methods with build stages of their own
    (``kags``, ``kag``): the index needs those stages."""
    known = set(method_names())
    return [n for n in names if n in known and method_spec(n).index_stages]


def ensure_index(
    settings: BenchSettings,
    documents: list[Document],
    on_progress: Progress | None = None,
    methods: Sequence[str] = (),
) -> dict[str, Any]:
    """Build or update the index (with the build stages of ``methods``); ``reused``
    says whether a complete one was there."""
    reused = False
    with contextlib.suppress(QuillianError):
        reused = read_manifest(settings.index_dir).get("state") == "complete"
    index = IndexSettings(
        extractor="precomputed" if settings.extractions else "spacy",
        extractions=settings.extractions,
        embedder=settings.embedder,
        methods=tuple(dict.fromkeys([*methods, *_staged(settings.methods)])),
        endpoint_texts=settings.endpoint_texts,
    )
    start = time.perf_counter()
    report = index_documents(settings.index_dir, documents, index, on_progress=on_progress)
    return {
        "build_seconds": round(time.perf_counter() - start, 1),
        "stage_seconds": {k: round(v, 1) for k, v in report.seconds.items()},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "reused": reused,
        **report.counts,
    }


def run_retrieval_bench(
    settings: BenchSettings,
    k: int = 8,
    kg: str | None = None,
    on_progress: Progress | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Build (or reuse) the index and score every method; returns one JSON-able dict.

    Every figure comes with its bootstrap 95% interval (``<metric>_ci``); ``_paired``
    compares methods question by question (each against ``dense``, and ``pairs``)
    and ``_per_question`` keeps each method's per-question scores, so any two runs on
    the same questions can be compared later. With ``kg`` (``DIR+index``), each SA
    method also runs crossing into that graph through its alignment with the index,
    reported as ``<method>+<graph name>``.
    """
    questions = load_questions(settings.dataset, settings.questions)
    documents = read_corpus(settings)
    progress = on_progress or no_progress
    build = ensure_index(settings, documents, progress)
    engine = Engine.open(
        settings.index_dir,
        kg=kg,
        embedder=settings.embedder,
        retriever_options={"sa-paper": PAPER_SETTINGS[settings.dataset]},
    )
    ctx = engine.index.context
    keys = [
        passage_key(settings.dataset, t, x)
        for t, x in zip(ctx.chunk_titles, ctx.chunk_texts, strict=True)
    ]
    vectors = ctx.embedder.embed([q.question for q in questions])
    out: dict[str, Any] = {}
    scores: dict[str, dict[str, list[float]]] = {}
    runs: list[tuple[str, Retriever]] = []
    for method in settings.methods:
        runs.append((method, engine.retriever(method, crossing=False)))
        if method in SA_RETRIEVERS and engine.joins_graph():
            crossing = engine.retriever(method, crossing=True)
            runs.append((crossing.name, crossing))  # "sa+wordnet": the graph crossed into
    for method, retriever in runs:
        retriever.retrieve(questions[0].question, k, vectors[0])  # warm-up (JIT, caches)
        ranked, latencies = [], []
        for q, v in zip(questions, vectors, strict=True):
            t = time.perf_counter()
            result = retriever.retrieve(q.question, k, v)
            latencies.append((time.perf_counter() - t) * 1000)
            ranked.append([keys[p.chunk] for p in result.passages])
            progress(f"retrieve:{method}", len(ranked), len(questions))
        scores[method] = per_question(settings.dataset, ranked, questions)
        out[method] = {
            **summarize(scores[method]),
            "p50_ms": round(float(np.percentile(latencies, 50)), 2),
            "p95_ms": round(float(np.percentile(latencies, 95)), 2),
        }
    if settings.dataset == "2wiki":
        peers = sorted({name for q in questions for name in q.peers})
        for name in peers:
            ranked = [q.peers.get(name, []) for q in questions]
            scores[f"peer:{name}"] = per_question("2wiki", ranked, questions)
            out[f"peer:{name}"] = summarize(scores[f"peer:{name}"])
    chosen = dict.fromkeys([*default_pairs(list(scores)), *(pairs or ())])
    out["_paired"] = compare(scores, list(chosen))
    out["_per_question"] = {
        "ids": [q.id for q in questions],
        **{
            m: {metric: [round(v, 4) for v in vs] for metric, vs in by.items()}
            for m, by in scores.items()
        },
    }
    out["_run"] = {
        "dataset": settings.dataset,
        "questions": len(questions),
        "passages": len(documents),
        "k": k,
        "index": build,
    }
    return out
