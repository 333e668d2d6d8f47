"""What makes a document unstorable, found before anything is written: text that is
not Unicode a store can hold.

A JSON string may escape a lone UTF-16 surrogate (``"\\ud800"``) that no UTF-8 text,
and so no store, can hold; such a document is refused on its own with a message that
names the field and the position. Every other code point (line and paragraph
separators, control characters, NUL, astral characters) is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from quillian.types import Document

__all__ = ["document_problem", "unpaired_surrogate"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def unpaired_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate code point in ``text``, or None.

    (A pair written as two JSON escapes decodes to one astral character, so any
    surrogate left in a Python string is unpaired.)"""
    found = _SURROGATE.search(text)
    return found.start() if found is not None else None


def document_problem(document: Document) -> str | None:
    """Why ``document`` cannot be stored, in one line, or None when it can."""
    for name, value in _strings(document):
        at = unpaired_surrogate(value)
        if at is not None:
            code = f"U+{ord(value[at]):04X}"
            return (
                f"{name} holds an unpaired surrogate ({code} at character {at}), which is "
                "not Unicode text; send the character it stands for, or drop it"
            )
    return None


def _strings(document: Document) -> Iterator[tuple[str, str]]:
    yield "text", document.text
    yield "title", document.title
    yield "source", document.source
    yield from _nested("metadata", document.metadata)


def _nested(name: str, value: Any) -> Iterator[tuple[str, str]]:
    """Every string in ``value`` (keys too), all named ``name``: a message quoting a
    key could carry the very surrogate it reports."""
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _nested(name, str(key))
            yield from _nested(name, item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _nested(name, item)
