"""In-memory stores backed by dicts, for tests: a document store, a status store and a
key-value store implementing the protocols in :mod:`quillian.stores.protocols`.

They keep nothing on disk and do no locking, but otherwise behave like the embedded
backends and pass the same contract suites (:mod:`quillian.testing.contracts`): writes
replace earlier values by key, a bad item rejects its whole batch with an
:class:`~quillian.errors.InputError`, and use after ``close`` raises
:class:`~quillian.errors.StoreError`. ``reopen()`` returns a fresh store over the same
data, standing in for closing and reopening a file.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from quillian.errors import InputError, StoreError
from quillian.stores.protocols import ChunkHead, DocStatus, StatusRecord
from quillian.types import Chunk, Document

__all__ = ["MemoryDocumentStore", "MemoryKeyValueStore", "MemoryStatusStore"]


class _Closable:
    """``close`` flag shared by the memory stores."""

    _closed = False

    def close(self) -> None:
        """Refuse further use; closing twice is harmless."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{type(self).__name__} is closed")


class MemoryDocumentStore(_Closable):
    """Documents and chunks in dicts keyed by id (insertion-ordered)."""

    def __init__(
        self, documents: dict[str, Document] | None = None, chunks: dict[str, Chunk] | None = None
    ) -> None:
        self.documents: dict[str, Document] = {} if documents is None else documents
        self.chunks: dict[str, Chunk] = {} if chunks is None else chunks

    def reopen(self) -> MemoryDocumentStore:
        """A new store over the same data."""
        return MemoryDocumentStore(self.documents, self.chunks)

    def put_documents(self, documents: Sequence[Document]) -> None:
        """Insert or replace documents by id; metadata must be JSON-serialisable."""
        self._check_open()
        for doc in documents:
            _check_json(doc.metadata, f"document {doc.id}")
        self.documents.update((doc.id, doc) for doc in documents)

    def put_chunks(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace chunks by id; each needs ``0 <= start <= end``."""
        self._check_open()
        for chunk in chunks:
            if not 0 <= chunk.start <= chunk.end:
                raise InputError(
                    f"chunk {chunk.id}: need 0 <= start <= end, got {chunk.start}, {chunk.end}",
                    field="start",
                )
        self.chunks.update((chunk.id, chunk) for chunk in chunks)

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        """Remove documents and their chunks; unknown ids are ignored."""
        self._check_open()
        gone = set(doc_ids)
        for doc_id in gone:
            self.documents.pop(doc_id, None)
        for chunk_id in [c.id for c in self.chunks.values() if c.doc_id in gone]:
            del self.chunks[chunk_id]

    def get_documents(self, doc_ids: Sequence[str]) -> list[Document | None]:
        """Documents in the order asked for; ``None`` for unknown ids."""
        self._check_open()
        return [self.documents.get(doc_id) for doc_id in doc_ids]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk | None]:
        """Chunks in the order asked for; ``None`` for unknown ids."""
        self._check_open()
        return [self.chunks.get(chunk_id) for chunk_id in chunk_ids]

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        """Chunks of one document, by index."""
        self._check_open()
        return sorted((c for c in self.chunks.values() if c.doc_id == doc_id), key=_index)

    def iter_chunks(self) -> Iterator[Chunk]:
        """Every chunk, in insertion order."""
        self._check_open()
        return iter(list(self.chunks.values()))

    def iter_chunk_heads(self) -> Iterator[ChunkHead]:
        """Every chunk without its text, in insertion order."""
        self._check_open()
        return iter([(c.doc_id, c.index, c.id, c.title) for c in self.chunks.values()])

    def count_documents(self) -> int:
        """Number of documents."""
        self._check_open()
        return len(self.documents)

    def count_chunks(self) -> int:
        """Number of chunks."""
        self._check_open()
        return len(self.chunks)


def _index(chunk: Chunk) -> int:
    return chunk.index


def _check_json(metadata: Any, where: str) -> None:
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: metadata is not JSON: {exc}", field="metadata") from None


class MemoryStatusStore(_Closable):
    """One :class:`StatusRecord` per document id."""

    def __init__(self, records: dict[str, StatusRecord] | None = None) -> None:
        self.records: dict[str, StatusRecord] = {} if records is None else records

    def reopen(self) -> MemoryStatusStore:
        """A new store over the same data."""
        return MemoryStatusStore(self.records)

    def set_status(
        self, doc_ids: Sequence[str], status: DocStatus, *, error: str = "", source: str = ""
    ) -> None:
        """Set the status of ``doc_ids``; an empty ``source`` keeps the known source."""
        self._check_open()
        try:
            status = DocStatus(status)
        except ValueError:
            raise InputError(f"unknown status {status!r}", field="status") from None
        for doc_id in doc_ids:
            old = self.records.get(doc_id)
            kept = source or (old.source if old else "")
            self.records[doc_id] = StatusRecord(doc_id, status, error=error, source=kept)

    def delete(self, doc_ids: Sequence[str]) -> None:
        """Forget the status of ``doc_ids``; unknown ids are ignored."""
        self._check_open()
        for doc_id in doc_ids:
            self.records.pop(doc_id, None)

    def get_status(self, doc_ids: Sequence[str]) -> dict[str, StatusRecord]:
        """Records of the known ids among ``doc_ids``."""
        self._check_open()
        return {i: self.records[i] for i in doc_ids if i in self.records}

    def with_status(self, status: DocStatus) -> list[StatusRecord]:
        """Every record with ``status``, by document id."""
        self._check_open()
        return sorted((r for r in self.records.values() if r.status == status), key=_doc_id)

    def ids_with_status(self, status: DocStatus) -> list[str]:
        """The id of every document with ``status``, ordered."""
        return [r.doc_id for r in self.with_status(status)]

    def counts(self, statuses: Collection[DocStatus] | None = None) -> dict[DocStatus, int]:
        """Number of documents per status, of each of ``statuses`` (every status where
        None), zeros included."""
        self._check_open()
        counts = dict.fromkeys(DocStatus if statuses is None else statuses, 0)
        for record in self.records.values():
            if record.status in counts:
                counts[record.status] += 1
        return counts


def _doc_id(record: StatusRecord) -> str:
    return record.doc_id


class MemoryKeyValueStore(_Closable):
    """Bytes values in one dict per namespace."""

    def __init__(self, data: dict[str, dict[str, bytes]] | None = None) -> None:
        self.data: dict[str, dict[str, bytes]] = {} if data is None else data

    def reopen(self) -> MemoryKeyValueStore:
        """A new store over the same data."""
        return MemoryKeyValueStore(self.data)

    def get_many(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        """Values in the order asked for; ``None`` for missing keys."""
        self._check_open()
        space = self.data.get(namespace, {})
        return [space.get(key) for key in keys]

    def put_many(self, namespace: str, items: Mapping[str, bytes]) -> None:
        """Insert or replace values (``bytes`` or ``bytearray``)."""
        self._check_open()
        for key, value in items.items():
            if not isinstance(value, bytes | bytearray):
                raise InputError(f"value of key {key!r} is {type(value).__name__}, not bytes")
        self.data.setdefault(namespace, {}).update((k, bytes(v)) for k, v in items.items())

    def delete_many(self, namespace: str, keys: Sequence[str]) -> None:
        """Remove keys; missing keys are ignored."""
        self._check_open()
        space = self.data.get(namespace, {})
        for key in keys:
            space.pop(key, None)

    def keys(self, namespace: str) -> Iterator[str]:
        """Keys of ``namespace`` in sorted order."""
        self._check_open()
        return iter(sorted(self.data.get(namespace, {})))
