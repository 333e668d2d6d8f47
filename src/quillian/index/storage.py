"""The storage factory: every store of an index is created here, from its location.

A directory path selects the embedded stores (SQLite for documents, status and
key-value data; numpy files for vectors; CSR arrays for the graph), which need no
service. ``postgresql://...`` is reserved for the server backend. Callers receive the
stores through the protocols of :mod:`quillian.stores.protocols` and never construct a
backend themselves.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from quillian.index.layout import index_directory
from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.embedded.sqlite import (
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
)
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.stores.protocols import (
    DocumentStore,
    GraphStore,
    KeyValueStore,
    StatusStore,
    VectorIndex,
)

__all__ = ["Storage", "open_storage"]

#: The SQLite database of an embedded index.
STORE_DB = "store.sqlite"


@dataclass
class Storage:
    """The stores of one index. Vector collections and the graph are opened on demand;
    ``fresh=True`` starts them empty (a build rewrites them whole)."""

    directory: Path
    documents: DocumentStore
    status: StatusStore
    kv: KeyValueStore

    def vectors(self, name: str, dim: int | None = None, *, fresh: bool = False) -> VectorIndex:
        """The vector collection ``name`` (the default stages write ``chunks``, and
        ``texts`` for description and relation texts; a method's stage may add its own)."""
        path = self.directory / "vectors" / name
        if fresh:
            shutil.rmtree(path, ignore_errors=True)
        return ExactVectorIndex(path, dim)

    def graph(self, *, fresh: bool = False) -> GraphStore:
        """The graph store, whose :meth:`~GraphStore.snapshot` the retrievers read."""
        path = self.directory / "graph"
        if fresh:
            shutil.rmtree(path, ignore_errors=True)
        return CSRGraphStore(path)

    def close(self) -> None:
        for store in (self.documents, self.status, self.kv):
            store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_storage(location: str | Path, *, create: bool = False) -> Storage:
    """The stores of the index at ``location``; ``create`` makes an embedded index's
    directory when it does not exist."""
    directory = index_directory(location)
    if create:
        directory.mkdir(parents=True, exist_ok=True)
    db = directory / STORE_DB
    return Storage(
        directory,
        documents=SqliteDocumentStore(db),
        status=SqliteStatusStore(db),
        kv=SqliteKeyValueStore(db),
    )
