"""SQLite document, status and key-value stores: the contracts plus SQLite specifics."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from quillian.errors import InputError, StoreError
from quillian.stores.embedded import sqlite as sqlite_module
from quillian.stores.embedded.sqlite import (
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
)
from quillian.stores.protocols import DocStatus
from quillian.testing.contracts import (
    DocumentStoreContract,
    KeyValueStoreContract,
    StatusStoreContract,
)
from quillian.types import Document


class TestSqliteDocumentStore(DocumentStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteDocumentStore]:
        with SqliteDocumentStore(tmp_path / "store.sqlite") as store:
            yield store

    def reopen(self, store: SqliteDocumentStore) -> SqliteDocumentStore:  # type: ignore[override]
        store.close()
        return SqliteDocumentStore(store.path)


class TestSqliteStatusStore(StatusStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteStatusStore]:
        with SqliteStatusStore(tmp_path / "store.sqlite") as store:
            yield store

    def reopen(self, store: SqliteStatusStore) -> SqliteStatusStore:  # type: ignore[override]
        store.close()
        return SqliteStatusStore(store.path)


class TestSqliteKeyValueStore(KeyValueStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteKeyValueStore]:
        with SqliteKeyValueStore(tmp_path / "store.sqlite") as store:
            yield store

    def reopen(self, store: SqliteKeyValueStore) -> SqliteKeyValueStore:  # type: ignore[override]
        store.close()
        return SqliteKeyValueStore(store.path)


def test_not_a_database_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"this is plain text, not a database" * 100)
    with pytest.raises(StoreError, match=r"notes\.sqlite") as info:
        SqliteDocumentStore(path)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        SqliteKeyValueStore(tmp_path)


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    with SqliteKeyValueStore(tmp_path / "a" / "b" / "store.sqlite") as store:
        store.put_many("ns", {"k": b"v"})
    assert (tmp_path / "a" / "b" / "store.sqlite").is_file()


def test_stores_share_one_file_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with SqliteDocumentStore(path) as docs, SqliteStatusStore(path) as status:
        docs.put_documents([Document("text")])
        status.set_status([Document("text").id], DocStatus.PROCESSED)
        assert docs.count_documents() == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"documents", "chunks", "doc_status", "quillian_schema"} <= tables


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    SqliteKeyValueStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE quillian_schema SET version = 99 WHERE name = 'kv'")
    with pytest.raises(StoreError, match="version 99"):
        SqliteKeyValueStore(path)


def test_metadata_must_survive_json(tmp_path: Path) -> None:
    with SqliteDocumentStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(InputError, match="tuples"):
            store.put_documents([Document("t", metadata={"span": (1, 2)})])
        with pytest.raises(InputError, match="metadata"):
            store.put_documents([Document("t", metadata={"x": float("nan")})])
        assert store.count_documents() == 0


def test_namespace_must_be_a_non_empty_string(tmp_path: Path) -> None:
    with SqliteKeyValueStore(tmp_path / "s.sqlite") as store, pytest.raises(InputError):
        store.put_many("", {"k": b"v"})


def test_many_items_per_lookup(tmp_path: Path) -> None:
    with SqliteKeyValueStore(tmp_path / "s.sqlite") as store:
        store.put_many("ns", {str(i): str(i).encode() for i in range(1200)})
        keys = [str(i) for i in range(1199, -1, -1)]
        assert store.get_many("ns", keys) == [k.encode() for k in keys]


def test_threads_share_a_store(tmp_path: Path) -> None:
    with SqliteKeyValueStore(tmp_path / "s.sqlite") as store:

        def write(t: int) -> None:
            for i in range(50):
                store.put_many(f"ns{t}", {str(i): b"x"})

        threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [len(list(store.keys(f"ns{t}"))) for t in range(4)] == [50] * 4


def test_a_failing_statement_rolls_the_batch_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SqliteKeyValueStore(tmp_path / "s.sqlite") as store:
        store.put_many("ns", {"a": b"old"})
        # Slip a NULL past validation so SQLite itself fails on the second row.
        monkeypatch.setattr(
            sqlite_module, "_kv_item", lambda ns, k, v: (k, None if k == "b" else bytes(v))
        )
        with pytest.raises(StoreError, match="NOT NULL"):
            store.put_many("ns", {"a": b"new", "b": b"x"})
        assert store.get_many("ns", ["a", "b"]) == [b"old", None]
        store.put_many("ns", {"c": b"after"})  # the connection is usable again
        assert list(store.keys("ns")) == ["a", "c"]
