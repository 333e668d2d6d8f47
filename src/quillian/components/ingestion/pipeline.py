"""Resumable ingestion: chunk documents, store them, and track each one's status.

Every document moves PENDING -> PROCESSING -> PROCESSED, or FAILED with its error
(LightRAG's lifecycle). A later call skips PROCESSED documents and redoes the rest, so
a run that was killed - leaving documents PENDING or PROCESSING - resumes where it
stopped. Work commits per batch: a document counts as done only after its chunks are
stored and ``process`` has returned for it.

A document fails on its own: an error raised while chunking or processing it (by a
model, a parser, a limit) marks it FAILED with its error and the others go on. An error
that is not about the document - the disk, the database or a model endpoint gone,
memory exhausted, a missing dependency (:data:`INFRASTRUCTURE_ERRORS`) - aborts the
call instead, leaving the batch PROCESSING for the next run to redo: recording it as
every remaining document's failure would turn an outage into a complete-looking index
with holes. A document that no store can hold (text with an unpaired surrogate,
:func:`~quillian.components.ingestion.checks.document_problem`) is refused before
anything is written.

One ``ingest`` call at a time may use a given pair of stores.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from quillian.components.chunking.base import Chunker
from quillian.components.ingestion.checks import document_problem
from quillian.errors import (
    ConfigError,
    IndexError_,
    LLMAuthError,
    LLMModelNotFoundError,
    LLMUnavailableError,
    MissingExtraError,
    StoreError,
)
from quillian.stores.protocols import (
    DocStatus,
    DocumentStore,
    StatusRecord,
    StatusStore,
    iter_batches,
)
from quillian.types import Chunk, Document, stable_id

__all__ = [
    "INFRASTRUCTURE_ERRORS",
    "IngestFailure",
    "IngestReport",
    "ProcessHook",
    "ProgressCallback",
    "ingest",
    "is_document_error",
    "per_document",
]

logger = logging.getLogger(__name__)

#: Errors that are not about the document in hand: they abort an ingestion instead of
#: failing one document after another (a lost connection, a full disk, a model endpoint
#: down or refusing the key, a dependency or setting missing, a damaged index).
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    MemoryError,
    sqlite3.DatabaseError,
    StoreError,
    IndexError_,
    ConfigError,
    MissingExtraError,
    LLMUnavailableError,
    LLMAuthError,
    LLMModelNotFoundError,
)


def is_document_error(exc: BaseException) -> bool:
    """Whether ``exc``, raised while working on a document, fails that document alone
    (else it is one of :data:`INFRASTRUCTURE_ERRORS` and stops the ingestion)."""
    return isinstance(exc, Exception) and not isinstance(exc, INFRASTRUCTURE_ERRORS)


ProgressCallback = Callable[[int, int, str], None]
"""Called after each document: ``(documents done, documents to do, doc_id)``."""

ProcessHook = Callable[[Sequence[Document], Sequence[list[Chunk]]], Mapping[str, Exception] | None]
"""Later stages (extraction, embedding) run on a batch: ``(documents, chunks per document)``.

It may return ``{doc_id: error}`` for documents it failed; those are marked FAILED and
the rest PROCESSED. If it raises an ``Exception`` instead, the batch is retried one
document at a time to find the failing ones. Either way, and because a killed run redoes
its last batch, a hook must be idempotent: write results keyed by document or chunk id.
"""


@dataclass(frozen=True, slots=True)
class IngestFailure:
    """A document that failed, and why."""

    doc_id: str
    title: str
    source: str
    error: str


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ``ingest`` call did.

    ``total`` counts distinct documents in the input; ``new`` those processed by this
    call; ``skipped`` those left alone (already processed, or failed before when
    ``retry_failed`` is off); ``resumed`` those redone after an interrupted or failed
    earlier run (also counted in ``new`` or ``failed``); ``duplicates`` repeated input
    documents (same id) that were ignored; ``chunks`` the chunks written.
    """

    total: int
    new: int
    skipped: int
    failed: int
    resumed: int = 0
    duplicates: int = 0
    chunks: int = 0
    failures: tuple[IngestFailure, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no document failed."""
        return self.failed == 0


def ingest(
    documents: Iterable[Document],
    *,
    chunker: Chunker,
    doc_store: DocumentStore,
    status_store: StatusStore,
    on_progress: ProgressCallback | None = None,
    process: ProcessHook | None = None,
    batch_size: int = 64,
    retry_failed: bool = True,
) -> IngestReport:
    """Chunk and store ``documents``, skipping those already processed.

    Args:
        documents: The input; documents with equal ids after the first are ignored.
        chunker: Splits each document into chunks.
        doc_store: Receives the documents and chunks that succeed.
        status_store: Tracks each document's status (and makes the run resumable).
        on_progress: Called after each document with ``(done, total, doc_id)``, where
            ``total`` is the number of documents this call has to do.
        process: Optional per-batch hook for later stages; see :data:`ProcessHook`.
        batch_size: Documents per batch (the unit of commit and of ``process``).
        retry_failed: Redo documents that failed in an earlier run.

    Returns:
        Counts of new, skipped and failed documents, with each failure's error.
    """
    if batch_size <= 0:
        raise ConfigError(f"batch_size must be greater than 0, got {batch_size}")
    storable, refused = _refuse_unstorable(documents, status_store)
    unique, duplicates = _dedupe(storable)
    known = status_store.get_status([doc.id for doc in unique])
    todo = [doc for doc in unique if _needs_work(known.get(doc.id), retry_failed)]
    resumed = sum(1 for doc in todo if doc.id in known)
    _mark(status_store, todo, DocStatus.PENDING)
    run = _Run(chunker, doc_store, status_store, process, on_progress, total=len(todo))
    for batch in iter_batches(todo, batch_size):
        run.batch(batch)
    report = IngestReport(
        total=len(unique) + len(refused),
        new=len(todo) - len(run.failures),
        skipped=len(unique) - len(todo),
        failed=len(run.failures) + len(refused),
        resumed=resumed,
        duplicates=duplicates,
        chunks=run.chunks,
        failures=(*refused, *run.failures),
    )
    logger.info(
        "ingested %d new, %d skipped, %d failed of %d documents (%d chunks)",
        *(report.new, report.skipped, report.failed, report.total, report.chunks),
    )
    return report


def per_document(fn: Callable[[Document, list[Chunk]], object]) -> ProcessHook:
    """Adapt a per-document function ``fn(doc, chunks)`` into a batch :data:`ProcessHook`.

    An ``Exception`` from ``fn`` fails only that document; the others still run.
    """

    def hook(docs: Sequence[Document], chunks: Sequence[list[Chunk]]) -> dict[str, Exception]:
        errors: dict[str, Exception] = {}
        for doc, doc_chunks in zip(docs, chunks, strict=True):
            try:
                fn(doc, doc_chunks)
            except Exception as exc:  # the per-document boundary: record, keep going
                if not is_document_error(exc):
                    raise
                errors[doc.id] = exc
        return errors

    return hook


def _refuse_unstorable(
    documents: Iterable[Document], status_store: StatusStore
) -> tuple[list[Document], list[IngestFailure]]:
    """Split off the documents no store can hold: each is marked FAILED (under an id
    of its escaped text, since its own cannot be computed) and reported."""
    storable: list[Document] = []
    refused: list[IngestFailure] = []
    for doc in documents:
        problem = document_problem(doc)
        if problem is None:
            storable.append(doc)
            continue
        where = f"entry {doc.metadata['index']}: " if "index" in doc.metadata else ""
        title, source = _escaped(doc.title), _escaped(doc.source)
        doc_id = stable_id("doc", title, _escaped(doc.text))
        failure = IngestFailure(doc_id, title, source, f"{where}{problem}")
        logger.warning("document %s (%s) refused: %s", failure.doc_id, source, failure.error)
        status_store.set_status(
            [failure.doc_id], DocStatus.FAILED, error=failure.error, source=source
        )
        refused.append(failure)
    return storable, refused


def _escaped(text: str) -> str:
    """``text`` with any lone surrogate written as a ``\\udXXX`` escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _dedupe(documents: Iterable[Document]) -> tuple[list[Document], int]:
    seen: dict[str, Document] = {}
    duplicates = 0
    for doc in documents:
        if doc.id in seen:
            duplicates += 1
        else:
            seen[doc.id] = doc
    return list(seen.values()), duplicates


def _needs_work(record: StatusRecord | None, retry_failed: bool) -> bool:
    if record is None:
        return True
    if record.status == DocStatus.FAILED:
        return retry_failed
    return record.status != DocStatus.PROCESSED


def _mark(store: StatusStore, docs: Sequence[Document], status: DocStatus) -> None:
    """Set ``status`` on ``docs``, one call per distinct source."""
    by_source: dict[str, list[str]] = {}
    for doc in docs:
        by_source.setdefault(doc.source, []).append(doc.id)
    for source, ids in by_source.items():
        store.set_status(ids, status, source=source)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Run:
    """State of one ``ingest`` call: runs batches and collects failures."""

    def __init__(
        self,
        chunker: Chunker,
        doc_store: DocumentStore,
        status_store: StatusStore,
        process: ProcessHook | None,
        on_progress: ProgressCallback | None,
        total: int,
    ) -> None:
        self.chunker = chunker
        self.doc_store = doc_store
        self.status_store = status_store
        self.process = process
        self.on_progress = on_progress
        self.total = total
        self.done = 0
        self.chunks = 0
        self.failures: list[IngestFailure] = []

    def batch(self, docs: list[Document]) -> None:
        """Process one batch and commit its results and statuses."""
        _mark(self.status_store, docs, DocStatus.PROCESSING)
        errors: dict[str, Exception] = {}
        chunked = self._chunk(docs, errors)
        if self.process is not None:
            ready = [doc for doc in docs if doc.id in chunked]
            found = _run_hook(self.process, ready, [chunked[doc.id] for doc in ready])
            errors.update(found)
        good = [doc for doc in docs if doc.id not in errors]
        chunks = [chunk for doc in good for chunk in chunked[doc.id]]
        self.doc_store.put_documents(good)
        self.doc_store.put_chunks(chunks)
        self.chunks += len(chunks)
        _mark(self.status_store, good, DocStatus.PROCESSED)
        for doc in docs:
            if doc.id in errors:
                self._fail(doc, errors[doc.id])
            self._progress(doc)

    def _chunk(self, docs: list[Document], errors: dict[str, Exception]) -> dict[str, list[Chunk]]:
        chunked: dict[str, list[Chunk]] = {}
        for doc in docs:
            try:
                chunked[doc.id] = self.chunker.chunk(doc)
            except Exception as exc:  # one bad document must not stop the batch
                if not is_document_error(exc):
                    raise
                errors[doc.id] = exc
        return chunked

    def _fail(self, doc: Document, exc: Exception) -> None:
        error = _describe(exc)
        logger.warning("document %s (%s) failed: %s", doc.id, doc.source, error)
        self.status_store.set_status([doc.id], DocStatus.FAILED, error=error, source=doc.source)
        self.failures.append(IngestFailure(doc.id, doc.title, doc.source, error))

    def _progress(self, doc: Document) -> None:
        self.done += 1
        if self.on_progress is not None:
            self.on_progress(self.done, self.total, doc.id)


def _run_hook(
    process: ProcessHook, docs: list[Document], chunks: list[list[Chunk]]
) -> dict[str, Exception]:
    """Run ``process`` on a batch; if it raises, retry one document at a time."""
    if not docs:
        return {}
    try:
        return dict(process(docs, chunks) or {})
    except Exception as exc:  # batch boundary: isolate the failing documents
        if not is_document_error(exc):
            raise  # a lost store is not the documents' failure: stop, a rerun resumes
        if len(docs) == 1:
            return {docs[0].id: exc}
        logger.warning(
            "process hook failed on %d documents (%s); retrying one at a time",
            *(len(docs), _describe(exc)),
        )
    errors: dict[str, Exception] = {}
    for doc, doc_chunks in zip(docs, chunks, strict=True):
        errors.update(_run_hook(process, [doc], [doc_chunks]))
    return errors
