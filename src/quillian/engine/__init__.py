"""The one composition API the edges use: :class:`Engine` for retrieval and answering,
:func:`index_documents` and :func:`delete_documents` for building indexes."""

from quillian.engine.engine import Engine, EngineOptions
from quillian.engine.indexing import IndexSettings, delete_documents, index_documents, stages_for

__all__ = [
    "Engine",
    "EngineOptions",
    "IndexSettings",
    "delete_documents",
    "index_documents",
    "stages_for",
]
