"""An index's location and its manifest.

An embedded index is a directory (``SCHEMA_VERSION`` 1)::

    DIR/manifest.json        schema version, state (building | complete), config, counts
    DIR/store.sqlite         documents, chunks, ingestion status, extractions, embedding cache
    DIR/graph/               the graph snapshot (CSR arrays, memory-mapped)
    DIR/tables/              entities, descriptions, relations (JSONL) and row maps (.npy)
    DIR/vectors/chunks/      chunk embeddings (id = chunk position)
    DIR/vectors/texts/       embeddings of description and relation texts (deduplicated)
    DIR/bm25/                the BM25 index

The manifest says ``building`` until the last artifact is written; an index in that
state refuses to open for retrieval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quillian.errors import ConfigError, IndexIncompleteError, IndexMissingError, IndexSchemaError

__all__ = ["MANIFEST", "SCHEMA_VERSION", "index_directory", "read_manifest", "write_manifest"]

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
#: Location schemes of server backends; each is chosen by its URL (see the storage factory).
SERVER_SCHEMES = ("postgresql://", "postgres://")


def index_directory(location: str | Path) -> Path:
    """The directory of an embedded index at ``location``; a server URL raises a clear
    error, since no server backend is installed yet."""
    text = str(location)
    if text.startswith(SERVER_SCHEMES):
        raise ConfigError(
            f"{text.split('@')[-1]}: PostgreSQL storage is not available in this version; "
            "index into a directory (the embedded stores)"
        )
    if not text.strip():
        raise ConfigError("the index location is empty")
    return Path(location)


def read_manifest(location: str | Path) -> dict[str, Any]:
    """The manifest of an index, checked for schema version (not for state)."""
    directory = index_directory(location)
    if not directory.is_dir():
        raise IndexMissingError(f"{directory}: no such index directory")
    path = directory / MANIFEST
    if not path.is_file():
        raise IndexMissingError(f"{directory}: not a Quillian index (no {MANIFEST})")
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexIncompleteError(f"{path}: unreadable manifest ({exc})") from exc
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise IndexSchemaError(
            f"{directory}: index schema version {version!r} is newer than this Quillian "
            f"supports ({SCHEMA_VERSION}); upgrade Quillian to open it"
        )
    return manifest


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Replace the manifest atomically."""
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(directory / MANIFEST)
