"""The storage factory: every store of an index is created here, from its location.

A directory path selects the embedded stores (SQLite for documents, status and
key-value data; numpy files for vectors; CSR arrays for the graph), which need no
service. ``postgresql://...?workspace=NAME`` selects the PostgreSQL stores (extra
``postgres``): the same protocols over one schema, with the index's files (graph
tables, BM25, the graph snapshot) in a local cache directory that is brought up to date
from the server when the storage opens and sent back when it closes. Callers receive
the stores through the protocols of :mod:`quillian.stores.protocols` and never
construct a backend themselves.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from quillian.errors import ConfigError, IndexMissingError, StoreUnavailableError
from quillian.index.artifacts import remove_aside
from quillian.index.layout import (
    index_directory,
    is_server_location,
    location_name,
    reader_lock,
    server_backend,
)
from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.embedded.sqlite import (
    SqliteChangeLog,
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
)
from quillian.stores.embedded.vectors import DTYPES as VECTOR_DTYPES
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.stores.protocols import (
    ChangeLog,
    DocumentStore,
    GraphStore,
    KeyValueStore,
    StatusStore,
    VectorIndex,
)

__all__ = [
    "DEFAULT_VECTOR_DTYPE",
    "VECTOR_DTYPES",
    "WORKSPACE_VECTOR_DTYPE",
    "ServerStorage",
    "Storage",
    "check_vector_dtype",
    "open_storage",
    "vector_dtype",
]

#: The SQLite database of an embedded index.
STORE_DB = "store.sqlite"
#: What a new folder index stores its vectors in: each vector's int8 codes and scale,
#: about half of float16's bytes on disk and in the page cache, searched as read back
#: (scores in float32, the best candidates again in float64). ``research/vector_dtypes.py
#: --dtypes float16 int8`` pairs it with float16 on the bench's questions: no change a
#: paired test calls significant (docs/scale.md, stop 80).
DEFAULT_VECTOR_DTYPE = "int8"
#: What a new PostgreSQL workspace stores its vectors in: pgvector's ``halfvec``
#: (``research/vector_dtypes.py --postgres`` pairs it with float32's ``vector``).
#: pgvector has no int8 type: a workspace stores float16 or float32.
WORKSPACE_VECTOR_DTYPE = "float16"


@dataclass
class Storage:
    """The stores of one index. Vector collections and the graph are opened on demand;
    ``fresh=True`` starts them empty (a build rewrites them whole). ``changes``: the log
    of the document and status stores' changes, where the backend keeps one."""

    directory: Path
    documents: DocumentStore
    status: StatusStore
    kv: KeyValueStore
    changes: ChangeLog | None = field(default=None, kw_only=True)
    vector_dtype: str | None = field(default=None, kw_only=True)
    """What the vector collections store, set by a build from the index's settings: a
    collection stored otherwise is refused (and a build writes it anew). None: as
    stored, float32 for a new collection."""

    def vectors(
        self, name: str, dim: int | None = None, *, fresh: bool = False, snapshot: bool = False
    ) -> VectorIndex:
        """The vector collection ``name`` (the default stages write ``chunks``, and
        ``texts`` for description and relation texts; a method's stage may add its own).
        ``snapshot``: opened for an index read while later builds may write the
        collection (an embedded collection is a mapped generation in any case; a
        server one then also serves the vectors deleted but not yet purged)."""
        path = self.directory / "vectors" / name
        if fresh:
            shutil.rmtree(path, ignore_errors=True)
        return ExactVectorIndex(path, dim, dtype=self.vector_dtype)

    #: Whether a build patches the graph tables' database where it is, in SQLite's
    #: write-ahead-log mode (its readers, all on this machine, each hold a read
    #: transaction of it), rather than in a copy swapped in with its folder
    #: (:func:`~quillian.index.state_tables.save_state_tables`).
    tables_in_place: ClassVar[bool] = True

    def graph(self, *, fresh: bool = False) -> GraphStore:
        """The graph store, whose :meth:`~GraphStore.snapshot` the retrievers read."""
        path = self.directory / "graph"
        if fresh:
            remove_aside(path)
        return CSRGraphStore(path)

    def release_space(self, pack: bool = False) -> None:
        """Give back to the file system the space a build freed in the index's database
        (its emptied caches), and where ``pack`` (a build that wrote every chunk) the
        space its part-full pages take (SQLite's ``VACUUM``); a server reclaims its
        own."""
        if isinstance(self.kv, SqliteKeyValueStore):
            self.kv.release_free_pages()
            if pack:
                self.kv.pack()

    def close(self) -> None:
        for store in (self.documents, self.status, self.kv, self.changes):
            if store is not None:
                store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass
class ServerStorage(Storage):
    """The stores of an index in a PostgreSQL workspace; ``directory`` is the local
    cache of its files, sent back to the server by :meth:`close`.

    ``synced`` says whether the cache was brought up to date when the storage opened:
    not while a build or delete on this machine writes it (its files are that build's
    work in progress, so they are neither fetched over nor sent back; the database
    stores serve as ever). While a synced storage is open, no local build writes the
    cache.

    The cache's tables are patched where they are, as a folder index's are: a replica
    fetches a changed database into a copy of its folder that it swaps in whole, never
    renaming a file over one that SQLite's write-ahead log reads, and a push sends the
    database as its readers see it where theirs kept the log from being copied back
    (:mod:`~quillian.stores.postgres.files`)."""

    workspace: Any = field(kw_only=True)
    synced: bool = field(default=True, kw_only=True)
    _held: ExitStack = field(default_factory=ExitStack, kw_only=True, repr=False)

    def vectors(
        self, name: str, dim: int | None = None, *, fresh: bool = False, snapshot: bool = False
    ) -> VectorIndex:
        index: VectorIndex = server_backend().PgVectorIndex(
            self.workspace, name, dim, fresh=fresh, dtype=self.vector_dtype, retired=snapshot
        )
        return index

    def graph(self, *, fresh: bool = False) -> GraphStore:
        store: GraphStore = server_backend().PgGraphStore(
            self.workspace, self.directory / "graph", fresh=fresh
        )
        return store

    def close(self, *, push: bool = True) -> None:
        """Send the changed files to the server (unless not to ``push``) and close."""
        if self.workspace is None:
            return
        try:
            if push and self.synced:
                server_backend().push_files(self.workspace, self.directory)
        finally:
            try:
                super().close()
                self.workspace.close()
                self.workspace = None
            finally:
                self._held.close()

    def __exit__(self, *exc_info: object) -> None:
        # the server is gone: sending the files would wait out the deadline again, and
        # a rerun rebuilds them (the manifest still says the build is not complete)
        self.close(push=not isinstance(exc_info[1], StoreUnavailableError))


def vector_dtype(
    asked: str | None, built: dict[str, Any] | None, location: str | Path | None = None
) -> str:
    """What an index stores its vectors in: ``asked``, else what it was built with
    (``built``: its manifest's config, None for a new index; an index made before the
    setting was recorded holds float32), else the default of ``location``'s backend:
    :data:`DEFAULT_VECTOR_DTYPE` in a folder (also where no location is given),
    :data:`WORKSPACE_VECTOR_DTYPE` in a PostgreSQL workspace."""
    if asked is not None and asked not in VECTOR_DTYPES:
        raise ConfigError(f"vector dtype must be one of {', '.join(VECTOR_DTYPES)}, got {asked!r}")
    if asked is not None:
        return asked
    if built is not None:
        return str(built.get("vector_dtype", "float32"))
    if location is not None and is_server_location(location):
        return WORKSPACE_VECTOR_DTYPE
    return DEFAULT_VECTOR_DTYPE


def check_vector_dtype(location: str | Path, dtype: str) -> None:
    """Refuse ``dtype`` where ``location``'s backend cannot store it (int8 on a server,
    float16 on one whose pgvector predates ``halfvec``), before a build writes its
    manifest."""
    if not is_server_location(location):
        return
    if dtype == "int8":
        raise ConfigError(
            f"{location_name(location)}: a PostgreSQL workspace stores vectors in float16 or"
            " float32 (pgvector has no int8 type); int8 is for a folder index"
        )
    if dtype == "float16":
        server_backend().check_vector_dtype(str(location), dtype)


def open_storage(location: str | Path, *, create: bool = False) -> Storage:
    """The stores of the index at ``location``; ``create`` makes an embedded index's
    directory, or a server workspace, when it does not exist."""
    if is_server_location(location):
        return _open_server(str(location), create)
    directory = index_directory(location)
    if create:
        directory.mkdir(parents=True, exist_ok=True)
    db = directory / STORE_DB
    return Storage(
        directory,
        documents=SqliteDocumentStore(db),
        status=SqliteStatusStore(db),
        kv=SqliteKeyValueStore(db),
        changes=SqliteChangeLog(db),
    )


def _open_server(location: str, create: bool) -> ServerStorage:
    backend = server_backend()
    workspace = backend.Workspace(location, create=create)
    held = ExitStack()
    try:
        if not workspace.exists:
            raise IndexMissingError(f"{workspace.name}: no such workspace")
        cache = workspace.location.cache
        synced = held.enter_context(reader_lock(cache))
        if synced:
            backend.pull_files(workspace, cache)
        return ServerStorage(
            cache,
            documents=backend.PgDocumentStore(workspace),
            status=backend.PgStatusStore(workspace),
            kv=backend.PgKeyValueStore(workspace),
            changes=backend.PgChangeLog(workspace),
            workspace=workspace,
            synced=synced,
            _held=held,
        )
    except BaseException:
        held.close()
        workspace.close()
        raise
