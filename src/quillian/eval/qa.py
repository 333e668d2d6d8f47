"""Question-answering evaluation: run a pipeline over questions, score every answer
against all gold aliases, and write per-question JSONL, a manifest and a summary.

The output directory holds ``predictions.jsonl`` (one line per question: prediction,
gold answers, scores, evidence, tokens, seconds, every LLM call with the raw text of
those that failed to parse), ``manifest.json`` (configuration and its hash, prompt
versions, model id) and ``summary.json``. Questions run concurrently up to
``concurrency``; lines are written in question order.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quillian.components.llm.tasks import Transcript
from quillian.eval.datasets import Question, passage_key
from quillian.eval.judge import JUDGED_METRICS, Judge, judged_means
from quillian.eval.metrics import fuzzy_containment, score_answer, token_containment
from quillian.methods.base import AnswerResult, Pipeline

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "QAReport",
    "Verify",
    "answered_turn",
    "calls_by_prompt",
    "check_metrics",
    "config_hash",
    "evaluate",
    "no_calls",
    "summarize",
]

#: Scored beside EM, F1 and accuracy (always computed) when selected.
CONTAINMENT_METRICS = ("token_containment", "fuzzy_containment")
METRICS = (*CONTAINMENT_METRICS, *JUDGED_METRICS)
DEFAULT_METRICS = CONTAINMENT_METRICS


def check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    """``metrics`` if every one is known (see :data:`METRICS`), else a ValueError."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {', '.join(METRICS)}")
    return tuple(metrics)


logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
Verify = Callable[[str, str], Awaitable[dict[str, Any]]]
"""Judges an answer to a question (``--verify``): a record with a ``verified`` flag."""


def config_hash(config: dict[str, Any]) -> str:
    """A short hash of a JSON-able configuration (keys sorted)."""
    canonical = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class QAReport:
    summary: dict[str, Any]
    rows: list[dict[str, Any]]


def _row(
    dataset: str, question: Question, result: AnswerResult, metrics: Sequence[str] = ()
) -> dict[str, Any]:
    # a question with no gold answer (2WikiMultihopQA's files name only the gold
    # passages) scores its ranking and its costs; its answer scores are None
    scores = score_answer(result.answer, list(question.answers)) if question.answers else None
    retrieved = [passage_key(dataset, p.title, p.text) for p in result.evidence.passages]
    row: dict[str, Any] = {
        "id": question.id,
        **({"kind": question.kind} if question.kind else {}),
        "gold": list(question.answers),
        "prediction": result.answer,
        "em": scores.em if scores else None,
        "f1": round(scores.f1, 4) if scores else None,
        "accuracy": scores.accuracy if scores else None,
        "evidence_recall": (
            round(len(question.gold & set(retrieved)) / len(question.gold), 4)
            if question.gold
            else None
        ),
        **{
            f"recall@{k}": (
                round(len(question.gold & set(retrieved[:k])) / len(question.gold), 4)
                if question.gold
                else None
            )
            for k in (2, 3, 5)
        },
    }
    if question.hop_answers:
        row["hop_answers"] = [list(h) for h in question.hop_answers]
    measures = {"token_containment": token_containment, "fuzzy_containment": fuzzy_containment}
    for name in metrics:
        if name in measures and question.answers:
            row[name] = round(measures[name](result.answer, list(question.answers)), 4)
    return _mark_gold_candidates(dataset, question, {**row, **result.as_dict()})


def _mark_gold_candidates(dataset: str, question: Question, row: dict[str, Any]) -> dict[str, Any]:
    """Mark each corpus passage a reference filter (Know3-RAG's) checked with ``gold``:
    whether it is one of the question's gold passages, so the summary can say whether
    the filter keeps gold passages more often than others."""
    if not question.gold:
        return row
    for step in row.get("steps", ()):
        if step.get("kind") != "reference-filter":
            continue
        for candidate in step["candidates"]:
            title = candidate.get("title")
            if title is not None:
                text = candidate["text"].removeprefix(f"{title}: ")
                candidate["gold"] = passage_key(dataset, title, text) in question.gold
    return row


async def _judge(
    judge: Judge, metrics: Sequence[str], result: AnswerResult, row: dict[str, Any]
) -> None:
    """Add the judged metrics to ``row``, with the judge's calls."""
    transcript = Transcript()
    if "faithfulness" in metrics:
        row["faithfulness"] = await judge.faithfulness(
            result.question, result.answer, result.evidence, transcript
        )
    if "answer_relevance" in metrics:
        relevance = await judge.answer_relevance(result.question, result.answer, transcript)
        row["answer_relevance"] = None if relevance is None else round(relevance, 4)
    usage = transcript.usage
    row["judge"] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "parse_failures": transcript.parse_failures,
        "calls": [c.as_dict() for c in transcript.calls],
    }


def _recall(rows: Sequence[dict[str, Any]], k: int) -> float | None:
    """Mean share of gold passages among the first ``k`` of the final ranking."""
    values = [r[f"recall@{k}"] for r in rows if r.get(f"recall@{k}") is not None]
    return _mean(values) if values else None


def _graph_shares(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """For methods that record KAG steps: the share of retrieval steps answered from
    the graph alone, the share where the graph matched at all, the share of steps that
    failed, the share of plans that ended at a step repeating an earlier one (the plan's
    stop rule), and rounds used. Runs made before plans ended there skipped each repeat
    as a step: their share of planned steps skipped is kept for them.

    ``graph_answered_share`` is in every method's summary: None (null) for a method
    with no KAG steps, and, like the other step shares, for a run with no such steps
    at all (KAG's CR preset plans none), where 0.0 would read as "the graph never
    answered"."""
    planned = [s for r in rows for s in r["steps"] if s.get("kind") == "kag-step"]
    steps = [s for s in planned if s["layer"] != "repeat"]  # repeats are not run
    plans = [c for r in rows for c in r["calls"] if c["prompt"].startswith("kag.plan@")]
    retrievals = [s for s in steps if s["executor"] == "retrieval"]
    rounds = [
        max((s["round"] for s in r["steps"] if s.get("kind") == "kag-reflection"), default=1)
        for r in rows
    ]
    if not planned and not any(s.get("kind") == "kag-reflection" for r in rows for s in r["steps"]):
        return {"graph_answered_share": None}
    out = {
        "graph_answered_share": _share(
            [1.0 if s["layer"] in ("graph-exact", "graph-fuzzy") else 0.0 for s in retrievals]
        ),
        "graph_hit_share": _share([1.0 if s["graph_hit"] else 0.0 for s in retrievals]),
        "failed_step_share": _share([1.0 if s["layer"] == "failed" else 0.0 for s in steps]),
    }
    if plans:
        out["plan_cut_share"] = _mean([float(bool(c.get("stopped"))) for c in plans])
    if len(steps) < len(planned):
        out["repeated_step_share"] = _mean([float(s["layer"] == "repeat") for s in planned])
    out["rounds_per_question"] = _mean([float(r) for r in rounds])
    return {**out, **_gold_hop_shares(rows)}


#: Where a KAG retrieval step's answer came from, grouped as :func:`_gold_hop_shares`
#: reports them: the graph alone, the graph's facts read with passages, passages alone.
_STEP_SOURCES = {
    "graph": ("graph-exact", "graph-fuzzy"),
    "hybrid": ("hybrid",),
    "chunks": ("chunks",),
}


def _gold_hop_shares(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """For questions with gold hop answers (MuSiQue's decomposition): per source of a
    retrieval step's answer, how many steps it answered and the share whose answer
    names a gold hop answer of the question (every token of one of its aliases,
    :func:`~quillian.eval.metrics.token_containment`), and the same share over the steps
    where the graph matched (answered from it alone, or from its facts read with
    passages) and over those answered from passages alone. Whether the graph path fires
    is one question; whether it is right when it does is the other."""
    by_source: dict[str, list[float]] = {name: [] for name in _STEP_SOURCES}
    for row in rows:
        hops = [alias for hop in row.get("hop_answers", ()) for alias in hop]
        if not hops:
            continue
        for step in row["steps"]:
            if step.get("kind") != "kag-step" or step.get("executor") != "retrieval":
                continue
            source = next((n for n, ls in _STEP_SOURCES.items() if step["layer"] in ls), None)
            if source is not None:
                named = token_containment(step.get("answer", ""), hops) == 1.0
                by_source[source].append(float(named))
    if not any(by_source.values()):
        return {}
    shares = {
        n: {"steps": len(v), "names_gold_hop": _mean(v) if v else None}
        for n, v in by_source.items()
    }
    matched = by_source["graph"] + by_source["hybrid"]
    return {
        "gold_hop_by_source": shares,
        "graph_gold_hop_share": _mean(matched) if matched else None,
        "chunk_gold_hop_share": _mean(by_source["chunks"]) if by_source["chunks"] else None,
    }


def _reference_filter(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """For methods that filter candidate references (Know3-RAG): per kind of candidate
    (written by a knowledge model, or a corpus passage; passages split into gold and
    others where the questions name gold passages), how many were checked, the share
    the relevance check (P5) passed and the share the filter kept. A check that passes
    gold passages no more often than others does not tell them apart."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        for step in row["steps"]:
            if step.get("kind") != "reference-filter":
                continue
            for c in step["candidates"]:
                if c.get("error"):
                    continue
                if c["query"] != "corpus":
                    name = "written"
                elif "gold" in c:
                    name = "gold_passage" if c["gold"] else "other_passage"
                else:
                    name = "passage"
                groups.setdefault(name, []).append(c)
    return {
        name: {
            "candidates": len(group),
            "relevant_share": _mean([float(c["relevant"]) for c in group]),
            "kept_share": _mean([float(c["kept"]) for c in group]),
        }
        for name, group in sorted(groups.items())
    }


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _share(values: Sequence[float]) -> float | None:
    """The mean of ``values``; None for none (a share of nothing is not 0)."""
    return _mean(values) if values else None


#: The scores of an answer against the gold answers (None where a question has none).
ANSWER_SCORES = ("em", "f1", "accuracy")


def _answer_means(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """EM, F1 and accuracy over the rows whose question has gold answers; None when
    none has (a set that names only its gold passages)."""
    scored = [r for r in rows if r["em"] is not None]
    return {m: _mean([r[m] for r in scored]) if scored else None for m in ANSWER_SCORES}


def answered_turn(row: dict[str, Any]) -> int | None:
    """The turn whose answer a turn-based method (Know3-RAG) output; None for others."""
    turns = [s["turn"] for s in row.get("steps", ()) if s.get("kind") == "turn-answer"]
    return max(turns) if turns else None


def _turn_shares(rows: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    turns = [t for t in (answered_turn(r) for r in rows) if t is not None]
    if not turns:
        return None
    return {str(t): round(turns.count(t) / len(turns), 4) for t in sorted(set(turns))}


def _verification(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """How scores differ between answers the KGE check verified and the others."""
    checked = [r for r in rows if r.get("verification")]
    if not checked:
        return None
    out: dict[str, Any] = {"checked": len(checked)}
    for name, verdict in (("verified", True), ("not_verified", False)):
        group = [r for r in checked if r["verification"]["verified"] is verdict]
        out[name] = {"questions": len(group), **_answer_means(group)}
    out["unscorable"] = sum(1 for r in checked if r["verification"]["score"] is None)
    return out


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean scores and costs over the rows of one method."""
    calls = [c for r in rows for c in r["calls"]]
    recalls = [r["evidence_recall"] for r in rows if r["evidence_recall"] is not None]
    return {
        "questions": len(rows),
        **_answer_means(rows),
        "answers_scored": sum(1 for r in rows if r["em"] is not None),
        "evidence_recall": _mean(recalls) if recalls else None,
        "recall@2": _recall(rows, 2),
        "recall@3": _recall(rows, 3),
        "recall@5": _recall(rows, 5),
        # passages put in front of the model; recall@3 covers the first three of them
        # (the question's own top 3 where dual retrieval lists them first)
        "passages_per_question": (
            round(sum(len(r["evidence"]["passages"]) for r in rows) / len(rows), 2) if rows else 0.0
        ),
        "tokens_per_question": round(
            _mean([r["prompt_tokens"] + r["completion_tokens"] for r in rows]), 1
        ),
        "seconds_per_question": round(_mean([r["seconds"] for r in rows]), 2),
        "llm_calls": len(calls),
        "cached_calls": sum(1 for c in calls if c["cached"]),
        "parse_failure_share": round(sum(1 for c in calls if "error" in c) / len(calls), 4)
        if calls
        else 0.0,
        "unfinished": sum(1 for r in rows if r["error"]),
        **_metric_means(rows),
        **({"answered_at_turn": shares} if (shares := _turn_shares(rows)) else {}),
        **({"verification": check} if (check := _verification(rows)) else {}),
        **({"reference_filter": checked} if (checked := _reference_filter(rows)) else {}),
        **_graph_shares(rows),
        **({"by_kind": kinds} if (kinds := _by_kind(rows)) else {}),
        "by_prompt": calls_by_prompt(calls),
    }


def _by_kind(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """EM, F1 and accuracy per class of question (HotpotQA's bridge and comparison,
    MuSiQue's hop counts), for rows that carry one."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("kind"):
            groups.setdefault(row["kind"], []).append(row)
    return {
        kind: {
            "questions": len(group),
            **_answer_means(group),
        }
        for kind, group in sorted(groups.items())
    }


def no_calls() -> dict[str, Any]:
    """A prompt's :func:`calls_by_prompt` entry before any call (a run that never used
    the prompt)."""
    return {
        "calls": 0,
        "parse_failures": 0,
        "truncated": 0,
        "stopped": 0,
        "completion_tokens": 0,
        "seconds": 0.0,
    }


def calls_by_prompt(calls: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per versioned prompt: its calls, those that failed to parse, stopped at the
    token limit or were ended by their stop rule, the tokens it wrote and the seconds it
    took (a cached call costs none), so a run shows which step its time and failures
    come from."""
    out: dict[str, dict[str, Any]] = {}
    for call in calls:
        entry = out.setdefault(call["prompt"], no_calls())
        entry["calls"] += 1
        entry["parse_failures"] += int("error" in call)
        entry["truncated"] += int(bool(call.get("truncated")))
        entry["stopped"] += int(bool(call.get("stopped")))
        entry["completion_tokens"] += call["completion_tokens"]
        entry["seconds"] = round(entry["seconds"] + call["seconds"], 3)
    return dict(sorted(out.items()))


def _metric_means(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of the selected metrics; a judged one also counts questions it could not
    score and the judge's parse failures."""
    out: dict[str, Any] = {}
    for name in METRICS:
        values = [r[name] for r in rows if name in r]
        if not values:
            continue
        out[name], unscored = judged_means(values)
        if name in JUDGED_METRICS:
            out[f"{name}_unscored"] = unscored
    judged = [r["judge"] for r in rows if "judge" in r]
    if judged:
        out["judge_parse_failures"] = sum(j["parse_failures"] for j in judged)
        out["judge_tokens_per_question"] = round(
            _mean([j["prompt_tokens"] + j["completion_tokens"] for j in judged]), 1
        )
    return out


async def evaluate(
    pipeline: Pipeline,
    questions: Sequence[Question],
    out: Path,
    *,
    dataset: str,
    manifest: dict[str, Any],
    concurrency: int = 1,
    on_progress: Progress | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    judge: Judge | None = None,
    verify: Verify | None = None,
) -> QAReport:
    """Answer every question, score, and write the three files into ``out``.

    Unusable model output never stops the run: pipelines record it per question. An
    error of the model backend (unreachable endpoint, wrong key) stops the run; the
    lines already written stay, and with a response cache a rerun repeats no call.
    ``verify`` judges each non-empty answer; its record joins the row.
    """
    if concurrency <= 0:
        raise ValueError(f"concurrency must be greater than 0, got {concurrency}")
    metrics = check_metrics(metrics)
    if judge is None and any(m in JUDGED_METRICS for m in metrics):
        raise ValueError(f"the metrics {', '.join(JUDGED_METRICS)} need a judge")
    out.mkdir(parents=True, exist_ok=True)
    manifest = {**manifest, "config_hash": config_hash(manifest), "questions": len(questions)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(question: Question) -> dict[str, Any]:
        nonlocal done
        async with gate:
            result = await pipeline.answer(question.question)
            row = _row(dataset, question, result, metrics)
            if judge is not None and any(m in JUDGED_METRICS for m in metrics):
                await _judge(judge, metrics, result, row)
            checked = None
            if verify is not None and result.answer:
                checked = await verify(question.question, result.answer)
        done += 1
        if on_progress is not None:
            on_progress(done, len(questions))
        return {**row, "verification": checked} if verify is not None else row

    start = time.perf_counter()
    tasks = [asyncio.create_task(one(q)) for q in questions]
    rows: list[dict[str, Any]] = []
    try:
        with (out / "predictions.jsonl").open("w", encoding="utf-8") as fh:
            for task in tasks:  # in question order, each line as soon as it is known
                rows.append(await task)
                fh.write(json.dumps(rows[-1], ensure_ascii=False) + "\n")
                fh.flush()
    finally:
        for task in tasks:
            task.cancel()
    wall = time.perf_counter() - start
    summary = {
        "method": pipeline.name,
        **summarize(rows),
        # a question's seconds include waiting for a model other questions share, so
        # under concurrency the run's own time says what the questions cost together
        "concurrency": concurrency,
        "wall_seconds": round(wall, 2),
        "questions_per_minute": round(60 * len(rows) / wall, 2) if wall > 0 else None,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return QAReport(summary, list(rows))
