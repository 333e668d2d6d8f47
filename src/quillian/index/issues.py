"""Extraction issues kept with the index: an extractor that records them
(:class:`~quillian.components.extraction.base.IssueRecorder`) hands them over after each
batch, and they are stored per chunk in the key-value store beside the chunk's stored
extraction, so a later build, which reads that extraction back instead of extracting
again, still has them; a deleted document's go with its extraction."""

from __future__ import annotations

from collections.abc import Sequence

from quillian.components.extraction.base import ExtractionIssue, Extractor, IssueRecorder
from quillian.components.extraction.serde import issues_from_json, issues_to_json
from quillian.stores.protocols import KeyValueStore

__all__ = ["issues_namespace", "store_issues", "stored_issues"]


def issues_namespace(extractor: Extractor) -> str:
    """The key-value namespace of ``extractor``'s per-chunk issues."""
    return f"extraction-issues:{extractor.name}"


def store_issues(kv: KeyValueStore, extractor: Extractor, chunk_ids: Sequence[str]) -> None:
    """Take the issues ``extractor`` recorded and store those of ``chunk_ids`` (the
    chunks whose extractions were just stored); a chunk with none loses any it had.
    Issues of other chunks (a batch an exhausted budget cut short) are dropped: those
    chunks are extracted, and their issues recorded, again."""
    if not isinstance(extractor, IssueRecorder):
        return
    by_chunk: dict[str, list[ExtractionIssue]] = {}
    for issue in extractor.take_issues():
        by_chunk.setdefault(issue.chunk_id, []).append(issue)
    namespace = issues_namespace(extractor)
    kept = {cid: issues_to_json(by_chunk[cid]) for cid in chunk_ids if cid in by_chunk}
    if kept:
        kv.put_many(namespace, kept)
    kv.delete_many(namespace, [cid for cid in chunk_ids if cid not in by_chunk])


def stored_issues(
    kv: KeyValueStore, extractor: Extractor, chunk_ids: Sequence[str]
) -> list[ExtractionIssue]:
    """The stored issues of ``chunk_ids``, in their order. Read whatever ``extractor``
    is: the rebuild after a deletion runs with a stand-in of the same name that records
    nothing itself. Only the chunks that have issues are read: most have none, and an
    update's build asks for every chunk."""
    namespace = issues_namespace(extractor)
    held = set(kv.keys(namespace))
    out: list[ExtractionIssue] = []
    if not held:
        return out
    for raw in kv.get_many(namespace, [c for c in chunk_ids if c in held]):
        if raw is not None:
            out.extend(issues_from_json(raw))
    return out
