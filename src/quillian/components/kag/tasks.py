"""KAG's LLM steps as typed tasks with strict parsers (prompts in
:mod:`quillian.components.prompts.kag`).

Every parser raises :class:`ParseError` with the raw text on anything it cannot use;
the runner asks once more, then records the failure. The planner's fallback keeps a
plan whose errors are recorded per step, so a bad step is reported, never executed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from quillian.components.generation.outputs import parse_line, parse_question, parse_text
from quillian.components.kag.logic_form import Plan, first_repeat, parse_plan, parse_plan_strict
from quillian.components.llm.base import Decoding
from quillian.components.llm.stops import register_stop
from quillian.components.llm.structured import (
    SHORT_ANSWER,
    ParseError,
    extract_json,
    held_to,
    parse_json_as,
)
from quillian.components.llm.tasks import Task

__all__ = [
    "ANSWER",
    "CONCEPTS",
    "DEDUCE",
    "IDK",
    "JUDGE",
    "MEMORY",
    "NER",
    "OUTPUT",
    "PLAN",
    "QUERY_NER",
    "REWRITE",
    "SPO_SELECT",
    "STD",
    "SUB_ANSWER",
    "TRIPLES",
    "FinalAnswer",
    "NerEntity",
    "OfficialName",
    "is_unknown",
    "salvage_answer",
]

IDK = "I don't know"
_IDK = re.compile(r"i don'?t know|unknown|no relevant information|insufficient", re.IGNORECASE)


def is_unknown(text: str) -> bool:
    """An answer that says it has none ("I don't know", "UNKNOWN", ...)."""
    return not text.strip() or bool(_IDK.search(text))


class NerEntity(BaseModel):
    name: str = Field(min_length=1)
    category: str = Field(min_length=1)
    type: str = ""
    description: str = ""


class OfficialName(BaseModel):
    name: str = Field(min_length=1)
    category: str = ""
    official_name: str = Field(min_length=1)


class _Triples(BaseModel):
    triples: list[list[str]]


class FinalAnswer(BaseModel):
    thought: str = ""
    answer: str = Field(json_schema_extra=SHORT_ANSWER)


def _list_of(model: type[BaseModel], raw: str, prompt: str) -> list[Any]:
    data = extract_json(raw, prompt)
    if isinstance(data, dict):  # {"output": [...]} / {"entities": [...]}
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else data
    if not isinstance(data, list):
        raise ParseError("expected a JSON list", raw, prompt)
    try:
        return [model.model_validate(item) for item in data]
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "<item>"
        raise ParseError(f"{where}: {problem['msg']}", raw, prompt) from exc


def parse_ner(raw: str) -> list[NerEntity]:
    return _list_of(NerEntity, raw, "kag.ner")


class Mention(BaseModel):
    name: str = Field(min_length=1)
    category: str = ""


def parse_query_ner(raw: str) -> list[str]:
    """The names of a question's entities (a JSON list of ``{name, category}``)."""
    return [m.name.strip() for m in _list_of(Mention, raw, "kag.query_ner")]


def parse_std(raw: str) -> list[OfficialName]:
    return _list_of(OfficialName, raw, "kag.std")


def parse_triples(raw: str) -> list[tuple[str, str, str]]:
    """``{"triples": [[s, p, o], ...]}`` (a bare list too); a triple that is not three
    non-empty strings is an error."""
    data = extract_json(raw, "kag.triples")
    rows = data if isinstance(data, list) else parse_json_as(raw, _Triples, "kag.triples").triples
    out: list[tuple[str, str, str]] = []
    for i, row in enumerate(rows):
        if (
            not isinstance(row, list)
            or len(row) != 3
            or not all(isinstance(x, str) and x.strip() for x in row)
        ):
            raise ParseError(
                f"triple {i} is not three non-empty strings: {row!r}", raw, "kag.triples"
            )
        out.append((row[0].strip(), row[1].strip(), row[2].strip()))
    return out


def parse_concepts(raw: str) -> dict[str, list[str]]:
    data = extract_json(raw, "kag.concepts")
    if not isinstance(data, dict):
        raise ParseError("expected a JSON object of type -> chain", raw, "kag.concepts")
    out: dict[str, list[str]] = {}
    for key, chain in data.items():
        if not isinstance(chain, list) or not all(isinstance(c, str) and c.strip() for c in chain):
            raise ParseError(f"the chain of {key!r} is not a list of names", raw, "kag.concepts")
        out[str(key)] = [c.strip() for c in chain]
    return out


def parse_selection(raw: str) -> list[int]:
    """A JSON list of candidate numbers (numbers or numeric strings)."""
    data = extract_json(raw, "kag.spo_select")
    if not isinstance(data, list):
        raise ParseError("expected a JSON list of candidate numbers", raw, "kag.spo_select")
    out = []
    for item in data:
        try:
            out.append(int(str(item).strip()))
        except ValueError:
            raise ParseError(f"{item!r} is not a candidate number", raw, "kag.spo_select") from None
    return out


def parse_judge(raw: str) -> bool:
    head = raw.strip().lstrip("*#[ ").lower()
    if head.startswith("yes"):
        return True
    if head.startswith("no"):
        return False
    raise ParseError("expected Yes or No first", raw, "kag.judge")


def parse_memory(raw: str) -> str:
    return parse_text(raw.replace("[DONE]", ""), "kag.memory")


def parse_sub_answer(raw: str) -> str:
    text = parse_text(raw, "kag.sub_answer")
    return text.rsplit("Answer:", 1)[-1].strip() or text


def parse_final(raw: str) -> FinalAnswer:
    answer = parse_json_as(raw, FinalAnswer, "kag.answer")
    if not answer.answer.strip():
        raise ParseError("'answer' is empty", raw, "kag.answer")
    return answer


def _fallback_plan(raw: str) -> Plan:
    return parse_plan(raw)


_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"')


def salvage_answer(raw: str) -> FinalAnswer:
    """The ``answer`` string of a broken or cut-off JSON reply (the string literal
    alone decoded with ``json.loads``, never evaluated); empty when there is none. The
    failed parse stays in the transcript."""
    match = _ANSWER_FIELD.search(raw)
    if match is not None:
        try:
            value = json.loads(f'"{match.group(1)}"')
        except json.JSONDecodeError:
            value = ""
        if isinstance(value, str):
            return FinalAnswer(answer=value.strip() or "UNKNOWN")
    return FinalAnswer(answer="UNKNOWN")


NER: Task[list[NerEntity]] = Task("kag.ner", parse_ner, held_to(list[NerEntity], 1024))
# An unusable reply leaves the question's own name links (the failure stays recorded).
QUERY_NER: Task[list[str]] = Task(
    "kag.query_ner", parse_query_ner, held_to(list[Mention], 256), fallback=lambda raw: []
)
TRIPLES: Task[list[tuple[str, str, str]]] = Task(
    "kag.triples", parse_triples, held_to(_Triples, 1024)
)
STD: Task[list[OfficialName]] = Task("kag.std", parse_std, held_to(list[OfficialName], 1024))
CONCEPTS: Task[dict[str, list[str]]] = Task(
    "kag.concepts", parse_concepts, held_to(dict[str, list[str]], 1024)
)
#: A plan ends before its first step that repeats an earlier one (the local model stops
#: decoding there).
PLAN_STOP = "kag.plan.first_repeat"
register_stop(PLAN_STOP, first_repeat)
PLAN: Task[Plan] = Task(
    "kag.plan",
    parse_plan_strict,
    Decoding(max_tokens=512, stop=PLAN_STOP),
    fallback=_fallback_plan,
    repair="Your plan could not be used: {error}. Write the plan again: 'StepN: "
    "sub-question' and 'ActionN: logical form' lines only, with the operators listed.",
)
# The solver's steps fall back to "no answer" when the output stays unusable after the
# repair attempt (the failure stays in the transcript): one bad reply costs a step, not
# the question.
SPO_SELECT: Task[list[int]] = Task(
    "kag.spo_select", parse_selection, held_to(list[int], 64), fallback=lambda raw: []
)
SUB_ANSWER: Task[str] = Task(
    "kag.sub_answer", parse_sub_answer, Decoding(max_tokens=128), fallback=lambda raw: IDK
)
DEDUCE: Task[str] = Task(
    "kag.deduce",
    lambda raw: parse_text(raw, "kag.deduce"),
    Decoding(max_tokens=192),
    fallback=lambda raw: "No relevant information",
)
OUTPUT: Task[str] = Task(
    "kag.output",
    lambda raw: parse_line(raw, "kag.output"),
    Decoding(max_tokens=64),
    fallback=lambda raw: IDK,
)
MEMORY: Task[str] = Task(
    "kag.memory", parse_memory, Decoding(max_tokens=256), fallback=lambda raw: ""
)
#: The judge's reply as its prompt asks for it: Yes or No first, then at most a
#: one-line reason (a model that can be held to it is; the parser reads either way).
JUDGE_GRAMMAR = (
    'start: VERDICT REASON?\nVERDICT: "Yes" | "No"\nREASON: /[.,:;]?( [^\\n]{1,200})?/\n'
)
JUDGE: Task[bool] = Task(
    "kag.judge",
    parse_judge,
    Decoding(max_tokens=48, grammar=JUDGE_GRAMMAR),
    fallback=lambda raw: False,
)
#: The question still missing; "" (and the loop ends) when the reply, asked twice, is
#: not a question (:func:`~quillian.components.generation.outputs.parse_question`).
REWRITE: Task[str] = Task(
    "kag.rewrite",
    lambda raw: parse_question(raw, "kag.rewrite"),
    Decoding(max_tokens=64),
    fallback=lambda raw: "",
)
ANSWER: Task[FinalAnswer] = Task(
    "kag.answer", parse_final, held_to(FinalAnswer, 256), fallback=salvage_answer
)
