"""An index's location and its manifest.

An embedded index is a directory (``SCHEMA_VERSION`` 2; 1 kept the tables as JSON Lines)::

    DIR/manifest.json        schema version, state (building | complete), config, counts,
                             size and checksum of each file under tables/ and bm25/
    DIR/store.sqlite         documents, chunks (long texts compressed), ingestion status,
                             extractions and their linking state, the embedding cache
                             (empty after a build), the log of the documents changed
                             since the last build; packed by a build that wrote it whole
    DIR/graph_resolution.sqlite  the graph's entity resolution, patched by each build,
                             with its log of what changed since the tables (local to
                             the machine); beside it, graph_resolution.sqlite.columns:
                             the tables' integer columns for the next patch (local too)
    DIR/text_keys_by_id.npz  the vector keys of the graph's texts by text id, so a build
                             hashes only texts it has not met (a cache, local too)
    DIR/chunk_keys_by_id.npz  the chunks' vector keys by position, tagged with the build
                             and the chunk table they follow: carried to the next table
                             through where its rows went (the catalog's moves), else
                             served by chunk id, so an update reads only the texts of
                             chunks added or retitled (a cache, local too)
    DIR/chunk_catalog.npz    every processed chunk's id, document, position and title,
                             patched from the store's change log, so an update reads
                             only the changed documents' chunks, and says where the last
                             table's rows went (a cache, local too)
    DIR/checked.json         the stat stamps of the two databases as the last build left
                             them (one unchanged since is not checked whole again) and
                             the graph tables' stamp (with their digest where they are
                             copied) (:mod:`quillian.index.integrity`; local too)
    DIR/graph/               the graph snapshot (CSR arrays, memory-mapped)
    DIR/tables/              graph.sqlite (entities, descriptions, relations, chunks, each
                             text once, a chunk's compressed where long; rows keyed by ids
                             an update does not move, patched where it is by each
                             update, in SQLite's write-ahead-log mode, an opened index
                             reading its snapshot; in a PostgreSQL index's cache, patched
                             in a copy swapped in with the folder), *_order.npy giving
                             each position's row, and arrays derived from the graph
                             (.npy, each replaced by a rename)
    DIR/vectors/chunks/      chunk embeddings, keyed by content (tables/chunk_keys.npy
                             gives each chunk position's key)
    DIR/vectors/texts/       embeddings of description and relation texts (deduplicated)
    DIR/bm25/                the BM25 index: segments of term frequencies by chunk id, a
                             row -> chunk position map per build (carried through the
                             catalog's moves where it maps the table they start from),
                             manifest.json naming them (an older index's bm25s files
                             open too)

The manifest says ``building`` until the last artifact is written; an index in that
state refuses to open for retrieval. Every write of the manifest raises its
``generation``; a build writes it (``building``) before it touches any other file, and
replaces files rather than rewriting them, so a reader that finds the generation
unchanged after loading the index loaded one build's files, and one already holding an
index keeps a consistent view while another process rebuilds it
(:func:`~quillian.index.open.open_index`). Every stored file carries a checksum, in the
manifest or its store's own record, checked when it is read (:mod:`quillian.index.integrity`).

A PostgreSQL index (``postgresql://user@host:port/db?workspace=NAME``, extra
``postgres``) keeps the same content in one schema: documents, status, key-value data,
vectors and graph in tables, the manifest in ``quillian_meta`` and the other files
(``tables/``, ``bm25/``) in its ``files`` table, mirrored in a local cache directory
that plays the part of ``DIR`` above (see :mod:`quillian.stores.postgres`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from quillian.errors import (
    ConfigError,
    IndexIncompleteError,
    IndexMissingError,
    IndexSchemaError,
    MissingExtraError,
)
from quillian.index.integrity import FILES, record_index_files
from quillian.stores.locations import location_name as _location_name

__all__ = [
    "GENERATION",
    "MANIFEST",
    "SCHEMA_VERSION",
    "generation",
    "has_manifest",
    "has_stage",
    "index_directory",
    "index_location",
    "is_server_location",
    "local_directory",
    "location_name",
    "read_manifest",
    "reader_lock",
    "server_backend",
    "write_manifest",
    "writer_lock",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 2
MANIFEST = "manifest.json"
#: The manifest key listing the build stages that made the index.
STAGES = "stages"
#: Location schemes of server backends; each is chosen by its URL (see the storage factory).
SERVER_SCHEMES = ("postgresql://", "postgres://")
#: The file whose lock a build or a delete holds (:func:`writer_lock`).
WRITER_LOCK = ".writer.lock"
#: The manifest key counting its writes (:func:`write_manifest`).
GENERATION = "generation"
#: The local directories whose writer lock the current thread holds.
_writing = threading.local()


def generation(manifest: Mapping[str, Any]) -> int:
    """How many times the manifest was written (0 for one written before the count)."""
    value = manifest.get(GENERATION, 0)
    return value if isinstance(value, int) else 0


def has_stage(manifest: Mapping[str, Any], stage: str) -> bool:
    """Whether the index of ``manifest`` was built with the stage named ``stage`` (the
    manifest's stage list is the record of an optional stage such as the endpoint
    texts)."""
    return stage in manifest.get(STAGES, ())


def is_server_location(location: object) -> bool:
    """Whether ``location`` names a server backend (a URL) rather than a directory."""
    return isinstance(location, str) and location.startswith(SERVER_SCHEMES)


def index_location(location: str | Path) -> str | Path:
    """``location`` as the stores take it: a server URL unchanged, else a path."""
    if is_server_location(location):
        return str(location)
    return index_directory(location)


def local_directory(location: str | Path) -> Path:
    """Where the index's files are on this machine: an embedded index's directory, or a
    server index's local cache."""
    if is_server_location(location):
        cache: Path = server_backend().parse_location(str(location)).cache
        return cache
    return index_directory(location)


def location_name(location: str | Path) -> str:
    """``location`` for messages, log lines and traces: a server URL without its
    password or connection parameters (the one renderer,
    :func:`quillian.stores.locations.location_name`, which needs no driver)."""
    return _location_name(location)


@contextmanager
def writer_lock(location: str | Path, *, create: bool = True) -> Iterator[None]:
    """Hold the index's writer lock while a build or a delete writes it: an exclusive
    ``flock`` on :data:`WRITER_LOCK` in its local directory and, for a server index,
    the workspace's writer lease on the server too (processes on other machines hold
    their own caches, so only the server can make them take turns; the lease outlives
    a server restart, see :mod:`quillian.stores.postgres.lease`). Two processes
    writing one index at once interleave the stages' files: two ``bench qa`` runs
    started together on one index left its graph without a snapshot. A second writer
    waits, and says so once in the log; readers do not take the lock. With ``create``
    false, a directory that does not exist is not made (there is then nothing to
    write)."""
    with ExitStack() as held:
        if is_server_location(location):
            backend = server_backend()
            server = backend.parse_location(str(location))
            waited = partial(_say_waited, location)
            held.enter_context(backend.writer_lock(server, waited, create=create))
        directory = local_directory(location)
        mine = _held_here()
        key = _key(directory)
        mine.add(key)
        held.callback(mine.discard, key)
        if not create and not directory.is_dir():
            yield
            return
        directory.mkdir(parents=True, exist_ok=True)  # another writer may make it first
        handle = held.enter_context((directory / WRITER_LOCK).open("a+b"))
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say_waited(location)
            fcntl.flock(handle, fcntl.LOCK_EX)
        held.callback(fcntl.flock, handle, fcntl.LOCK_UN)
        yield


@contextmanager
def reader_lock(directory: Path) -> Iterator[bool]:
    """While held, no build or delete writes ``directory`` (a server index's local
    cache, which readers bring up to date and read): a shared lock on
    :data:`WRITER_LOCK`, taken without waiting. Yields whether the directory may be
    read and synchronised: true when the lock was taken or the calling thread is the
    writer itself; false while another writer holds it (its files are then a build in
    progress, neither the last build's nor the next's)."""
    if _key(directory) in _held_here():
        yield True
        return
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / WRITER_LOCK).open("a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _held_here() -> set[str]:
    """The directories whose writer lock this thread holds."""
    held: set[str] | None = getattr(_writing, "directories", None)
    if held is None:
        held = _writing.directories = set()
    return held


def _key(directory: Path) -> str:
    return str(directory.absolute())


def _say_waited(location: str | Path) -> None:
    logger.warning(
        "another process is writing the index at %s; waiting for it to finish",
        location_name(location),
    )


def index_directory(location: str | Path) -> Path:
    """The directory of an embedded index at ``location`` (a server URL is refused:
    its files live in a cache directory the storage factory picks)."""
    text = str(location)
    if is_server_location(text):
        raise ConfigError(f"{location_name(text)}: a server location, not a directory")
    if not text.strip():
        raise ConfigError("the index location is empty")
    return Path(location)


def server_backend() -> ModuleType:
    """The PostgreSQL backend package, imported on first use; names the extra to install
    when its driver is missing."""
    try:
        from quillian.stores import postgres
    except ImportError as exc:
        raise MissingExtraError(exc.name or "psycopg", "postgres") from exc
    return postgres


def has_manifest(location: str | Path) -> bool:
    """Whether an index (complete or not) is at ``location``."""
    if is_server_location(location):
        return _server_manifest(str(location)) is not None
    return (index_directory(location) / MANIFEST).is_file()


def manifest_if_any(location: str | Path) -> dict[str, Any]:
    """The manifest of the index at ``location``, checked for schema version, or an
    empty one where there is no index: on a server, one read of the workspace where
    :func:`has_manifest` then :func:`read_manifest` take two (each a connection)."""
    if is_server_location(location):
        manifest = _server_manifest(str(location))
        return {} if manifest is None else _check_version(manifest, location_name(location))
    return read_manifest(location) if has_manifest(location) else {}


def read_manifest(location: str | Path) -> dict[str, Any]:
    """The manifest of an index, checked for schema version (not for state)."""
    if is_server_location(location):
        manifest = _server_manifest(str(location))
        name = location_name(location)
        if manifest is None:
            raise IndexMissingError(f"{name}: not a Quillian index (no manifest in the workspace)")
        return _check_version(manifest, name)
    directory = index_directory(location)
    if not directory.is_dir():
        raise IndexMissingError(f"{directory}: no such index directory")
    path = directory / MANIFEST
    if not path.is_file():
        raise IndexMissingError(f"{directory}: not a Quillian index (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexIncompleteError(f"{path}: unreadable manifest ({exc})") from exc
    return _check_version(manifest, str(directory))


def write_manifest(location: str | Path, manifest: dict[str, Any]) -> None:
    """Replace the manifest atomically, one :data:`GENERATION` past the stored one (an
    embedded index's directory is created; a server workspace is created, and its cache
    directory gets a copy). A manifest saying ``complete`` records the size and checksum
    of the files beside the stores (:mod:`quillian.index.integrity`). The writer holds
    :func:`writer_lock`, so no other write comes between reading the stored generation
    and replacing it."""
    directory = local_directory(location)
    if manifest.get("state") == "complete":  # the files are final: record them
        manifest = {**manifest, FILES: record_index_files(directory)}
    if is_server_location(location):
        backend = server_backend()
        with backend.Workspace(str(location)) as workspace:
            stored = backend.read_manifest(workspace) if workspace.exists else None
            manifest = _next_generation(manifest, stored)
            backend.write_manifest(workspace, manifest)
    else:
        manifest = _next_generation(manifest, _stored_manifest(directory / MANIFEST))
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(directory / MANIFEST)


def _stored_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at ``path`` as stored, or None where there is none readable."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stored if isinstance(stored, dict) else None


def _next_generation(manifest: dict[str, Any], stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """``manifest`` one generation past both the stored manifest and its own (a manifest
    made anew for a location that held an index does not count down)."""
    before = max(generation(stored or {}), generation(manifest))
    return {**manifest, GENERATION: before + 1}


def _server_manifest(location: str) -> dict[str, Any] | None:
    backend = server_backend()
    with backend.Workspace(location, create=False) as workspace:
        if not workspace.exists:
            return None
        manifest: dict[str, Any] | None = backend.read_manifest(workspace)
        return manifest


def _check_version(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise IndexSchemaError(
            f"{name}: index schema version {version!r} is newer than this Quillian "
            f"supports ({SCHEMA_VERSION}); upgrade Quillian to open it"
        )
    return manifest
