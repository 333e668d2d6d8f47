"""Ingestion: read documents from files and corpora, then chunk and store them resumably."""

from quillian.components.ingestion.pipeline import (
    IngestFailure,
    IngestReport,
    ProcessHook,
    ProgressCallback,
    ingest,
    per_document,
)
from quillian.components.ingestion.readers import SUFFIXES, OnSkip, markdown_title, read_documents

__all__ = [
    "SUFFIXES",
    "IngestFailure",
    "IngestReport",
    "OnSkip",
    "ProcessHook",
    "ProgressCallback",
    "ingest",
    "markdown_title",
    "per_document",
    "read_documents",
]
