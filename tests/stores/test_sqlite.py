"""SQLite document, status and key-value stores: the contracts plus SQLite specifics."""

from __future__ import annotations

import random
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from quillian.errors import InputError, StoreError
from quillian.stores.embedded import sqlite as sqlite_module
from quillian.stores.embedded.sqlite import (
    SqliteChangeLog,
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
    stored_chunk_texts,
    stored_values,
)
from quillian.stores.packed import XZ_FROM, UnpackedTexts, pack_text, unpack_text
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


def _long_values(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM kv_values").fetchone()[0])


def test_long_values_are_kept_apart_and_go_with_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    long, longer = b"x" * (sqlite_module.INLINE + 1), b"y" * 5000
    with SqliteKeyValueStore(path) as store:
        store.put_many("ns", {"a": long, "b": b"short", "c": longer})
        assert _long_values(path) == 2
        assert store.get_many("ns", ["c", "a", "b", "z"]) == [longer, long, b"short", None]
        store.put_many("ns", {"a": b"now short", "b": longer, "c": long})  # every move
        assert store.get_many("ns", ["a", "b", "c"]) == [b"now short", longer, long]
        assert _long_values(path) == 2  # the replaced ones gone
        store.put_many("other", {"a": longer})  # the same key in another namespace
        store.delete_many("ns", ["b", "c", "absent"])
        assert _long_values(path) == 1
        assert store.get_many("ns", ["a", "b"]) == [b"now short", None]
        assert store.get_many("other", ["a"]) == [longer]
        assert sorted(store.keys("ns")) == ["a"]
    with closing(sqlite3.connect(path)) as conn:
        assert dict(stored_values(conn, "other")) == {"a": longer}


def test_a_store_of_version_1_is_read_and_then_keeps_long_values_apart(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE quillian_schema (name TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        conn.execute("INSERT INTO quillian_schema VALUES ('kv', 1)")
        conn.execute(
            "CREATE TABLE kv (namespace TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
            " PRIMARY KEY (namespace, key)) WITHOUT ROWID"
        )
        conn.execute("INSERT INTO kv VALUES ('ns', 'old', ?)", (b"o" * 3000,))
    with closing(sqlite3.connect(path)) as conn:  # read as it is, without opening the store
        assert dict(stored_values(conn, "ns")) == {"old": b"o" * 3000}
    with SqliteKeyValueStore(path) as store:
        assert store.get_many("ns", ["old"]) == [b"o" * 3000]
        store.put_many("ns", {"new": b"n" * 3000})
        store.put_many("ns", {"old": b"p" * 3000})
        assert store.get_many("ns", ["old", "new"]) == [b"p" * 3000, b"n" * 3000]
        assert _long_values(path) == 2
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT version FROM quillian_schema").fetchone() == (2,)


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
        store.put_chunks([chunk, short])  # before their document: kept whole
        store.put_documents([doc])
    with sqlite3.connect(path) as conn:
        kinds = dict(conn.execute("SELECT idx, typeof(text) FROM chunks"))
        (size,) = conn.execute("SELECT length(text) FROM chunks WHERE idx = 0").fetchone()
    assert kinds == {0: "blob", 1: "text"} and size < len(LONG) / 4
    with SqliteDocumentStore(path) as store:
        assert store.get_documents([doc.id]) == [doc]
        assert store.get_chunks([chunk.id, short.id]) == [chunk, short]
        assert list(store.iter_chunks()) == [chunk, short]
        assert store.chunks_of(doc.id) == [chunk, short]


@pytest.mark.parametrize("version", [1, 2])
def test_a_store_of_an_earlier_version_is_read_as_it_is_and_marked_3(
    tmp_path: Path, version: int
) -> None:
    """A store written before long texts were packed (1) or chunks kept as spans (2):
    its rows read back as they are, and it is marked version 3 once opened, so an
    earlier Quillian refuses it."""
    path = tmp_path / "store.sqlite"
    doc = Document(text=LONG, title="t")
    chunk = Chunk(doc_id=doc.id, index=0, text=LONG, start=0, end=len(LONG), title="t")
    SqliteDocumentStore(path).close()
    with sqlite3.connect(path) as conn:  # as version 1 wrote them: the texts as they are
        conn.execute("UPDATE quillian_schema SET version = ? WHERE name = 'documents'", (version,))
        conn.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)", (doc.id, "t", LONG, "", "{}"))
        conn.execute(
            "INSERT INTO chunks VALUES (?, ?, 0, ?, 0, ?, 't')", (chunk.id, doc.id, LONG, len(LONG))
        )
    with SqliteDocumentStore(path) as store:
        assert store.get_documents([doc.id]) == [doc]
        assert store.get_chunks([chunk.id]) == [chunk]
    assert _stored_types(path) == ("text", "text")
    with sqlite3.connect(path) as conn:
        marked = conn.execute("SELECT version FROM quillian_schema WHERE name = 'documents'")
        assert marked.fetchone()[0] == 3


def _span_rows(path: Path) -> dict[int, bool]:
    """Whether each chunk row (by index) is kept as its document's span."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT idx, typeof(text) = 'blob' AND length(text) = 0 FROM chunks"
        ).fetchall()
    return {idx: bool(span) for idx, span in rows}


def test_a_chunk_that_is_its_documents_span_keeps_no_text(tmp_path: Path) -> None:
    """A chunk whose text is its stored document's between its offsets is kept as that
    span (an empty blob) and read back whole by every read; one whose text differs (a
    chunker that rewrites it), an empty one, or one put before its document keeps its
    text."""
    path = tmp_path / "store.sqlite"
    text = LONG + "Ünïcode ✓ 😀 and the end."
    doc = Document(text=text, title="t")
    other = Document(text="Another document, stored after its chunk.", title="o")
    chunks = [
        Chunk(doc_id=doc.id, index=0, text=text[:600], start=0, end=600, title="t"),
        Chunk(doc_id=doc.id, index=1, text=text[600:], start=600, end=len(text), title="t"),
        Chunk(doc_id=doc.id, index=2, text=text[3:9], start=3, end=9, title="t"),
        Chunk(doc_id=doc.id, index=3, text=text[3:9].upper(), start=3, end=9, title="t"),
        Chunk(doc_id=doc.id, index=4, text="", start=7, end=7, title="t"),
    ]
    late = Chunk(doc_id=other.id, index=0, text=other.text, start=0, end=41, title="o")
    with SqliteDocumentStore(path) as store:
        store.put_chunks([late])
        store.put_documents([doc, other])
        store.put_chunks(chunks)
        assert store.get_chunks([c.id for c in chunks]) == chunks
        assert store.chunks_of(doc.id) == chunks
        assert list(store.iter_chunks()) == [late, *chunks]
    with sqlite3.connect(path) as conn:
        spans = dict(
            conn.execute(
                "SELECT id, typeof(text) = 'blob' AND length(text) = 0 FROM chunks"
            ).fetchall()
        )
    assert spans == {late.id: 0, **{c.id: int(c.index < 3) for c in chunks}}
    with closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as conn:
        assert dict(stored_chunk_texts(conn)) == {c.id: c.text for c in [late, *chunks]}
    with SqliteDocumentStore(path) as store:
        assert store.get_chunks([chunks[1].id, late.id]) == [chunks[1], late]


def test_a_document_put_with_another_text_gives_its_spans_their_texts(tmp_path: Path) -> None:
    """A stored document put again with another text (under its id) first gives the
    chunks kept as its spans the texts they had, in the same transaction, and the
    change log names the document; the same text again leaves the spans as they are."""
    path = tmp_path / "store.sqlite"
    doc = Document(text=LONG, title="t")
    chunks = [
        Chunk(doc_id=doc.id, index=i, text=LONG[s:e], start=s, end=e, title="t")
        for i, (s, e) in enumerate([(0, 400), (400, len(LONG))])
    ]

    class Edited(Document):
        @property
        def id(self) -> str:
            return doc.id

    with SqliteDocumentStore(path) as store, SqliteChangeLog(path) as log:
        store.put_documents([doc])
        store.put_chunks(chunks)
        store.put_documents([doc])
        assert _span_rows(path) == {0: True, 1: True}
        mark = log.mark()
        store.put_documents([Edited(text="Rewritten. " * 50, title="t")])
        assert _span_rows(path) == {0: False, 1: False}
        assert store.get_chunks([c.id for c in chunks]) == chunks
        assert store.get_documents([doc.id])[0].text == "Rewritten. " * 50  # type: ignore[union-attr]
        changed = log.changed_since(mark)
        assert changed is not None and changed[1] == [doc.id]


def test_a_span_whose_document_is_gone_is_named(tmp_path: Path) -> None:
    """A chunk kept as its document's span, the document's row deleted by hand: a
    :class:`StoreError` naming the chunk and the document, not a wrong text."""
    path = tmp_path / "store.sqlite"
    doc = Document(text=LONG, title="t")
    chunk = Chunk(doc_id=doc.id, index=0, text=LONG[:50], start=0, end=50, title="t")
    with SqliteDocumentStore(path) as store:
        store.put_documents([doc])
        store.put_chunks([chunk])
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM documents")
    with SqliteDocumentStore(path) as store, pytest.raises(StoreError) as raised:
        store.get_chunks([chunk.id])
    assert chunk.id in str(raised.value) and doc.id in str(raised.value)


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
        # Slip a value SQLite cannot store past validation: it fails on the second row.
        monkeypatch.setattr(
            sqlite_module, "_kv_item", lambda ns, k, v: (k, [1] if k == "b" else bytes(v))
        )
        with pytest.raises(StoreError, match="not supported"):
            store.put_many("ns", {"a": b"new", "b": b"x"})
        assert store.get_many("ns", ["a", "b"]) == [b"old", None]
        store.put_many("ns", {"c": b"after"})  # the connection is usable again
        assert list(store.keys("ns")) == ["a", "c"]


def test_a_long_text_is_packed_in_xz_where_shorter_and_every_form_reads_back() -> None:
    rng = random.Random(7)
    words = [f"{rng.choice('BCDFGHKLMNPRST')}{rng.randrange(10**6)}" for _ in range(3000)]
    # names repeated farther apart than zlib's 32 KB window: xz finds them
    text = " ".join(rng.choice(words) for _ in range(XZ_FROM // 4))
    packed = pack_text(text)
    assert isinstance(packed, bytes) and packed[:6] == b"\xfd7zXZ\x00"
    assert len(packed) < len(zlib.compress(text.encode(), 6))
    assert unpack_text(packed) == text
    shorter = text[: XZ_FROM // 2]
    assert pack_text(shorter)[:1] == b"x"  # zlib under the bound
    assert unpack_text(pack_text(shorter)) == shorter
    assert unpack_text(zlib.compress(text.encode())) == text  # written before: as it is


def test_unpacked_texts_are_kept_by_key_the_least_recent_let_go() -> None:
    texts = UnpackedTexts(kept=2)
    packed = {i: pack_text(f"{i} " + LONG) for i in range(3)}
    assert all(isinstance(p, bytes) for p in packed.values())
    assert texts(0, packed[0]) == "0 " + LONG and texts(1, packed[1]) == "1 " + LONG
    assert texts(0, b"not read again") == "0 " + LONG  # kept, and now the most recent
    assert texts(2, packed[2]) == "2 " + LONG  # lets 1 go
    assert texts(1, "read as it is") == "read as it is"


def test_a_long_documents_text_is_read_again_after_another_connection_changes_it(
    tmp_path: Path,
) -> None:
    """A store keeps the long documents' texts it read for its spans (a document's
    chunks come in batches), but reads one again once another connection committed:
    another process's new spans of an edited document read its new text."""
    path = tmp_path / "store.sqlite"
    first = "Alpha beta gamma. " * 5000  # long enough to be kept
    doc = Document(text=first, title="t")
    before = Chunk(doc_id=doc.id, index=0, text=first[:90], start=0, end=90, title="t")
    second = "Delta epsilon zeta. " * 5000

    class Edited(Document):
        @property
        def id(self) -> str:
            return doc.id

    after = Chunk(doc_id=doc.id, index=1, text=second[:90], start=0, end=90, title="t")
    with SqliteDocumentStore(path) as reader, SqliteDocumentStore(path) as writer:
        writer.put_documents([doc])
        writer.put_chunks([before])
        assert reader.get_chunks([before.id]) == [before]  # the text now kept
        writer.put_documents([Edited(text=second, title="t")])
        writer.put_chunks([after])
        assert _span_rows(path) == {0: False, 1: True}
        assert reader.get_chunks([before.id, after.id]) == [before, after]
        reader.put_documents([doc])  # its own write: the texts it kept go too
        assert reader.chunks_of(doc.id) == [before, after]


def test_a_long_documents_text_is_not_unpacked_again_after_another_stores_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write by another store of the file (the caches' key-value store, between two
    batches of a build's reads) leaves the documents as they were: their kept texts are
    taken again once their stored values are found unchanged, not unpacked anew."""
    path = tmp_path / "store.sqlite"
    text = "Alpha beta gamma. " * 5000
    doc = Document(text=text, title="t")
    chunks = [
        Chunk(doc_id=doc.id, index=i, text=text[s : s + 90], start=s, end=s + 90, title="t")
        for i, s in enumerate((0, 900, 9000))
    ]
    unpacked: list[int] = []

    def counted(stored: str | bytes) -> str:
        unpacked.append(len(stored))
        return unpack_text(stored)

    monkeypatch.setattr(sqlite_module, "unpack_text", counted)
    with SqliteDocumentStore(path) as store, SqliteKeyValueStore(path) as kv:
        store.put_documents([doc])
        store.put_chunks(chunks)
        unpacked.clear()
        assert store.get_chunks([chunks[0].id]) == chunks[:1]
        assert len(unpacked) == 1  # the document's text, once
        assert store.get_chunks([chunks[1].id]) == chunks[1:2]
        kv.put_many("embeddings", {"k": b"v"})  # another connection commits
        assert store.chunks_of(doc.id) == chunks
        assert len(unpacked) == 1
