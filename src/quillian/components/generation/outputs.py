"""Pure parsers for what the papers' prompts ask the model to produce.

Each raises :class:`~quillian.components.llm.structured.ParseError` (holding the raw
text) on output it cannot read. ``salvage_*`` functions are the documented fallbacks a
task may use after its repair attempt also failed; the failure is recorded either way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quillian.components.extraction.text import first_sentence
from quillian.components.generation.polar import POLAR_OPENERS
from quillian.components.llm.structured import (
    SHORT_ANSWER,
    ParseError,
    Refusal,
    extract_json,
    parse_json_as,
)

__all__ = [
    "QUESTION_HINT",
    "Decomposition",
    "ReasonedAnswer",
    "ReasoningStep",
    "SelfAskStep",
    "is_question",
    "parse_decomposition",
    "parse_line",
    "parse_question",
    "parse_reasoned_answer",
    "parse_reasoning_step",
    "parse_self_ask",
    "parse_text",
    "salvage_final_answer",
]


class _Lenient(BaseModel):
    """Numbers where a string is asked for are taken as strings ("1987")."""

    model_config = ConfigDict(coerce_numbers_to_str=True, extra="ignore")


class ReasonedAnswer(_Lenient):
    """SA-RAG Listings 1 and 6: ``reasoning`` and a short ``final_answer``."""

    reasoning: str = ""
    final_answer: str = Field(json_schema_extra=SHORT_ANSWER)


class ReasoningStep(_Lenient):
    """SA-RAG Listings 2 and 7: a summary, whether the answer is possible, and either
    the answer or a follow-up question."""

    provided_context: str = ""
    answer_possible: bool
    final_answer: str = Field(default="", json_schema_extra=SHORT_ANSWER)
    additional_question: str = ""

    @field_validator("final_answer", "additional_question", "provided_context", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class SubQuestion(_Lenient):
    id: int | None = None
    question: str


class Decomposition(_Lenient):
    """SA-RAG Listing 3: the original question and its ordered sub-questions."""

    original_question: str = ""
    subquestions: list[SubQuestion] = Field(min_length=1)

    @field_validator("subquestions", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"question": v} if isinstance(v, str) else v for v in value]
        return value


def parse_text(raw: str, prompt: str = "") -> str:
    """Free text (a passage note, a summary): non-empty after stripping."""
    text = raw.strip()
    if not text:
        raise ParseError("empty model output", raw, prompt)
    return text


_LABEL = re.compile(r"^\s*(?:answer|final answer|new query|query)\s*:\s*", re.IGNORECASE)


def parse_line(raw: str, prompt: str = "") -> str:
    """A short answer or query: the first non-empty line, without a leading label
    ("Answer:") or surrounding quotes."""
    for line in raw.splitlines():
        text = _LABEL.sub("", line).strip().strip('"').strip()
        if text:
            return text
    raise ParseError("empty model output", raw, prompt)


#: Words that open an English question: the interrogatives, and the auxiliary verbs that
#: open a yes/no question (:data:`~quillian.components.generation.polar.POLAR_OPENERS`).
_QUESTION_OPENERS = POLAR_OPENERS | {
    "who", "whom", "whose", "what", "which", "when", "where", "why", "how",
}  # fmt: skip
#: A preposition may come first: "In which country ...", "For what ...".
_QUESTION_START = re.compile(
    r"(?:(?:in|on|at|for|from|to|by|of|with|during|after|before|since|under)\s+)?([^\W\d_]+)",
    re.IGNORECASE,
)
#: Added to the prompt when a reply that should be a question is refused.
QUESTION_HINT = "Reply with the question itself, ending with a question mark, not with an answer."


def is_question(text: str) -> bool:
    """Whether ``text`` reads as a question: it ends with a question mark, or its first
    word (after a preposition) is an interrogative or an auxiliary verb."""
    text = text.strip()
    if text.endswith("?"):
        return True
    first = _QUESTION_START.match(text)
    return first is not None and first.group(1).lower() in _QUESTION_OPENERS


def parse_question(raw: str, prompt: str = "") -> str:
    """A reply that must be a question (a query to look up next): the first non-empty
    line (:func:`parse_line`), refused when it is a statement or a bare name instead
    (a :class:`~quillian.components.llm.structured.Refusal` with
    :data:`QUESTION_HINT`: the model is asked again afresh). Asked for the question
    still missing, the local 0.5B model wrote a name ("Notre Dame"), a memory line
    ("[Evidence 2] The plane dropped the bomb on Hiroshima, Japan.") or its guess at
    the answer for 15 of its 26 rewrites on the first 25 MuSiQue questions under LFSH
    (docs/sections/kag-rewrite.md)."""
    line = parse_line(raw, prompt)
    if not is_question(line):
        raise Refusal(f"not a question: {line[:80]!r}", raw, QUESTION_HINT, prompt)
    return line


def parse_reasoned_answer(raw: str, prompt: str = "") -> ReasonedAnswer:
    answer = parse_json_as(raw, ReasonedAnswer, prompt)
    if not answer.final_answer.strip():
        raise ParseError("'final_answer' is empty", raw, prompt)
    return answer


def parse_reasoning_step(raw: str, prompt: str = "") -> ReasoningStep:
    step = parse_json_as(raw, ReasoningStep, prompt)
    if step.answer_possible and not step.final_answer.strip():
        raise ParseError("'answer_possible' is true but 'final_answer' is empty", raw, prompt)
    if not step.answer_possible and not step.additional_question.strip():
        raise ParseError(
            "'answer_possible' is false but 'additional_question' is empty", raw, prompt
        )
    return step


def parse_decomposition(raw: str, prompt: str = "") -> Decomposition:
    data = extract_json(raw, prompt)
    if isinstance(data, list):  # a bare list of sub-questions
        data = {"subquestions": data}
    return parse_json_as(json.dumps(data), Decomposition, prompt)


_FIELD = re.compile(r'"final_answer"\s*:\s*"((?:[^"\\]|\\.)*)"')
_LINE = re.compile(r'^\s*"?final[_ ]answer"?\s*[:=]\s*(.+?)\s*$', re.IGNORECASE | re.MULTILINE)


def salvage_final_answer(raw: str) -> str:
    """The final answer of a reply that failed to parse as a whole: the ``final_answer``
    string of a cut-off or broken JSON object (decoded with ``json.loads`` of the string
    literal alone, never evaluated), else a ``final_answer: ...`` line, which small
    models write instead of JSON; "" when there is neither."""
    match = _FIELD.search(raw)
    if match is not None:
        try:
            value = json.loads(f'"{match.group(1)}"')
        except json.JSONDecodeError:
            value = ""
        if isinstance(value, str) and value.strip():
            return value.strip()
    line = _LINE.search(raw)
    if line is None:
        return ""
    return line.group(1).strip().rstrip(",").strip().strip('"').strip()


class SelfAskStep(BaseModel):
    """One continuation of a Self-Ask trace: a follow-up question or the final answer."""

    follow_up: str = ""
    final_answer: str = ""


_FOLLOW = re.compile(r"^\s*Follow up\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_FINAL = re.compile(r"^\s*So the final answer is\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def parse_self_ask(raw: str, prompt: str = "") -> SelfAskStep:
    """The first ``Follow up:`` question or ``So the final answer is:`` line, whichever
    comes first; whatever the model wrote after it (an invented intermediate answer) is
    ignored, since the pipeline answers follow-ups from retrieval. The final answer is
    the line's first sentence: what runs on after it on the same line is not the
    answer (:func:`~quillian.components.extraction.text.first_sentence`)."""
    follow, final = _FOLLOW.search(raw), _FINAL.search(raw)
    if final and (follow is None or final.start() < follow.start()):
        answer = first_sentence(final.group(1)).rstrip(".").strip()
        return SelfAskStep(final_answer=answer)
    if follow:
        return SelfAskStep(follow_up=follow.group(1).strip())
    raise ParseError("neither 'Follow up:' nor 'So the final answer is:' found", raw, prompt)
