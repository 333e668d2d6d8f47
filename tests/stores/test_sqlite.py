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
from quillian.stores.packed import UnpackedTexts, pack_text
from quillian.stores.protocols import DocStatus
from quillian.testing.contracts import (
    DocumentStoreContract,
    KeyValueStoreContract,
    StatusStoreContract,
)
from quillian.types import Chunk, Document


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


#: A text long enough to be stored compressed, and compressible.
LONG = "Herbert A. Simon was born in Milwaukee. " * 40


def _stored_types(path: Path) -> tuple[str, str]:
    with sqlite3.connect(path) as conn:
        doc = conn.execute("SELECT typeof(text) FROM documents").fetchone()[0]
        chunk = conn.execute("SELECT typeof(text) FROM chunks").fetchone()[0]
    return doc, chunk


def test_long_texts_are_stored_compressed_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    doc = Document(text=LONG + "Ünïcode ✓", title="t")
    chunk = Chunk(doc_id=doc.id, index=0, text=doc.text, start=0, end=len(doc.text), title="t")
    short = Chunk(doc_id=doc.id, index=1, text="A short one.", start=0, end=12, title="t")
    with SqliteDocumentStore(path) as store:
        store.put_documents([doc])
        store.put_chunks([chunk, short])
    with sqlite3.connect(path) as conn:
        kinds = dict(conn.execute("SELECT idx, typeof(text) FROM chunks"))
        (size,) = conn.execute("SELECT length(text) FROM chunks WHERE idx = 0").fetchone()
    assert kinds == {0: "blob", 1: "text"} and size < len(LONG) / 4
    with SqliteDocumentStore(path) as store:
        assert store.get_documents([doc.id]) == [doc]
        assert store.get_chunks([chunk.id, short.id]) == [chunk, short]
        assert list(store.iter_chunks()) == [chunk, short]
        assert store.chunks_of(doc.id) == [chunk, short]


def test_a_store_of_version_1_is_read_as_it_is_and_marked_2(tmp_path: Path) -> None:
    """A store written before long texts were packed: its plain rows read back, and
    it is marked version 2 once opened, so an earlier Quillian refuses it."""
    path = tmp_path / "store.sqlite"
    doc = Document(text=LONG, title="t")
    chunk = Chunk(doc_id=doc.id, index=0, text=LONG, start=0, end=len(LONG), title="t")
    SqliteDocumentStore(path).close()
    with sqlite3.connect(path) as conn:  # as version 1 wrote them: the texts as they are
        conn.execute("UPDATE quillian_schema SET version = 1 WHERE name = 'documents'")
        conn.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)", (doc.id, "t", LONG, "", "{}"))
        conn.execute(
            "INSERT INTO chunks VALUES (?, ?, 0, ?, 0, ?, 't')", (chunk.id, doc.id, LONG, len(LONG))
        )
    with SqliteDocumentStore(path) as store:
        assert store.get_documents([doc.id]) == [doc]
        assert store.get_chunks([chunk.id]) == [chunk]
    assert _stored_types(path) == ("text", "text")
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT version FROM quillian_schema WHERE name = 'documents'")
        assert version.fetchone()[0] == 2


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


def test_unpacked_texts_are_kept_by_key_the_least_recent_let_go() -> None:
    texts = UnpackedTexts(kept=2)
    packed = {i: pack_text(f"{i} " + LONG) for i in range(3)}
    assert all(isinstance(p, bytes) for p in packed.values())
    assert texts(0, packed[0]) == "0 " + LONG and texts(1, packed[1]) == "1 " + LONG
    assert texts(0, b"not read again") == "0 " + LONG  # kept, and now the most recent
    assert texts(2, packed[2]) == "2 " + LONG  # lets 1 go
    assert texts(1, "read as it is") == "read as it is"
