"""Open a complete index for retrieval."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quillian.components.embedding.base import Embedder
from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.keyed import KeyedVectors
from quillian.components.retrieval.triple_store import read_triples
from quillian.errors import (
    ConfigError,
    IndexDamagedError,
    IndexIncompleteError,
    IndexSchemaError,
    InputError,
)
from quillian.index.integrity import (
    FILES,
    QUICK_CHECK_AT_OPEN,
    STORE_DB,
    check_database,
    check_files,
    check_tables_database,
    rebuild_command,
)
from quillian.index.layout import (
    SCHEMA_VERSION,
    generation,
    has_stage,
    is_server_location,
    location_name,
    read_manifest,
    server_backend,
)
from quillian.index.stages import EndpointTextStage, keys_path
from quillian.index.storage import ServerStorage, Storage, open_storage
from quillian.index.tables import StoredTables, load_tables
from quillian.stores.embedded.sqlite import sqlite_rebuild_hint
from quillian.stores.mapped import load_mapped
from quillian.stores.protocols import VectorIndex

__all__ = ["OPEN_ATTEMPTS", "Index", "load_graph", "open_index"]

logger = logging.getLogger(__name__)

#: How many times :func:`open_index` loads an index that another process keeps
#: rewriting under it before it gives up.
OPEN_ATTEMPTS = 3
#: Files beside the stores up to this size have their checksum checked when the index
#: opens (about 1 ms a megabyte); a larger one (the tables database of a big corpus) has
#: its size checked, its checksum by every build that reuses it, and SQLite's own page
#: checks name it damaged where a read finds it so.
HASH_AT_OPEN = QUICK_CHECK_AT_OPEN


@dataclass
class Index:
    """An opened index: its manifest and the read-only retrieval context."""

    directory: Path
    manifest: dict[str, Any]
    context: RetrievalContext


def load_graph(storage: Storage) -> KnowledgeGraph:
    """The index's knowledge graph: the graph store's snapshot and the graph tables."""
    return _load_graph(storage)[0]


def _load_graph(storage: Storage) -> tuple[KnowledgeGraph, StoredTables]:
    store = storage.graph()
    try:
        snapshot = store.snapshot()
    finally:
        store.close()
    return load_tables(storage.directory, snapshot)


def _optional_vectors(vectors: Callable[[str], VectorIndex], name: str) -> VectorIndex | None:
    """The vector collection ``name``, or None for an index built before it existed."""
    try:
        return vectors(name)
    except ConfigError:
        return None


def _pinned(storage: Storage) -> Callable[[str], VectorIndex]:
    """Open a server index's vector collections as copies in memory (an embedded
    index's are memory-mapped files a build replaces, never rewrites: kept as they are)."""
    if not isinstance(storage, ServerStorage):
        return storage.vectors
    pinned = server_backend().PinnedVectors
    return lambda name: pinned.read(name, storage.vectors(name))


def _collections(storage: Storage, pin_vectors: bool) -> Callable[[str], VectorIndex]:
    """Open each vector collection as the retrievers read it, by position: one the build
    keyed by content (its keys saved by position, :func:`keys_path`) through
    :class:`KeyedVectors`, searched where it lies, as a snapshot (a server collection
    keeps the vectors a later build deletes until no opened index can still name them,
    see :class:`~quillian.stores.postgres.vectors.PgVectorIndex`); one written by
    position (an index built before keys, a method's own collection) as it is, or, with
    ``pin_vectors``, copied into memory on a server, as a build rewrites it in place."""
    plain = _pinned(storage) if pin_vectors else storage.vectors

    def open_collection(name: str) -> VectorIndex:
        path = keys_path(storage.directory, name)
        if not path.exists():
            return plain(name)
        return KeyedVectors(storage.vectors(name, snapshot=True), load_mapped(path))

    return open_collection


def open_index(location: str | Path, embedder: Embedder, *, pin_vectors: bool = False) -> Index:
    """Open a complete index for retrieval; ``embedder`` must match the one it was built
    with. ``pin_vectors`` reads a server index's positional vector collections (an
    index built before keyed collections, a method's own) into memory now
    (:class:`~quillian.stores.postgres.pinned.PinnedVectors`), so the index answers
    from this build while another process rebuilds them in place (a server replica);
    keyed collections are searched on the server in any case (see :func:`_collections`).

    Every file is loaded (or memory-mapped) here, then the manifest is read again: a
    build writes the manifest (a new :func:`~quillian.index.layout.generation`) before
    it replaces any file, so an unchanged generation means every file loaded belongs to
    one build. A changed one means a writer began meanwhile: the load is tried again
    (the index then says ``building`` and refuses to open, as it does to any reader
    while a build runs). What is loaded stays valid while later builds replace the
    files, so an opened index serves on from the build it was opened at. A server
    index's local cache is read under its reader lock
    (:func:`~quillian.index.layout.reader_lock`), so no build on this machine rewrites it
    meanwhile; while one does, the index is not opened (it is being built)."""
    for _ in range(OPEN_ATTEMPTS):
        manifest = _complete_manifest(location, embedder)
        try:
            index = _load(location, manifest, embedder, pin_vectors)
        except IndexDamagedError:
            if generation(read_manifest(location)) != generation(manifest):
                continue  # a build replaced files under the check: load its index
            raise
        now = read_manifest(location)
        if generation(now) == generation(manifest) and now.get("state") == "complete":
            return index
    raise IndexIncompleteError(
        f"{location_name(location)}: another process rewrote the index each of the "
        f"{OPEN_ATTEMPTS} times it was opened; open it again once that build finishes"
    )


def _complete_manifest(location: str | Path, embedder: Embedder) -> dict[str, Any]:
    """The manifest of a complete index built with ``embedder``'s model."""
    manifest = read_manifest(location)
    if manifest.get("state") != "complete":
        raise IndexIncompleteError(
            f"{location_name(location)}: index is incomplete (state {manifest.get('state')!r}); "
            "rerun `quillian index` to resume the build"
        )
    if manifest.get("schema_version") != SCHEMA_VERSION:
        name = location_name(location)
        raise IndexSchemaError(
            f"{name}: index schema version {manifest.get('schema_version')!r} is older than "
            f"this Quillian reads ({SCHEMA_VERSION}); rerun `{rebuild_command(name)}` to "
            "convert it (its stored extractions are reused)"
        )
    built_with = manifest.get("config", {}).get("embedder")
    if built_with and built_with != embedder.model_id:
        raise InputError(
            f"index was built with embedder {built_with!r} but {embedder.model_id!r} was given",
            path=location_name(location),
        )
    return manifest


def _check_files(storage: Storage, manifest: dict[str, Any], name: str) -> None:
    """Check the files the manifest records; a server index's cached copies found
    damaged are fetched again from the server first. A file this process wrote or read
    whole, and whose stat stamp has not changed since, is taken by the digest it
    remembered (a served engine opening the build its update just wrote: reading the
    files again would read the page cache's copy of what it wrote: 24 MB at 100k
    passages); the copies fetched again after damage are read."""
    try:
        check_files(storage.directory, manifest, name, hash_up_to=HASH_AT_OPEN, known=True)
    except IndexDamagedError as exc:
        if not isinstance(storage, ServerStorage):
            raise
        logger.warning("%s; fetching the cached files again from the server", exc)
        server_backend().refetch_files(
            storage.workspace, storage.directory, list(manifest.get(FILES) or ())
        )
        check_files(storage.directory, manifest, name, hash_up_to=HASH_AT_OPEN)


def _missing_chunks(location: str | Path, missing: int) -> IndexDamagedError:
    """The error for ``missing`` chunks the graph names but the document store lacks."""
    reason = f"{missing} chunk(s) the graph names are missing"
    if is_server_location(location):
        name = location_name(location)
        return IndexDamagedError(name, reason, rebuild=rebuild_command(name))
    db = Path(location) / STORE_DB
    return IndexDamagedError(str(db), reason, rebuild=sqlite_rebuild_hint(db), name=STORE_DB)


def _load(
    location: str | Path, manifest: dict[str, Any], embedder: Embedder, pin_vectors: bool = False
) -> Index:
    """The index at ``location`` with every artifact loaded or memory-mapped, each file
    checked against the size and checksum recorded when it was written (the largest, a
    vector collection's, on its first search) and an embedded index's database by
    SQLite's ``quick_check`` where it is small and was written since the last build
    recorded it (:func:`~quillian.index.integrity.check_database`, and likewise its graph
    tables' database where a build patches it where it is): a damaged one raises
    :class:`~quillian.errors.IndexDamagedError` naming it."""
    if not is_server_location(location):
        check_database(Path(location))
        check_tables_database(Path(location))
    with open_storage(location) as storage:
        if isinstance(storage, ServerStorage) and not storage.synced:
            raise IndexIncompleteError(
                f"{location_name(location)}: a build on this machine is writing the index's "
                "local files; open it again once that build finishes"
            )
        _check_files(storage, manifest, location_name(location))
        kg, stored = _load_graph(storage)
        if (missing := len(kg.chunk_ids) - storage.documents.count_chunks()) > 0:
            raise _missing_chunks(location, missing)
        tables = storage.directory / "tables"
        vectors = _collections(storage, pin_vectors)
        context = RetrievalContext(
            kg=kg,
            embedder=embedder,
            chunk_vectors=vectors("chunks"),
            text_vectors=vectors("texts"),
            description_rows=load_mapped(tables / "description_rows.npy"),
            relation_rows=load_mapped(tables / "relation_rows.npy"),
            chunk_titles=stored.chunk_titles,
            chunk_texts=stored.chunk_texts,
            bm25=BM25Index.load(storage.directory / "bm25"),
            triples=read_triples(storage.kv, vectors, kg.chunk_ids),
            directory=storage.directory,
            endpoint_vectors=(
                _optional_vectors(vectors, "endpoints")
                if has_stage(manifest, EndpointTextStage.name)
                else None
            ),
        )
    return Index(storage.directory, manifest, context)
