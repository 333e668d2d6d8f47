"""Typed parsing of LLM output: LLM output is untrusted input.

JSON is accepted inside a fenced code block or surrounded by prose; it is decoded with
``json.loads`` and validated by a pydantic model. Nothing is ever ``eval``-ed. A
failure raises :class:`ParseError`, which carries the raw text for the record.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from quillian.components.llm.base import Decoding
from quillian.errors import QuillianError

__all__ = [
    "SHORT_ANSWER",
    "ParseError",
    "Refusal",
    "extract_json",
    "held_to",
    "json_schema_of",
    "parse_json_as",
]

M = TypeVar("M", bound=BaseModel)

#: ``json_schema_extra`` of a field that holds a short answer (a name, a date, a yes or
#: no, a short phrase: what the answer prompts ask for): at most 120 characters, about
#: twenty words, in a reply held to its schema. The field's cap is set aside from the
#: reply's budget, so the fields that reason get the rest (:func:`json_schema_of`).
#: Parsing does not enforce it: a free reply's longer answer is still read.
SHORT_ANSWER: dict[str, Any] = {"maxLength": 120}

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


class ParseError(QuillianError, ValueError):
    """Model output could not be parsed; ``raw`` is what the model said."""

    def __init__(self, message: str, raw: str, prompt: str = "") -> None:
        where = f"{prompt}: " if prompt else ""
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        super().__init__(f"{where}{message}; raw output: {shown!r}")
        self.raw = raw
        self.prompt = prompt


class Refusal(ParseError):
    """A reply that parses but is refused for what it says (a bare "yes" to a question
    that asks for a name, an answer copied from the prompt's examples). The task runner
    asks again from the original prompt with ``hint`` added to its last turn, without
    showing the refused reply: shown it, the local 0.5B model repeated it or echoed the
    repair (18 of 18 refused "yes" answers under SA-RAG, MuSiQue and HotpotQA, came
    back unchanged); asked afresh, it named a place, a date or a person for 16 of 18."""

    def __init__(self, message: str, raw: str, hint: str, prompt: str = "") -> None:
        super().__init__(message, raw, prompt)
        self.hint = hint


def _balanced(text: str, start: int) -> str | None:
    """The JSON object or array starting at ``text[start]``, by bracket matching
    outside strings; None when it never closes (for example, cut off by a token limit)."""
    opening = text[start]
    closing = "}" if opening == "{" else "]"
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1] if ch == closing else None
    return None


def extract_json(raw: str, prompt: str = "") -> Any:
    """The first JSON value in ``raw``: a fenced block first, else the first object or
    array in the prose that decodes. Raises :class:`ParseError` when there is none."""
    if not raw.strip():
        raise ParseError("empty model output", raw, prompt)
    candidates = [m.group(1) for m in _FENCE.finditer(raw)]
    candidates += [
        block for i, ch in enumerate(raw) if ch in "{[" and (block := _balanced(raw, i)) is not None
    ]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ParseError("no JSON object or array found", raw, prompt)


def parse_json_as(raw: str, model: type[M], prompt: str = "") -> M:
    """Decode the JSON in ``raw`` and validate it as ``model``."""
    data = extract_json(raw, prompt)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ParseError(f"JSON does not match {model.__name__} ({problems})", raw, prompt) from exc


def json_schema_of(shape: Any, max_chars: int | None = None) -> str:
    """The JSON schema (as text) of the reply a parser reads as ``shape`` (a pydantic
    model, or a type such as ``list[Model]``), for
    :attr:`~quillian.components.llm.base.Decoding.json_schema`: pydantic's schema with
    every field of every object required, in the model's field order (so a reasoning
    field comes before the answer), and no other fields; ``max_chars`` is what the
    string fields of each object may write together: a field with its own cap (a short
    answer, :data:`SHORT_ANSWER`) keeps it, and the rest is shared out evenly between
    the others, so that a model held to the schema closes a long field and still writes
    the ones after it within its token limit. Parsing stays the parser's, lenient where
    it is (a free reply may still leave out a field with a default)."""
    schema = TypeAdapter(shape).json_schema()
    for node in [schema, *schema.get("$defs", {}).values()]:
        properties = node.get("properties")
        if isinstance(properties, dict):
            node["required"] = list(properties)
            node["additionalProperties"] = False
            texts = [f for f in properties.values() if f.get("type") == "string"]
            uncapped = [f for f in texts if "maxLength" not in f]
            if max_chars and uncapped:
                capped = sum(int(f["maxLength"]) for f in texts if "maxLength" in f)
                share = max(1, (max_chars - capped) // len(uncapped))
                for field in uncapped:
                    field["maxLength"] = share
    return json.dumps(schema, separators=(",", ":"))


def held_to(shape: Any, max_tokens: int) -> Decoding:
    """The decoding of a task that reads ``shape`` from JSON: at most ``max_tokens``,
    held to :func:`json_schema_of` ``shape``, the text fields of an object sharing two
    characters per token (English runs about four characters a token, so half the
    budget), so that a long reasoning field is closed early rather than cut off by the
    token limit with the answer still unwritten (docs/benchmarks.md, "Replies held to
    their schema")."""
    return Decoding(max_tokens=max_tokens, json_schema=json_schema_of(shape, 2 * max_tokens))
