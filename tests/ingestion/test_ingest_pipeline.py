"""Resumable ingestion: status lifecycle, failures, kills and exactly-once commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from quillian.components.chunking import PassageChunker, WordWindowChunker
from quillian.components.ingestion import IngestReport, ingest, per_document
from quillian.errors import ConfigError, LLMUnavailableError, MissingExtraError, StoreError
from quillian.stores.protocols import DocStatus
from quillian.testing.memory import MemoryDocumentStore, MemoryStatusStore
from quillian.types import Chunk, Document


def corpus(n: int) -> list[Document]:
    return [
        Document(text=f"doc {i} says word{i} " * 3, title=f"T{i}", source=f"s{i % 2}")
        for i in range(n)
    ]


class Recorder:
    """A process hook that records committed documents; optionally raises at call N."""

    def __init__(self, kill_on_call: int | None = None, exc: BaseException | None = None) -> None:
        self.calls: list[list[str]] = []
        self.kill_on_call = kill_on_call
        self.exc = exc or KeyboardInterrupt()

    def __call__(self, docs: Sequence[Document], chunks: Sequence[list[Chunk]]) -> None:
        self.calls.append([d.id for d in docs])
        if len(self.calls) == self.kill_on_call:
            raise self.exc

    @property
    def seen(self) -> list[str]:
        return [doc_id for call in self.calls for doc_id in call]


class BadChunker:
    """PassageChunker that fails on documents whose title is in ``bad``."""

    name = "bad"

    def __init__(self, *bad: str) -> None:
        self.bad = set(bad)

    def chunk(self, document: Document) -> list[Chunk]:
        if document.title in self.bad:
            raise ValueError(f"cannot chunk {document.title}")
        return PassageChunker().chunk(document)


Stores = tuple[MemoryDocumentStore, MemoryStatusStore]


@pytest.fixture
def stores() -> Stores:
    return MemoryDocumentStore(), MemoryStatusStore()


def run(docs: list[Document], stores: Stores, **kwargs: Any) -> IngestReport:
    kwargs.setdefault("chunker", PassageChunker())
    return ingest(docs, doc_store=stores[0], status_store=stores[1], **kwargs)


def test_ingest_stores_documents_chunks_and_statuses(stores: Stores) -> None:
    docs, progress = corpus(5), []
    report = run(
        docs,
        stores,
        chunker=WordWindowChunker(size=4, overlap=1),
        batch_size=2,
        on_progress=lambda *args: progress.append(args),
    )
    doc_store, status_store = stores
    assert (report.total, report.new, report.skipped, report.failed) == (5, 5, 0, 0)
    assert report.ok and report.chunks == doc_store.count_chunks() == 5 * 4
    assert doc_store.get_documents([d.id for d in docs]) == docs
    assert status_store.counts()[DocStatus.PROCESSED] == 5
    assert status_store.get_status([docs[1].id])[docs[1].id].source == "s1"
    assert progress == [(i + 1, 5, d.id) for i, d in enumerate(docs)]


class HistoryStatusStore(MemoryStatusStore):
    """Records every status each document passes through."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[DocStatus]] = {}

    def set_status(
        self, doc_ids: Sequence[str], status: DocStatus, *, error: str = "", source: str = ""
    ) -> None:
        for doc_id in doc_ids:
            self.history.setdefault(doc_id, []).append(status)
        super().set_status(doc_ids, status, error=error, source=source)


def test_each_document_goes_pending_processing_processed_or_failed() -> None:
    status_store = HistoryStatusStore()
    docs = corpus(3)
    run(docs, (MemoryDocumentStore(), status_store), chunker=BadChunker("T1"), batch_size=2)
    flow = [DocStatus.PENDING, DocStatus.PROCESSING]
    assert status_store.history == {
        docs[0].id: [*flow, DocStatus.PROCESSED],
        docs[1].id: [*flow, DocStatus.FAILED],
        docs[2].id: [*flow, DocStatus.PROCESSED],
    }


def test_a_second_run_skips_processed_documents(stores: Stores) -> None:
    docs = corpus(4)
    run(docs, stores)
    hook = Recorder()
    report = run([*docs, Document(text="new one")], stores, process=hook)
    assert (report.new, report.skipped, report.resumed) == (1, 4, 0)
    assert hook.seen == [Document(text="new one").id]


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(1)])
def test_a_killed_run_resumes_and_commits_each_document_once(
    stores: Stores, exc: BaseException
) -> None:
    docs = corpus(10)
    doc_store, status_store = stores
    killer = Recorder(kill_on_call=3, exc=exc)
    with pytest.raises(type(exc)):
        run(docs, stores, process=killer, batch_size=3)
    done_first = {r.doc_id for r in status_store.with_status(DocStatus.PROCESSED)}
    assert done_first == {d.id for d in docs[:6]}
    assert {r.doc_id for r in status_store.with_status(DocStatus.PROCESSING)} == {
        d.id for d in docs[6:9]
    }
    assert {r.doc_id for r in status_store.with_status(DocStatus.PENDING)} == {docs[9].id}
    assert doc_store.count_documents() == 6  # the killed batch committed nothing

    resume = Recorder()
    report = run(docs, stores, process=resume, batch_size=3)
    assert (report.new, report.skipped, report.resumed, report.failed) == (4, 6, 4, 0)
    assert sorted(resume.seen) == sorted(d.id for d in docs[6:])
    assert set(resume.seen).isdisjoint(done_first)  # nothing committed twice
    assert status_store.counts()[DocStatus.PROCESSED] == 10
    assert doc_store.count_documents() == 10 and doc_store.count_chunks() == 10
    assert all(doc_store.chunks_of(d.id) for d in docs)


def test_a_failing_document_is_marked_failed_and_the_batch_continues(stores: Stores) -> None:
    docs = corpus(4)
    report = run(docs, stores, chunker=BadChunker("T1"), batch_size=4)
    assert (report.new, report.failed) == (3, 1)
    (failure,) = report.failures
    assert (failure.doc_id, failure.title, failure.source) == (docs[1].id, "T1", "s1")
    assert failure.error == "ValueError: cannot chunk T1"
    record = stores[1].get_status([docs[1].id])[docs[1].id]
    assert (record.status, record.error) == (DocStatus.FAILED, "ValueError: cannot chunk T1")
    assert stores[0].get_documents([docs[1].id]) == [None]

    retry = run(docs, stores)  # a fixed chunker: the failed document is retried
    assert (retry.new, retry.skipped, retry.resumed, retry.failed) == (1, 3, 1, 0)
    assert stores[1].counts()[DocStatus.PROCESSED] == 4


def test_failed_documents_stay_failed_without_retry(stores: Stores) -> None:
    docs = corpus(3)
    run(docs, stores, chunker=BadChunker("T0"))
    report = run(docs, stores, retry_failed=False)
    assert (report.new, report.skipped, report.failed) == (0, 3, 0)
    assert stores[1].counts()[DocStatus.FAILED] == 1


def test_a_raising_hook_is_retried_one_document_at_a_time(stores: Stores) -> None:
    docs = corpus(4)
    committed: list[str] = []

    def hook(batch: Sequence[Document], chunks: Sequence[list[Chunk]]) -> None:
        if any(d.title == "T2" for d in batch):
            raise RuntimeError("model overloaded")
        committed.extend(d.id for d in batch)

    report = run(docs, stores, process=hook, batch_size=4)
    assert sorted(committed) == sorted(d.id for i, d in enumerate(docs) if i != 2)
    assert [f.error for f in report.failures] == ["RuntimeError: model overloaded"]
    assert report.failures[0].doc_id == docs[2].id


def test_a_hook_may_report_per_document_errors(stores: Stores) -> None:
    docs = corpus(3)
    report = run(docs, stores, process=lambda b, c: {docs[0].id: ValueError("no entities")})
    assert [(f.doc_id, f.error) for f in report.failures] == [
        (docs[0].id, "ValueError: no entities")
    ]
    assert report.new == 2


def test_per_document_adapter_isolates_errors(stores: Stores) -> None:
    seen: list[tuple[str, int]] = []

    def fn(doc: Document, chunks: list[Chunk]) -> None:
        if doc.title == "T0":
            raise KeyError("missing")
        seen.append((doc.title, len(chunks)))

    report = run(corpus(3), stores, process=per_document(fn))
    assert seen == [("T1", 1), ("T2", 1)]
    assert report.failures[0].error == "KeyError: 'missing'"


def test_duplicates_and_empty_input(stores: Stores) -> None:
    docs = corpus(2)
    report = run([docs[0], docs[1], docs[0]], stores)
    assert (report.total, report.new, report.duplicates) == (2, 2, 1)
    empty = run([], stores)
    assert (empty.total, empty.new, empty.chunks) == (0, 0, 0)


def test_a_document_without_chunks_is_still_processed(stores: Stores) -> None:
    report = run([Document(text="   ", title="blank")], stores)
    assert (report.new, report.chunks) == (1, 0)


def test_batch_size_is_validated(stores: Stores) -> None:
    with pytest.raises(ConfigError, match="batch_size must be greater than 0, got 0"):
        run(corpus(1), stores, batch_size=0)


def disk_error(doc: Document, chunks: list[Chunk]) -> None:
    raise OSError(5, "Input/output error")


@pytest.mark.parametrize(
    "error",
    [
        OSError(28, "No space left on device"),
        StoreError("the database server is gone"),
        LLMUnavailableError("the endpoint is down"),
        MissingExtraError("spacy", "nlp"),
    ],
    ids=["disk", "store", "llm", "extra"],
)
def test_an_error_not_about_the_document_stops_the_ingestion(stores: Stores, error) -> None:
    """An outage is not one document's failure after another: it propagates, and the
    batch in hand stays PROCESSING (not FAILED, not PROCESSED) for the next run."""
    docs = corpus(4)
    with pytest.raises(type(error)):
        run(docs, stores, process=Recorder(kill_on_call=1, exc=error), batch_size=2)
    statuses = stores[1].get_status([d.id for d in docs])
    assert [statuses[d.id].status for d in docs] == [DocStatus.PROCESSING] * 2 + [
        DocStatus.PENDING
    ] * 2
    with pytest.raises(OSError):
        run(docs, stores, process=per_document(disk_error))
    report = run(docs, stores)
    assert (report.new, report.failed) == (4, 0)


def test_a_document_no_store_can_hold_is_refused_alone_and_counted(stores: Stores) -> None:
    """Text with an unpaired surrogate (a JSON ``"\\ud800"`` escape) has no UTF-8 form:
    the document is refused, named, marked FAILED and counted; the others go in."""
    bad = Document("lone \ud800 surrogate", "Bad", "corpus.json", {"index": 3})
    docs = [*corpus(2), bad]
    report = run(docs, stores)
    assert (report.total, report.new, report.failed) == (3, 2, 1)
    (failure,) = report.failures
    assert failure.source == "corpus.json" and failure.title == "Bad"
    assert failure.error == (
        "entry 3: text holds an unpaired surrogate (U+D800 at character 5), which is not "
        "Unicode text; send the character it stands for, or drop it"
    )
    assert stores[1].counts()[DocStatus.FAILED] == 1
    assert stores[1].get_status([failure.doc_id])[failure.doc_id].error == failure.error
