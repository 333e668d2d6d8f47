"""Read precomputed LLM extractions (OpenIE JSONL) with a report of every problem.

One JSON object per line: ``{"title": str, "text": str, "entities": [str],
"triples": [[subject, predicate, object], ...]}``, as HippoRAG saves GPT-3.5 OpenIE
output. Real files hold imperfect items (2- or 4-element triples, numbers, empty
strings); each is repaired or skipped and recorded with its line number, never
dropped silently, and one bad line never stops the import.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian.errors import InputError

__all__ = ["ImportIssue", "ImportReport", "OpenIERecord", "read_records"]

_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True, slots=True)
class ImportIssue:
    """One problem in the input: where it is, what it is and what was done about it.

    ``action`` is ``"skipped"`` (the line or item was not used) or ``"repaired"`` (it
    was used after a fix, named in ``message``).
    """

    line: int
    field: str
    message: str
    action: str


@dataclass
class ImportReport:
    """What an import read, and every problem found in the file or while matching chunks.

    Chunk counts cover every ``extract`` call so far, each chunk id once: ``missed``
    holds the ids of chunks that had no record (they get only their topic entity);
    ``partial`` counts chunks matched to a record of the same title whose text contains
    the chunk's text (a passage split into several chunks).
    """

    path: str
    lines: int = 0
    records: int = 0
    issues: list[ImportIssue] = field(default_factory=list)
    _matched: dict[str, bool] = field(default_factory=dict, init=False, repr=False)
    _missed: dict[str, None] = field(default_factory=dict, init=False, repr=False)

    _seen: set[ImportIssue] = field(default_factory=set, init=False, repr=False, compare=False)

    def add(self, line: int, field_: str, message: str, action: str) -> None:
        """Record an issue once (extracting the same chunks again adds no duplicates)."""
        issue = ImportIssue(line, field_, message, action)
        if issue not in self._seen:
            self._seen.add(issue)
            self.issues.append(issue)

    def chunk_matched(self, chunk_id: str, partial: bool) -> None:
        """Count a chunk matched to a record (``partial``: by containment)."""
        self._matched[chunk_id] = partial
        self._missed.pop(chunk_id, None)

    def chunk_missed(self, chunk_id: str) -> None:
        """Record a chunk without a record."""
        if chunk_id not in self._matched:
            self._missed[chunk_id] = None

    @property
    def matched(self) -> int:
        return len(self._matched)

    @property
    def partial(self) -> int:
        return sum(self._matched.values())

    @property
    def missed(self) -> list[str]:
        return list(self._missed)

    def counts(self) -> Counter[str]:
        """Number of issues per ``"<field>: <action>"`` (list indices dropped from fields)."""
        return Counter(f"{_INDEX.sub('', i.field) or 'line'}: {i.action}" for i in self.issues)

    def summary(self) -> str:
        """One line: records read, issues by kind, chunks matched and missed."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.counts().items())) or "none"
        return (
            f"{self.path}: {self.records} records from {self.lines} lines; issues: {kinds}; "
            f"chunks matched {self.matched} (partial {self.partial}), missed {len(self.missed)}"
        )


@dataclass(frozen=True, slots=True)
class OpenIERecord:
    """One usable line: a passage with its entity names and (s, p, o) triples."""

    line: int
    title: str
    text: str
    entities: tuple[str, ...]
    triples: tuple[tuple[str, str, str], ...]


def read_records(path: str | Path, report: ImportReport, *, strict: bool) -> list[OpenIERecord]:
    """Parse every line of ``path``; problems go to ``report`` (``strict``: raise instead).

    Raises :class:`InputError` when the file cannot be read, is not UTF-8, holds no
    usable record, or (``strict``) has any problem at all.
    """
    records = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, raw in enumerate(handle, start=1):
                report.lines = number
                if raw.strip():
                    record = _parse_line(number, raw, report, strict)
                    if record is not None:
                        records.append(record)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", path=str(path), line=report.lines + 1) from exc
    report.records = len(records)
    if not records:
        raise InputError("no usable record", path=str(path))
    return records


class _Problems:
    """Records issues of one line; in strict mode the first one raises."""

    def __init__(self, report: ImportReport, path: str, line: int, strict: bool) -> None:
        self.report, self.path, self.line, self.strict = report, path, line, strict

    def __call__(self, field_: str, message: str, action: str) -> None:
        if self.strict:
            raise InputError(message, path=self.path, line=self.line, field=field_)
        self.report.add(self.line, field_, message, action)


def _parse_line(number: int, raw: str, report: ImportReport, strict: bool) -> OpenIERecord | None:
    problem = _Problems(report, report.path, number, strict)
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        problem("", f"invalid JSON: {exc.msg} at column {exc.colno}", "skipped")
        return None
    if not isinstance(obj, dict):
        problem("", f"expected an object, got {type(obj).__name__}", "skipped")
        return None
    text, title = obj.get("text"), obj.get("title", "")
    if not isinstance(text, str) or not text.strip():
        problem("text", "missing or not a non-empty string", "skipped")
        return None
    if not isinstance(title, str):
        problem("title", f"expected a string, got {type(title).__name__}", "skipped")
        return None
    entities = _entities(obj.get("entities", []), problem)
    triples = _triples(obj.get("triples", []), problem)
    return OpenIERecord(number, title, text, entities, triples)


def _entities(value: Any, problem: _Problems) -> tuple[str, ...]:
    if not isinstance(value, list):
        problem("entities", f"expected a list, got {type(value).__name__}", "skipped")
        return ()
    names = []
    for i, item in enumerate(value):
        name = _as_name(item, f"entities[{i}]", problem)
        if name is not None:
            names.append(name)
    return tuple(names)


def _triples(value: Any, problem: _Problems) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(value, list):
        problem("triples", f"expected a list, got {type(value).__name__}", "skipped")
        return ()
    triples = []
    for i, item in enumerate(value):
        triple = _triple(item, f"triples[{i}]", problem)
        if triple is not None:
            triples.append(triple)
    return tuple(triples)


def _triple(item: Any, where: str, problem: _Problems) -> tuple[str, str, str] | None:
    if not isinstance(item, list):
        problem(where, f"expected a list, got {type(item).__name__}", "skipped")
        return None
    parts = [_as_name(x, f"{where}[{j}]", problem) for j, x in enumerate(item)]
    if any(p is None for p in parts):
        return None
    words = [p for p in parts if p is not None]
    if len(words) < 3:
        problem(where, f"{len(words)} elements {words!r}, need 3", "skipped")
        return None
    if len(words) > 3:
        predicate = " ".join(words[1:-1])
        problem(where, f"{len(words)} elements; predicate joined as {predicate!r}", "repaired")
        return words[0], predicate, words[-1]
    return words[0], words[1], words[2]


def _as_name(item: Any, where: str, problem: _Problems) -> str | None:
    if isinstance(item, bool) or not isinstance(item, str | int | float):
        problem(where, f"expected a string, got {type(item).__name__}", "skipped")
        return None
    if not isinstance(item, str):
        problem(where, f"number {item!r} read as text", "repaired")
    text = " ".join(str(item).split())
    if not text:
        problem(where, "empty string", "skipped")
        return None
    return text
