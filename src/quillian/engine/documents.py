"""What an index holds, document by document: the listing an edge pages through, and
the settings to add more documents the way the index was built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quillian.components.embedding.factory import embedder_name
from quillian.engine.indexing import IndexSettings
from quillian.errors import ConfigError
from quillian.index import read_manifest
from quillian.index.storage import open_storage
from quillian.stores.protocols import DocStatus, StatusRecord
from quillian.types import Document

__all__ = [
    "DocumentInfo",
    "DocumentPage",
    "DocumentText",
    "forget_unfinished",
    "get_document",
    "known_documents",
    "list_documents",
    "settings_of",
]


@dataclass(frozen=True)
class DocumentInfo:
    """One document of an index and where its ingestion stands."""

    doc_id: str
    title: str
    source: str
    status: str
    error: str = ""
    chunks: int = 0
    characters: int = 0


@dataclass(frozen=True)
class DocumentText:
    """A stored document whole: its text and its chunks' ids, in order."""

    info: DocumentInfo
    text: str
    chunk_ids: list[str]


@dataclass(frozen=True)
class DocumentPage:
    """``documents`` from ``offset``, of ``total`` in the index (ordered by id)."""

    total: int
    offset: int
    documents: list[DocumentInfo]


def list_documents(location: str | Path, offset: int = 0, limit: int = 50) -> DocumentPage:
    """Documents ordered by id, ``limit`` from ``offset``, each with its status; a failed
    document (never stored) still appears, with its error."""
    if offset < 0 or limit <= 0:
        raise ConfigError(f"offset must be >= 0 and limit > 0, got {offset}, {limit}")
    with open_storage(location) as storage:
        records: list[StatusRecord] = [
            record for status in DocStatus for record in storage.status.with_status(status)
        ]
        records.sort(key=lambda r: r.doc_id)
        page = records[offset : offset + limit]
        stored = storage.documents.get_documents([r.doc_id for r in page])
        documents = []
        for record, doc in zip(page, stored, strict=True):
            chunks = storage.documents.chunks_of(record.doc_id) if doc is not None else []
            documents.append(_info(record, doc, len(chunks)))
    return DocumentPage(len(records), offset, documents)


def get_document(location: str | Path, doc_id: str) -> DocumentText | None:
    """The document ``doc_id`` with its status, text and chunks; None if unknown."""
    with open_storage(location) as storage:
        record = storage.status.get_status([doc_id]).get(doc_id)
        if record is None:
            return None
        (doc,) = storage.documents.get_documents([doc_id])
        chunks = storage.documents.chunks_of(doc_id) if doc is not None else []
    info = _info(record, doc, len(chunks))
    return DocumentText(info, doc.text if doc is not None else "", [c.id for c in chunks])


def _info(record: StatusRecord, doc: Document | None, chunks: int) -> DocumentInfo:
    """A document's listing entry from its status record and (when stored) the document."""
    return DocumentInfo(
        record.doc_id,
        doc.title if doc is not None else "",
        record.source or (doc.source if doc is not None else ""),
        str(record.status),
        record.error,
        chunks,
        len(doc.text) if doc is not None else 0,
    )


def settings_of(location: str | Path) -> IndexSettings:
    """The build settings recorded in the index's manifest (chunker, extractor, embedder
    and methods), so documents added later are processed like the first ones."""
    config = read_manifest(location).get("config", {})
    return IndexSettings(
        chunker=str(config.get("chunker", "passage")),
        chunk_size=int(config.get("chunk_size", IndexSettings.chunk_size)),
        overlap=int(config.get("overlap", IndexSettings.overlap)),
        extractor=str(config.get("extractor", "spacy")),
        embedder=embedder_name(config),
        methods=tuple(config.get("methods", ())),
    )


def forget_unfinished(location: str | Path, doc_ids: Sequence[str]) -> list[str]:
    """Forget the status of those of ``doc_ids`` still pending or processing (a stopped
    ingestion's remainder, never stored); returns their ids."""
    with open_storage(location) as storage:
        records = storage.status.get_status(list(doc_ids))
        unfinished = [
            doc_id
            for doc_id, record in records.items()
            if record.status in (DocStatus.PENDING, DocStatus.PROCESSING)
        ]
        storage.status.delete(unfinished)
    return unfinished


def known_documents(location: str | Path, doc_ids: Sequence[str]) -> list[str]:
    """Those of ``doc_ids`` the index stores (or records as failed)."""
    with open_storage(location) as storage:
        known = storage.status.get_status(list(doc_ids))
    return [d for d in doc_ids if d in known]
