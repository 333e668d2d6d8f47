"""KAG's extraction issues as its build stage keeps them: ``kag/extraction_issues.jsonl``
under the index directory, one JSON object per issue (``chunk_id``, ``task``, ``kind``,
``message``, ``raw``), in chunk order, rewritten with the graph at every build."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from quillian.components.extraction.base import ExtractionIssue
from quillian.errors import IndexStageMissingError

__all__ = ["ISSUES_FILE", "extraction_issues", "save_extraction_issues"]

ISSUES_FILE = Path("kag") / "extraction_issues.jsonl"


def save_extraction_issues(folder: Path, issues: Sequence[ExtractionIssue]) -> None:
    """Write ``issues`` into the KAG stage's ``folder`` (the ``kag`` directory)."""
    lines = [json.dumps(asdict(i), ensure_ascii=False) + "\n" for i in issues]
    (folder / ISSUES_FILE.name).write_text("".join(lines), encoding="utf-8")


def extraction_issues(location: str | Path) -> list[ExtractionIssue]:
    """The extraction issues of the KAG index at ``location``: tasks whose output stayed
    unusable, triples rejected, categories repaired (empty for an extractor that records
    none, such as recorded extractions)."""
    path = Path(location) / ISSUES_FILE
    if not path.parent.is_dir():
        raise IndexStageMissingError(
            f"{location} has no KAG graph; build it with `quillian index ... --for kag`"
        )
    if not path.is_file():  # a graph built before issues were kept
        return []
    with path.open(encoding="utf-8") as lines:
        return [ExtractionIssue(**json.loads(line)) for line in lines if line.strip()]
