"""The embedded store's change log: the contract, and writes of a process that opened
no log (its triggers live in the file) logged all the same."""

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from quillian.stores.embedded.sqlite import (
    SqliteChangeLog,
    SqliteDocumentStore,
    SqliteStatusStore,
)
from quillian.stores.protocols import DocStatus
from quillian.testing.contracts import ChangeLogContract
from quillian.types import Chunk


class TestSqliteChangeLog(ChangeLogContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteChangeLog]:
        with SqliteChangeLog(tmp_path / "store.sqlite") as log:
            yield log

    @pytest.fixture
    def writers(
        self, store: SqliteChangeLog
    ) -> Iterator[tuple[SqliteDocumentStore, SqliteStatusStore]]:
        with SqliteDocumentStore(store.path) as docs, SqliteStatusStore(store.path) as status:
            yield docs, status

    def reopen(self, store: SqliteChangeLog) -> SqliteChangeLog:  # type: ignore[override]
        store.close()
        return SqliteChangeLog(store.path)


def test_writes_of_a_store_opened_without_the_log_are_logged(tmp_path: Path) -> None:
    """A process that opens only the document and status stores (a Ray writer, an
    older Quillian), or writes SQL itself, is logged all the same."""
    db = tmp_path / "store.sqlite"
    with SqliteChangeLog(db) as log:
        mark = log.mark()
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO chunks VALUES ('c1', 'doc-x', 0, 'text', 0, 4, 'T')")
    conn.commit()
    conn.close()
    with SqliteStatusStore(db) as status:
        status.set_status(["doc-y"], DocStatus.PROCESSED)
        status.set_status(["doc-y"], DocStatus.PROCESSED, source="again.txt")  # same status
    with SqliteChangeLog(db) as log:
        since = log.changed_since(mark)
        assert since is not None and since[1] == ["doc-x", "doc-y"]
        assert log.changed_since(since[0]) == (since[0], [])


def test_a_store_put_back_to_an_older_copy_follows_no_later_mark(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with SqliteDocumentStore(db) as docs, SqliteChangeLog(db) as log:
        docs.put_chunks([Chunk("doc-a", 0, "a", 0, 1, "A")])
    shutil.copy(db, tmp_path / "older.sqlite")
    with SqliteDocumentStore(db) as docs, SqliteChangeLog(db) as log:
        docs.put_chunks([Chunk("doc-b", 0, "b", 0, 1, "B")])
        later = log.mark()
    shutil.copy(tmp_path / "older.sqlite", db)  # the same log's id, an earlier end
    with SqliteChangeLog(db) as log:
        assert log.changed_since(later) is None
