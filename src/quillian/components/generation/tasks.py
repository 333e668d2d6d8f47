"""The LLM steps of the pipelines, as typed tasks over the papers' prompts.

Token limits are generous for what each prompt asks (a short answer, a note, a JSON
object with reasoning) and small enough that a rambling model is cut off, which is
then recorded as a truncated call. A task that reads JSON carries its reply's schema
(``Decoding.json_schema``), so a backend that can hold the model to it does.
"""

from __future__ import annotations

from typing import TypeVar

from quillian.components.generation.outputs import (
    Decomposition,
    ReasonedAnswer,
    ReasoningStep,
    SelfAskStep,
    parse_decomposition,
    parse_line,
    parse_reasoned_answer,
    parse_reasoning_step,
    parse_self_ask,
    parse_text,
    salvage_final_answer,
)
from quillian.components.generation.polar import refusing_yes_or_no
from quillian.components.llm.base import Decoding
from quillian.components.llm.structured import held_to
from quillian.components.llm.tasks import Task

__all__ = [
    "ANSWER_BASELINE",
    "ANSWER_CLOSED",
    "ANSWER_PASSAGES",
    "ANSWER_SA",
    "DECOMPOSE",
    "EXPAND_QUERY",
    "PASSAGE_NOTE",
    "REASON_COT",
    "REASON_SA",
    "SELF_ASK",
    "final_answer",
    "for_question",
]

SHORT = Decoding(max_tokens=48)
NOTE = Decoding(max_tokens=320)


JSON_ANSWER = held_to(ReasonedAnswer, 384)
JSON_STEP = held_to(ReasoningStep, 448)
JSON_PLAN = held_to(Decomposition, 384)


def _repair(example: str) -> str:
    return (
        "Your reply could not be used: {error}. Reply again with only a JSON object of "
        "this form and nothing else: " + example
    )


ANSWER_REPAIR = _repair('{"reasoning": "...", "final_answer": "..."}')
STEP_REPAIR = _repair(
    '{"provided_context": "...", "answer_possible": true, "final_answer": "...", '
    '"additional_question": ""}'
)
PLAN_REPAIR = _repair(
    '{"original_question": "...", "subquestions": [{"id": 1, "question": "..."}]}'
)


def _salvaged(raw: str) -> ReasonedAnswer:
    return ReasonedAnswer(final_answer=salvage_final_answer(raw))


def _no_step(raw: str) -> ReasoningStep:
    """After two unusable replies the loop stops and answers from what it has."""
    return ReasoningStep(answer_possible=False)


#: KG-Infused RAG Table 9: answer without retrieval.
ANSWER_CLOSED: Task[str] = Task("kg-infused.answer-closed", parse_line, SHORT)
#: KG-Infused RAG Table 10: answer from passages (or notes on them).
ANSWER_PASSAGES: Task[str] = Task("kg-infused.answer", parse_line, SHORT)
#: KG-Infused RAG Table 11: vanilla query expansion.
EXPAND_QUERY: Task[str] = Task("kg-infused.query-expansion", parse_line, SHORT)
#: KG-Infused RAG Table 12: passage note.
PASSAGE_NOTE: Task[str] = Task("kg-infused.passage-note", parse_text, NOTE)
#: SA-RAG Listing 1: the baselines' JSON answer.
ANSWER_BASELINE: Task[ReasonedAnswer] = Task(
    "sa-rag.baseline-answer", parse_reasoned_answer, JSON_ANSWER, _salvaged, ANSWER_REPAIR
)
#: SA-RAG Listing 6: SA-RAG's JSON answer.
ANSWER_SA: Task[ReasonedAnswer] = Task(
    "sa-rag.answer", parse_reasoned_answer, JSON_ANSWER, _salvaged, ANSWER_REPAIR
)
#: SA-RAG Listing 2: one CoT reasoning step over passages and the memory.
REASON_COT: Task[ReasoningStep] = Task(
    "sa-rag.cot", parse_reasoning_step, JSON_STEP, _no_step, STEP_REPAIR
)
#: SA-RAG Listing 7: one reasoning step over passages, relations and the memory.
REASON_SA: Task[ReasoningStep] = Task(
    "sa-rag.reason", parse_reasoning_step, JSON_STEP, _no_step, STEP_REPAIR
)
#: SA-RAG Listing 3: query decomposition.
DECOMPOSE: Task[Decomposition] = Task(
    "sa-rag.decompose", parse_decomposition, JSON_PLAN, repair=PLAN_REPAIR
)
#: KG-Infused RAG Table 19: Self-Ask continuation.
SELF_ASK: Task[SelfAskStep] = Task("kg-infused.self-ask", parse_self_ask, Decoding(max_tokens=96))


A = TypeVar("A", ReasonedAnswer, ReasoningStep)


def final_answer(value: ReasonedAnswer | ReasoningStep) -> str:
    """The answer a JSON reply gives: a reasoning step's only when it says one is
    possible."""
    if isinstance(value, ReasoningStep):
        return value.final_answer if value.answer_possible else ""
    return value.final_answer


def for_question(task: Task[A], question: str, open_answers: bool = True) -> Task[A]:
    """An answering or reasoning task for ``question``: with ``open_answers``, a bare yes
    or no to a question that does not ask one is refused and repaired
    (:func:`~quillian.components.generation.polar.refusing_yes_or_no`)."""
    return refusing_yes_or_no(task, question, final_answer) if open_answers else task
