"""Ingestion: read documents from files and corpora, then chunk and store them resumably."""

from quillian.components.ingestion.checks import document_problem, unpaired_surrogate
from quillian.components.ingestion.pipeline import (
    INFRASTRUCTURE_ERRORS,
    IngestFailure,
    IngestReport,
    ProcessHook,
    ProgressCallback,
    ingest,
    is_document_error,
    per_document,
)
from quillian.components.ingestion.readers import SUFFIXES, OnSkip, markdown_title, read_documents

__all__ = [
    "INFRASTRUCTURE_ERRORS",
    "SUFFIXES",
    "IngestFailure",
    "IngestReport",
    "OnSkip",
    "ProcessHook",
    "ProgressCallback",
    "document_problem",
    "ingest",
    "is_document_error",
    "markdown_title",
    "per_document",
    "read_documents",
    "unpaired_surrogate",
]
