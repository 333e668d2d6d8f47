"""Typed parsing of LLM output: LLM output is untrusted input.

JSON is accepted inside a fenced code block or surrounded by prose; it is decoded with
``json.loads`` and validated by a pydantic model. Nothing is ever ``eval``-ed. A
failure raises :class:`ParseError`, which carries the raw text for the record.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from quillian.errors import QuillianError

__all__ = ["ParseError", "extract_json", "parse_json_as"]

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


class ParseError(QuillianError, ValueError):
    """Model output could not be parsed; ``raw`` is what the model said."""

    def __init__(self, message: str, raw: str, prompt: str = "") -> None:
        where = f"{prompt}: " if prompt else ""
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        super().__init__(f"{where}{message}; raw output: {shown!r}")
        self.raw = raw
        self.prompt = prompt


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
