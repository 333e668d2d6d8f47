"""The one composition API the edges use: :class:`Engine` for retrieval and answering,
:func:`index_documents` and :func:`delete_documents` for building indexes."""

from quillian.engine.engine import Engine, EngineOptions
from quillian.engine.indexing import IndexSettings, delete_documents, index_documents, stages_for
from quillian.engine.ray_indexing import RayOptions, index_on_ray

__all__ = [
    "Engine",
    "EngineOptions",
    "IndexSettings",
    "RayOptions",
    "delete_documents",
    "index_documents",
    "index_on_ray",
    "stages_for",
]
