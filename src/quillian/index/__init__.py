"""Indexes: the on-disk layout and manifest, the storage factory, the build as ordered
stages, and opening an index for retrieval."""

from quillian.index.build import BuildReport, build_index, delete_documents
from quillian.index.layout import SCHEMA_VERSION, read_manifest
from quillian.index.open import Index, load_graph, open_index
from quillian.index.stages import DEFAULT_STAGES, BuildStage, BuildState
from quillian.index.storage import Storage, open_storage

__all__ = [
    "DEFAULT_STAGES",
    "SCHEMA_VERSION",
    "BuildReport",
    "BuildStage",
    "BuildState",
    "Index",
    "Storage",
    "build_index",
    "delete_documents",
    "load_graph",
    "open_index",
    "open_storage",
    "read_manifest",
]
