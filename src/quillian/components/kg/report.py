"""What an import read, what it dropped and why: counted issues with line numbers.

Nothing is skipped silently. Every rejected line or record is counted under an issue
kind (``malformed``, ``decode-error``, ``unknown-entity`` ...) and the first few of each
kind are kept with their file and line number. Informational kinds (a literal the RDF
reader does not use, a WordNet pointer type that is not imported) are counted the
same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.types import Progress, no_progress

__all__ = ["DropReport", "ImportReport", "Issue", "IssueLog", "Progress", "no_progress"]

#: Issue kinds that only inform (the input is fine, a part of it is not imported).
INFO_KINDS = frozenset(
    {"literal-ignored", "blank-node", "other-language", "pointer-ignored", "empty-description"}
)


@dataclass(frozen=True, slots=True)
class Issue:
    """One rejected (or ignored) line: where, and what was wrong."""

    kind: str
    path: str
    line: int
    detail: str = ""

    def text(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}" + (f": {self.detail}" if self.detail else "")


class IssueLog:
    """Counts issues per kind and keeps the first ``keep`` of each kind."""

    def __init__(self, keep: int = 20) -> None:
        self.keep = keep
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[Issue]] = {}

    def add(self, kind: str, path: str, line: int, detail: str = "") -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        kept = self.examples.setdefault(kind, [])
        if len(kept) < self.keep:
            kept.append(Issue(kind, path, int(line), detail))

    def room(self, kind: str) -> int:
        """How many more issues of ``kind`` would be kept as examples."""
        return max(0, self.keep - len(self.examples.get(kind, [])))

    def add_many(
        self,
        kind: str,
        path: str,
        lines: Sequence[int] | npt.NDArray[np.integer],
        details: Sequence[str] = (),
    ) -> None:
        """Count ``len(lines)`` issues; ``details`` describe the first ones (compute only
        :meth:`room` of them: the rest would not be kept)."""
        n = len(lines)
        if not n:
            return
        self.counts[kind] = self.counts.get(kind, 0) + n
        kept = self.examples.setdefault(kind, [])
        for j in range(min(n, self.keep - len(kept))):
            kept.append(Issue(kind, path, int(lines[j]), details[j] if j < len(details) else ""))

    def count(self, *kinds: str) -> int:
        return sum(self.counts.get(k, 0) for k in kinds)

    def problems(self) -> dict[str, int]:
        """Counts of the kinds that are problems with the input (not informational)."""
        return {k: v for k, v in self.counts.items() if k not in INFO_KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(sorted(self.counts.items())),
            "examples": {k: [asdict(i) for i in v] for k, v in sorted(self.examples.items())},
        }


@dataclass
class DropReport:
    """What the paper's preprocessing (Appendix C.2) removed.

    An entity must have a description and at least one outgoing triple; triples that
    touch a dropped entity go too, which can leave further entities without outgoing
    triples, so the filter runs to a fixed point (``rounds``).
    """

    no_description: int = 0
    no_outgoing_triple: int = 0
    rounds: int = 0
    triples: int = 0
    relations: int = 0
    examples_no_description: list[str] = field(default_factory=list)
    examples_no_outgoing_triple: list[str] = field(default_factory=list)


@dataclass
class ImportReport:
    """The account of one import, returned by the importers and saved as ``report.json``."""

    source: str
    inputs: list[str] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)
    issues: IssueLog = field(default_factory=IssueLog)
    dropped: DropReport | None = None
    final: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    directory: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "issues"}
        data["issues"] = self.issues.to_dict()
        return data

    def summary_lines(self, examples: int = 5) -> list[str]:
        """The report as text for the command line."""
        out = [f"source: {self.source} ({', '.join(self.inputs)})"]
        for path, n in self.lines.items():
            out.append(f"  read {n:,} lines from {path}")
        if self.read:
            out.append("read: " + ", ".join(f"{k} {v:,}" for k, v in self.read.items()))
        for kind, n in sorted(self.issues.counts.items()):
            label = "note" if kind in INFO_KINDS else "issue"
            out.append(f"{label}: {kind}: {n:,}")
            out.extend(f"    {i.text()}" for i in self.issues.examples.get(kind, [])[:examples])
        d = self.dropped
        if d is not None:
            out.append(
                f"preprocessing dropped {d.no_description:,} entities without a description, "
                f"{d.no_outgoing_triple:,} without an outgoing triple ({d.rounds} rounds), "
                f"{d.triples:,} triples and {d.relations:,} relations"
            )
            if d.examples_no_description:
                out.append("    no description: " + ", ".join(d.examples_no_description[:examples]))
            if d.examples_no_outgoing_triple:
                out.append(
                    "    no outgoing triple: " + ", ".join(d.examples_no_outgoing_triple[:examples])
                )
        out.extend(f"note: {n}" for n in self.notes)
        if self.final:
            out.append("graph: " + ", ".join(f"{k} {v:,}" for k, v in self.final.items()))
        if self.seconds:
            out.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()))
        return out
