"""QA benchmark: methods side by side on one backbone, one index, one run.

For each method, :func:`quillian.eval.qa.evaluate` writes ``OUT/<method>/`` with
per-question JSONL, a manifest and a summary; ``OUT/summary.json`` holds every method's
summary and the model's per-stage ledger.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from quillian.bench.retrieval import BenchSettings, ensure_index, read_corpus
from quillian.engine import Engine
from quillian.errors import ConfigError
from quillian.eval.datasets import Question, load_questions
from quillian.eval.judge import JUDGED_METRICS, Judge
from quillian.eval.qa import DEFAULT_METRICS, check_metrics, evaluate
from quillian.eval.qa import Progress as QuestionProgress
from quillian.index import read_manifest
from quillian.methods.table import method_spec
from quillian.types import Progress

__all__ = ["QASettings", "load_qa_questions", "run_qa_bench", "score", "summary_table"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QASettings:
    index: BenchSettings
    methods: Sequence[str]
    out: Path
    limit: int | None = None
    offset: int = 0
    """Questions skipped before the first one run (a long run split in parts)."""
    kinds: Sequence[str] = ()
    """Only questions of these classes (:attr:`Question.kind`: ``comparison``,
    ``2hop``, ...), chosen before ``offset`` and ``limit``; empty: every question."""
    retriever: str | None = None
    concurrency: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    """The command line that ran the benchmark, kept next to its results."""
    kg: str | None = None
    """The KG-Infused methods' graph: ``index``, ``index+inverse``, an imported graph's
    directory, or ``DIR+index`` (joined by its saved alignment; SA retrieval crosses)."""
    metrics: Sequence[str] = DEFAULT_METRICS
    """Scored beside EM, F1 and accuracy (see :data:`quillian.eval.qa.METRICS`); the
    judged ones use the benchmark's own model as the judge."""
    verify: dict[str, Any] | None = None
    """Verify every answer against the KG-embedding model (``--verify``), with these
    Know3-RAG options (``theta0``, ``aggregation``, ...); None: no verification."""


def load_qa_questions(settings: QASettings) -> list[Question]:
    """``limit`` questions from the ``offset``-th (all from there without a limit)
    of the ``kinds`` asked for, each with a gold answer to score against.

    A questions file without answers (the 2Wiki set here carries only gold passages)
    is refused before any index is built or any model is called: answers could not be
    scored, and ``bench retrieval`` is the benchmark for such a set."""
    questions = load_questions(settings.index.dataset, settings.index.questions)
    if settings.kinds:
        found = sorted({q.kind for q in questions if q.kind})
        unknown = sorted(set(settings.kinds) - set(found))
        if unknown:
            raise ConfigError(
                f"{settings.index.questions}: no question of kind {', '.join(unknown)} "
                f"(its kinds: {', '.join(found) or 'none'})"
            )
        questions = [q for q in questions if q.kind in settings.kinds]
    if settings.offset < 0 or settings.offset >= len(questions):
        raise ConfigError(
            f"{settings.index.questions}: offset {settings.offset} is outside its "
            f"{len(questions)} questions"
        )
    end = settings.offset + settings.limit if settings.limit else None
    questions = questions[settings.offset : end]
    missing = [i for i, q in enumerate(questions) if not q.answers]
    if missing and len(missing) < len(questions):
        raise ConfigError(
            f"{settings.index.questions}: {len(missing)} of {len(questions)} questions have "
            f"no gold answer (the first is question {missing[0]}: "
            f"{questions[missing[0]].question!r}); bench qa scores answers against them, "
            "so a set gives gold answers for all of its questions or for none"
        )
    return questions


def needs_index(settings: QASettings) -> bool:
    """Whether any method (or the retriever asked for) reads the index."""
    if settings.retriever is not None or (settings.verify is not None and settings.kg is None):
        return True
    return any(method_spec(m).reads_index() for m in settings.methods)


def prepare_index(settings: QASettings, on_progress: Progress | None = None) -> dict[str, Any]:
    """Build or reuse the benchmark's index when a method needs it; its counts and
    configuration for the manifests."""
    if not needs_index(settings):
        return {}
    kinds = {settings.retriever or method_spec(m).retriever for m in settings.methods}
    index = replace(settings.index, methods=[k for k in kinds if k])  # retrievers' stages
    staged = [m for m in settings.methods if method_spec(m).index_stages]  # methods' stages
    ensure_index(index, read_corpus(index), on_progress, staged)
    manifest = read_manifest(settings.index.index_dir)
    return {"counts": manifest.get("counts"), "config": manifest.get("config")}


async def run_qa_bench(
    settings: QASettings,
    engine: Engine,
    index_info: dict[str, Any],
    on_progress: QuestionProgress | None = None,
) -> dict[str, Any]:
    """Run every method over the questions chosen (``offset``, ``limit``) with
    ``engine`` (opened on the index :func:`prepare_index` built, its LLM session
    started); returns the summaries."""
    questions = load_qa_questions(settings)
    if not any(q.answers for q in questions):
        logger.warning(
            "%s: no question has a gold answer (the set names only its gold passages): EM, "
            "F1, accuracy and containment are not scored; recall of the passages, the "
            "methods' steps and their costs are",
            settings.index.questions,
        )
    summaries: dict[str, Any] = {}
    metrics = check_metrics(settings.metrics)
    judged = any(m in JUDGED_METRICS for m in metrics)
    judge = Judge(engine.runner, engine.embedder()) if judged else None
    verify = None
    if settings.verify is not None:
        verify_options = settings.verify

        async def verify(question: str, answer: str) -> dict[str, Any]:
            return (await engine.verify(question, answer, **verify_options)).as_dict()

    for method in settings.methods:
        spec = method_spec(method)
        # each method gets the options it declares (--option was checked against all)
        declared = {o.name for o in spec.options}
        options = {k: v for k, v in settings.options.items() if k in declared}
        pipeline = engine.pipeline(method, retriever=settings.retriever, **options)
        retriever = settings.retriever or spec.retriever
        manifest = {
            "dataset": settings.index.dataset,
            "questions_file": str(settings.index.questions),
            "offset": settings.offset,
            **({"kinds": list(settings.kinds)} if settings.kinds else {}),
            "method": spec.name,
            "retriever": retriever,
            "options": options,
            "kg": settings.kg,
            "model": engine.session.model_id,
            "llm": engine.session.spec.__dict__,
            "prompts": {p.name: p.key for p in engine.prompts},
            "index": index_info,
            "metrics": list(metrics),
            "judge": {"model": engine.session.model_id, "embedder": judge.embedder.model_id}
            if judge
            else None,
            "verify": settings.verify,
        }
        reuse_before = _prefix_counts(engine)
        report = await evaluate(
            pipeline,
            questions,
            settings.out / spec.name,
            dataset=settings.index.dataset,
            manifest=manifest,
            concurrency=settings.concurrency,
            on_progress=on_progress,
            metrics=metrics,
            judge=judge,
            verify=verify,
        )
        summaries[spec.name] = report.summary
        reuse_after = _prefix_counts(engine)
        if reuse_before is not None and reuse_after is not None:
            reused, prompted = (a - b for a, b in zip(reuse_after, reuse_before, strict=True))
            summaries[spec.name]["prompt_reuse_share"] = round(reused / max(prompted, 1), 4)
        logger.info("%s: %s", spec.name, report.summary)
    result = {
        "dataset": settings.index.dataset,
        "model": engine.session.model_id,
        "questions": len(questions),
        "offset": settings.offset,
        **({"kinds": list(settings.kinds)} if settings.kinds else {}),
        "methods": summaries,
        "ledger": engine.ledger().as_dict(),
    }
    settings.out.mkdir(parents=True, exist_ok=True)
    (settings.out / "summary.json").write_text(json.dumps(result, indent=2))
    (settings.out / "command.txt").write_text(settings.command + "\n")
    return result


def _prefix_counts(engine: Engine) -> tuple[int, int] | None:
    """Prompt tokens a local model took from its prefix cache, and all it was given;
    ``None`` for a model with no such cache."""
    cache = getattr(engine.session.backend, "prefix_cache", None)
    stats = getattr(cache, "stats", None)
    return None if stats is None else (stats.reused_tokens, stats.prompt_tokens)


#: Extra metric columns of :func:`summary_table`, shown when a run scored them.
EXTRA_COLUMNS = {
    "token_containment": "token containment",
    "fuzzy_containment": "fuzzy containment",
    "faithfulness": "faithfulness",
    "answer_relevance": "answer relevance",
}


#: Columns a summary has only for some methods or runs: (key, header, format).
OPTIONAL_COLUMNS: tuple[tuple[str, str, str], ...] = (
    *((key, header, ".3f") for key, header in EXTRA_COLUMNS.items()),
    ("evidence_recall", "evidence recall", ".3f"),
    ("recall@2", "R@2", ".3f"),
    ("recall@5", "R@5", ".3f"),
    ("graph_answered_share", "answered from graph", ".1%"),
    ("graph_hit_share", "graph matched", ".1%"),
    ("graph_gold_hop_share", "graph-matched steps naming a gold hop", ".1%"),
    ("chunk_gold_hop_share", "passage-only steps naming a gold hop", ".1%"),
    ("failed_step_share", "failed steps", ".1%"),
    ("plan_cut_share", "plans cut at a repeat", ".1%"),
    ("repeated_step_share", "repeated steps", ".1%"),
    ("rounds_per_question", "rounds", ".2f"),
    ("prompt_reuse_share", "prompt tokens reused", ".1%"),
    ("questions_per_minute", "questions/min (wall)", ".2f"),
)


def score(value: float | None) -> str:
    """An answer score as the tables print it; ``n/a`` where no gold answer scored it."""
    return "n/a" if value is None else f"{value:.3f}"


def summary_table(result: dict[str, Any]) -> str:
    """The methods' summaries as a markdown table; a column some summaries lack (an
    extra metric, KAG's graph shares) appears when any summary has it."""
    summaries = list(result["methods"].values())
    shown = [c for c in OPTIONAL_COLUMNS if any(s.get(c[0]) is not None for s in summaries)]
    headers = ["method", "EM", "F1", "accuracy", *(c[1] for c in shown)]
    headers += ["tokens/q", "s/q", "parse failures", "unfinished"]
    head = "| " + " | ".join(headers) + " |\n|" + "---|" * len(headers)
    rows = []
    for method, s in result["methods"].items():
        cells = [method, score(s["em"]), score(s["f1"]), score(s["accuracy"])]
        cells += ["" if s.get(key) is None else format(s[key], spec) for key, _, spec in shown]
        cells += [
            f"{s['tokens_per_question']:.0f}",
            f"{s['seconds_per_question']:.1f}",
            f"{s['parse_failure_share']:.1%}",
            str(s["unfinished"]),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, *rows, *_kind_table(result["methods"])])


def _kind_table(methods: dict[str, Any]) -> list[str]:
    """F1 per kind of question, each kind with its count, when the questions have
    kinds (every method of a run answers the same questions)."""
    first: dict[str, Any] = next(iter(methods.values()), {})
    kinds: dict[str, Any] = first.get("by_kind", {})
    if not kinds:
        return []
    headers = ["F1 by kind", *(f"{kind} ({k['questions']})" for kind, k in kinds.items())]
    rows = [[m, *(score(s["by_kind"][kind]["f1"]) for kind in kinds)] for m, s in methods.items()]
    lines = ["| " + " | ".join(cells) + " |" for cells in [headers, *rows]]
    return ["", lines[0], "|" + "---|" * len(headers), *lines[1:]]
