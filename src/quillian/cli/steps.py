"""``ask --trace``: each step a method took, rendered by its type as readable lines."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from functools import singledispatch
from typing import Any

from quillian.methods.steps import (
    AnswerReasoning,
    ConfidenceCheck,
    EnhancedNote,
    ExpandedQuery,
    FollowUp,
    KAGPlan,
    KAGReflection,
    KAGStep,
    KAGTally,
    KGRound,
    KGSeeds,
    KGSummary,
    Note,
    Reasoning,
    ReferenceFilter,
    RelatedEntities,
    Retrieval,
    Step,
    SubQuestion,
    TurnAnswer,
)

__all__ = ["step_lines"]

#: Characters of a context shown before it is cut.
CONTEXT_CHARS = 300


def _flat(text: str, limit: int | None = None) -> str:
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 3] + "..."


#: Steps that carry one text, shown as ``label: text``.
TEXT_LABELS: dict[type[Step], str] = {
    ExpandedQuery: "expanded query",
    Note: "note",
    EnhancedNote: "enhanced note",
    AnswerReasoning: "answer reasoning",
    KGSummary: "kg summary",
}
#: Steps that ask a question and get an answer, shown as ``label: question -> answer``.
QA_LABELS: dict[type[Step], str] = {SubQuestion: "sub-question", FollowUp: "follow-up"}


@singledispatch
def step_lines(step: Step) -> list[str]:
    """The lines of one step, unindented (a step type with no renderer of its own shows
    its kind and fields)."""
    values = ", ".join(f"{f.name} {getattr(step, f.name)!r}" for f in fields(step))
    return [f"{step.kind}: {values}"]


@step_lines.register
def _(step: ExpandedQuery | Note | EnhancedNote | AnswerReasoning | KGSummary) -> list[str]:
    return [f"{TEXT_LABELS[type(step)]}: {_flat(step.text)}"]


@step_lines.register
def _(step: SubQuestion | FollowUp) -> list[str]:
    return [f"{QA_LABELS[type(step)]}: {_flat(step.question)} -> {_flat(step.answer)}"]


@step_lines.register
def _(step: Retrieval) -> list[str]:
    return [f"retrieved {len(step.chunks)} passages for {step.query!r} ({step.retriever})"]


@step_lines.register
def _(step: Reasoning) -> list[str]:
    if step.answer_possible:
        outcome = f"answerable: {_flat(step.final_answer)}"
    else:
        outcome = f"needs more: {_flat(step.additional_question)}"
    return [f"reasoning: {outcome}", f"  from: {_flat(step.provided_context, CONTEXT_CHARS)}"]


@step_lines.register
def _(step: KGSeeds) -> list[str]:
    seeds = ", ".join(f"{s.entity} ({s.score:.2f})" for s in step.seeds)
    return [f"kg seeds: {seeds or '(none)'}"]


@step_lines.register
def _(step: KGRound) -> list[str]:
    lines = [
        f"kg round {step.number}: {', '.join(step.entities)} ({step.candidates} candidate triples)"
    ]
    lines += [f"  selected {triple}" for triple in step.selected]
    lines += [f"  unmatched {text}" for text in step.unmatched]
    if step.repeated:
        lines.append(f"  {step.repeated} selected again")
    if step.next_entities:
        lines.append(f"  next: {', '.join(step.next_entities)}")
    return lines


@step_lines.register
def _(step: TurnAnswer) -> list[str]:
    refs = f"{step.references} references" if step.references else "no references"
    return [f"turn {step.turn} answer ({refs}): {_flat(step.answer)}"]


@step_lines.register
def _(step: ConfidenceCheck) -> list[str]:
    score = "unscorable" if step.score is None else f"{step.score:.4g}"
    verdict = "accepted" if step.accepted else "not accepted"
    lines = [
        f"kge check, turn {step.turn}: score {score} vs threshold {step.threshold:.4g}: {verdict}"
    ]
    lines += _triple_lines(step.triples, "  ")
    lines += _extraction_lines(step.dropped, step.parse_notes, "  ")
    return lines


@step_lines.register
def _(step: KAGPlan) -> list[str]:
    lines = [f"kag plan, round {step.round}: {_flat(step.query)}"]
    lines += [f"  {_flat(q)} :: {lf}" for q, lf in step.steps]
    if step.error:
        lines.append(f"  plan errors: {step.error}")
    return lines


@step_lines.register
def _(step: KAGStep) -> list[str]:
    lines = [
        f"step {step.round}.{step.index} [{step.executor}, {step.layer}]: {step.logical_form}",
        f"  {_flat(step.question)} -> {_flat(step.answer, CONTEXT_CHARS)}",
    ]
    if step.bound:
        lines.append(f"  bound: {', '.join(step.bound)}")
    lines += [f"  error: {step.error}"] if step.error else []
    lines += [f"  note: {step.note}"] if step.note else []
    return lines


@step_lines.register
def _(step: KAGTally) -> list[str]:
    return [
        f"kag: {step.graph_answered} of {step.retrieval_steps} retrieval steps answered from "
        f"the graph, {step.graph_hits} matched it ({step.steps} steps run)"
    ]


@step_lines.register
def _(step: RelatedEntities) -> list[str]:
    lines = [f"related entities for {step.query!r}: {', '.join(step.entities) or '(none)'}"]
    lines += [f"  fact: {fact}" for fact in step.facts]
    return lines


@step_lines.register
def _(step: ReferenceFilter) -> list[str]:
    total = len(step.candidates)
    lines = [f"references, turn {step.turn}: kept {step.kept} of {total} for {step.query!r}"]
    for c in step.candidates:
        mark = "kept" if c["kept"] else "relevant" if c["relevant"] else "irrelevant"
        score = "-" if c["score"] is None else f"{c['score']:.4g}"
        text = c.get("error") or _flat(c["text"], 120)
        lines.append(f"  [{mark}, score {score}] {c['source']} ({c['query']}): {text}")
        lines += _triple_lines(c["triples"], "    ")
        lines += _extraction_lines(c.get("dropped", ()), c.get("parse_notes", ()), "    ")
    return lines


def _triple_lines(triples: Iterable[dict[str, Any]], indent: str) -> list[str]:
    """Each extracted triple, the KG triple it was read as (or why none), its score,
    and how its ends and predicate were linked."""
    lines = []
    for t in triples:
        subject, predicate, obj = t["triple"]
        reading = t["linked"] or t["note"]
        shown = "-" if t["score"] is None else f"{t['score']:.4g}"
        lines.append(f"{indent}({subject} | {predicate} | {obj}) as {reading}: {shown}")
        if "subject_link" not in t:  # a record written before links were traced
            continue
        links = [f"{end} by {_link_text(t.get(f'{end}_link'))}" for end in ("subject", "object")]
        if t.get("relation_match"):
            links.append(f"predicate by {t['relation_match']}")
        lines.append(f"{indent}  linked: {', '.join(links)}")
    return lines


def _link_text(link: dict[str, Any] | None) -> str:
    if not link:
        return "nothing"
    score = "" if link.get("score") is None else f" {link['score']:.3g}"
    return f"{link['how']}{score}"


def _extraction_lines(dropped: Iterable[str], notes: Iterable[str], indent: str) -> list[str]:
    """The extracted items dropped before linking, and how the list was read."""
    return [f"{indent}dropped: {d}" for d in dropped] + [f"{indent}parse: {n}" for n in notes]


@step_lines.register
def _(step: KAGReflection) -> list[str]:
    verdict = "memory answers the question" if step.can_answer else "memory does not answer"
    lines = [f"kag round {step.round}: {verdict}"]
    if step.next_query:
        lines.append(f"  next query: {step.next_query}")
    if step.ended:
        lines.append(f"  no further round: {step.ended}")
    return lines
