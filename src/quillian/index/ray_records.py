"""An index's record stores (documents, statuses, key-value) as a Ray worker opens them,
and the writes of one batch of the Ray executor (:mod:`quillian.index.ray_build`).

A worker opens only the record stores, never the index's files: for PostgreSQL the
workspace's tables (no local cache pulled or pushed), for an embedded index its SQLite
database, which only the :class:`StoreWriter` actor writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from quillian.index.layout import index_directory, is_server_location, server_backend
from quillian.index.storage import STORE_DB
from quillian.stores.embedded.sqlite import (
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
)
from quillian.stores.protocols import DocStatus, DocumentStore, KeyValueStore, StatusStore
from quillian.types import Chunk, Document

__all__ = ["EMBEDDINGS", "Records", "StoreWriter", "WriteBatch", "open_records"]

#: The embedding cache's namespace (the build's :class:`CachedEmbedder` default).
EMBEDDINGS = "embeddings"


@dataclass
class Records:
    """The record stores of one index, opened by a worker."""

    documents: DocumentStore
    status: StatusStore
    kv: KeyValueStore
    workspace: Any = None

    def close(self) -> None:
        for store in (self.documents, self.status, self.kv):
            store.close()
        if self.workspace is not None:
            self.workspace.close()


def open_records(location: str) -> Records:
    """The record stores of the existing index at ``location``."""
    if is_server_location(location):
        backend = server_backend()
        workspace = backend.Workspace(location, create=False)
        return Records(
            backend.PgDocumentStore(workspace),
            backend.PgStatusStore(workspace),
            backend.PgKeyValueStore(workspace),
            workspace,
        )
    db = index_directory(location) / STORE_DB
    return Records(SqliteDocumentStore(db), SqliteStatusStore(db), SqliteKeyValueStore(db))


@dataclass
class WriteBatch:
    """What one batch of documents adds to the index, in the order it is written:
    key-value entries (extractions, issues, vectors), documents and chunks, statuses."""

    extraction_namespace: str
    issues_namespace: str | None
    extractions: dict[str, bytes] = field(default_factory=dict)
    issues: dict[str, bytes | None] = field(default_factory=dict)
    """Each extracted chunk's issues; None: it has none (any stored go)."""
    embeddings: dict[str, bytes] = field(default_factory=dict)
    documents: list[Document] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    processed: list[tuple[str, str]] = field(default_factory=list)
    """(document id, source) of each document done."""
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    """(document id, source, error) of each document that failed."""


class StoreWriter:
    """Writes batches to an index's record stores (and reads cached values back): in
    each worker for PostgreSQL, as the one writer actor for an embedded index. Every
    write is keyed by content-derived ids and the status goes last, so writing a batch
    again (a retried task) changes nothing."""

    def __init__(self, location: str) -> None:
        self.records = open_records(location)

    def cached(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        """The stored values of ``keys`` in ``namespace`` (None where missing)."""
        return self.records.kv.get_many(namespace, list(keys))

    def write(self, batch: WriteBatch) -> None:
        """Store ``batch``: key-value entries first, statuses last."""
        kv = self.records.kv
        if batch.extractions:
            kv.put_many(batch.extraction_namespace, batch.extractions)
        if batch.issues_namespace is not None:
            kept = {k: v for k, v in batch.issues.items() if v is not None}
            if kept:
                kv.put_many(batch.issues_namespace, kept)
            gone = [k for k, v in batch.issues.items() if v is None]
            if gone:
                kv.delete_many(batch.issues_namespace, gone)
        if batch.embeddings:
            kv.put_many(EMBEDDINGS, batch.embeddings)
        self.records.documents.put_documents(batch.documents)
        self.records.documents.put_chunks(batch.chunks)
        by_source: dict[str, list[str]] = {}
        for doc_id, source in batch.processed:
            by_source.setdefault(source, []).append(doc_id)
        for source, ids in by_source.items():
            self.records.status.set_status(ids, DocStatus.PROCESSED, source=source)
        for doc_id, source, error in batch.failed:
            self.records.status.set_status([doc_id], DocStatus.FAILED, error=error, source=source)

    def close(self) -> None:
        self.records.close()
