"""KAGS's extraction task: 4-tuples ``[head, relationship, tail, source sentence]``
per chunk, with a strict parser (see :mod:`quillian.components.prompts.kags`).

The reply holds one JSON array per line (a single JSON array of arrays is read too).
A line that is meant as a tuple (it starts with ``[``) but is not exactly four
non-empty strings is *rejected*: kept with its reason in :attr:`QuadReply.rejected`,
never repaired by guessing. The header row ``["head", "relationship", "tail",
"sentences"]`` is dropped, and so are repeated tuples (counted). A reply with no usable
tuple and something else in it (prose, only malformed lines) raises
:class:`~quillian.components.llm.structured.ParseError`, which the task runner answers
with one repair request; ``[]`` alone means the chunk states no fact.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from quillian.components.llm.base import Decoding
from quillian.components.llm.structured import ParseError
from quillian.components.llm.tasks import Task

__all__ = ["EXTRACT_QUADS", "Quad", "QuadReply", "parse_quads"]

Quad = tuple[str, str, str, str]

_FENCE = re.compile(r"^```[a-zA-Z]*\s*$")
_HEADER = ("head", "relationship", "tail", "sentences")


@dataclass(frozen=True)
class QuadReply:
    """The tuples of one reply, the lines rejected (with why) and the repeats dropped."""

    quads: list[Quad] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    duplicates: int = 0


def _squash(text: str) -> str:
    return " ".join(text.split())


def _check(item: object) -> Quad | str:
    """``item`` as a 4-tuple of stripped strings, or why it is not one."""
    if not isinstance(item, list):
        return "not a JSON array"
    if len(item) != 4:
        return f"{len(item)} elements, not 4"
    if not all(isinstance(x, str) for x in item):
        return "an element is not a string"
    quad = tuple(_squash(x) for x in item)
    if not all(quad):
        return "an element is empty"
    return (quad[0], quad[1], quad[2], quad[3])


def _items(raw: str) -> list[tuple[str, object | None]]:
    """Each candidate line with its decoded JSON (None when it does not decode)."""
    text = "\n".join(line for line in raw.splitlines() if not _FENCE.match(line.strip()))
    stripped = text.strip()
    if stripped.startswith("[["):  # one array of arrays, possibly over several lines
        try:
            whole = json.loads(stripped)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, list):
            return [(json.dumps(x), x) for x in whole]
    out: list[tuple[str, object | None]] = []
    for line in text.splitlines():
        line = line.strip().rstrip(",")
        if not line.startswith("["):
            if line:
                out.append((line, None))
            continue
        try:
            out.append((line, json.loads(line)))
        except json.JSONDecodeError:
            out.append((line, None))
    return out


def parse_quads(raw: str, prompt: str = "") -> QuadReply:
    """The 4-tuples of a reply (see the module docs); raises :class:`ParseError` when
    the reply holds no usable tuple and is not ``[]``."""
    if not raw.strip():
        raise ParseError("empty model output", raw, prompt)
    reply = QuadReply()
    seen: set[Quad] = set()
    prose = 0
    duplicates = 0
    for line, value in _items(raw):
        if value == []:
            continue
        if value is None:
            if line.startswith("["):
                reply.rejected.append((line, "not valid JSON"))
            else:
                prose += 1
            continue
        quad = _check(value)
        if isinstance(quad, str):
            reply.rejected.append((line, quad))
        elif tuple(x.lower() for x in quad) == _HEADER:
            continue
        elif quad in seen:
            duplicates += 1
        else:
            seen.add(quad)
            reply.quads.append(quad)
    if not reply.quads and (prose or reply.rejected):
        reasons = "; ".join(sorted({why for _, why in reply.rejected})) or "no tuple lines"
        raise ParseError(
            f"no usable [head, relationship, tail, sentences] line ({reasons})", raw, prompt
        )
    return QuadReply(reply.quads, reply.rejected, duplicates)


#: KAGS 4-tuple extraction (the authors used ``max_new_tokens`` 2048, greedy).
EXTRACT_QUADS: Task[QuadReply] = Task("kags.extract", parse_quads, Decoding(max_tokens=2048))
