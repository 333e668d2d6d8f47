"""QA benchmark: methods side by side on one backbone, one index, one run.

For each method, :func:`quillian.eval.qa.evaluate` writes ``OUT/<method>/`` with
per-question JSONL, a manifest and a summary; ``OUT/summary.json`` holds every method's
summary and the model's per-stage ledger.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian.bench.datasets import load_questions
from quillian.bench.retrieval import BenchSettings, ensure_index, read_corpus
from quillian.components.generation.tasks import TaskRunner
from quillian.components.llm.prompts import PromptRegistry
from quillian.components.llm.spec import LLMSession
from quillian.components.retrieval.context import RetrievalContext
from quillian.eval.qa import Progress, evaluate
from quillian.index import open_index, read_manifest
from quillian.registry import (
    METHODS,
    SA_RETRIEVERS,
    make_bridges,
    make_embedder,
    make_graph,
    make_pipeline,
    make_retriever,
)

__all__ = ["QASettings", "run_qa_bench", "summary_table"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QASettings:
    index: BenchSettings
    methods: Sequence[str]
    out: Path
    limit: int | None = None
    retriever: str | None = None
    concurrency: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    """The command line that ran the benchmark, kept next to its results."""
    kg: str | None = None
    """The KG-Infused methods' graph: ``index``, ``index+inverse``, an imported graph's
    directory, or ``DIR+index`` (joined by its saved alignment; SA retrieval crosses)."""


def _context(settings: QASettings) -> tuple[RetrievalContext | None, dict[str, Any]]:
    if all(METHODS.get(m) is None for m in settings.methods) and settings.retriever is None:
        return None, {}
    ensure_index(settings.index, read_corpus(settings.index))
    index = open_index(settings.index.index_dir, make_embedder(settings.index.embedder))
    manifest = read_manifest(settings.index.index_dir)
    return index.context, {"counts": manifest.get("counts"), "config": manifest.get("config")}


async def run_qa_bench(
    settings: QASettings,
    session: LLMSession,
    prompts: PromptRegistry,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every method over the first ``limit`` questions; returns the summaries."""
    questions = load_questions(settings.index.dataset, settings.index.questions)
    questions = questions[: settings.limit] if settings.limit else questions
    context, index_info = _context(settings)
    summaries: dict[str, Any] = {}
    runner = TaskRunner(session.model, prompts)
    for method in settings.methods:
        retriever_name = settings.retriever or METHODS.get(method)
        index_dir = settings.index.index_dir
        bridges = make_bridges(settings.kg, index_dir) if retriever_name in SA_RETRIEVERS else None
        retriever = (
            make_retriever(context, retriever_name, bridges=bridges)
            if context is not None and retriever_name
            else None
        )
        graph = make_graph(settings.kg, context, index_dir) if settings.kg else None
        pipeline = make_pipeline(method, runner, retriever, graph=graph, **settings.options)
        manifest = {
            "dataset": settings.index.dataset,
            "questions_file": str(settings.index.questions),
            "method": method,
            "retriever": retriever_name if retriever else None,
            "options": settings.options,
            "kg": settings.kg,
            "model": session.model_id,
            "llm": session.spec.__dict__,
            "prompts": {p.name: p.key for p in prompts},
            "index": index_info,
        }
        report = await evaluate(
            pipeline,
            questions,
            settings.out / method,
            dataset=settings.index.dataset,
            manifest=manifest,
            concurrency=settings.concurrency,
            on_progress=on_progress,
        )
        summaries[method] = report.summary
        logger.info("%s: %s", method, report.summary)
    result = {
        "dataset": settings.index.dataset,
        "model": session.model_id,
        "questions": len(questions),
        "methods": summaries,
        "ledger": session.ledger().as_dict(),
    }
    settings.out.mkdir(parents=True, exist_ok=True)
    (settings.out / "summary.json").write_text(json.dumps(result, indent=2))
    (settings.out / "command.txt").write_text(settings.command + "\n")
    return result


def summary_table(result: dict[str, Any]) -> str:
    """The methods' summaries as a markdown table."""
    head = (
        "| method | EM | F1 | accuracy | evidence recall | tokens/q | s/q | parse failures |"
        " unfinished |\n|---|---|---|---|---|---|---|---|---|"
    )
    rows = []
    for method, s in result["methods"].items():
        recall = "" if s["evidence_recall"] is None else f"{s['evidence_recall']:.3f}"
        rows.append(
            f"| {method} | {s['em']:.3f} | {s['f1']:.3f} | {s['accuracy']:.3f} | {recall} | "
            f"{s['tokens_per_question']:.0f} | {s['seconds_per_question']:.1f} | "
            f"{s['parse_failure_share']:.1%} | {s['unfinished']} |"
        )
    return "\n".join([head, *rows])
