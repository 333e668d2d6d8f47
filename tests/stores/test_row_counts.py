"""Row counts SQLite keeps as rows change (:mod:`quillian.stores.embedded.row_counts`):
always what ``count(*)`` gives, whichever statement changed the rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from quillian.stores.embedded.row_counts import keep_counts, row_count
from quillian.stores.embedded.sqlite import SqliteDocumentStore
from quillian.types import Chunk, Document


def _table(conn: sqlite3.Connection, schema: str = "main") -> None:
    conn.execute(
        f"CREATE TABLE {schema}.t (a INTEGER NOT NULL, b INTEGER NOT NULL,"
        " PRIMARY KEY (a, b)) WITHOUT ROWID"
    )


def _counted(conn: sqlite3.Connection, schema: str = "main") -> tuple[int, int]:
    (taken,) = conn.execute(f"SELECT count(*) FROM {schema}.t").fetchone()
    return row_count(conn, "t", schema), taken


def test_a_kept_count_follows_every_kind_of_change() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    _table(conn)
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, 0) for i in range(50)])
    conn.execute("BEGIN")
    keep_counts(conn, ("t",))  # rows already there: counted once
    conn.execute("COMMIT")
    assert _counted(conn) == (50, 50)
    steps = [
        ("INSERT INTO t SELECT a, 1 FROM t WHERE a < 20", ()),
        ("DELETE FROM t WHERE a % 3 = 0", ()),
        ("INSERT OR IGNORE INTO t VALUES (1, 1), (2, 2)", ()),  # one ignored
        ("INSERT INTO t VALUES (7, 7) ON CONFLICT DO UPDATE SET b = excluded.b", ()),
        ("UPDATE t SET b = b + 10 WHERE a < 5", ()),
        ("DELETE FROM t", ()),  # no truncation shortcut past a trigger
        ("INSERT INTO t VALUES (?, ?)", (3, 4)),
    ]
    for sql, args in steps:
        conn.execute(sql, args)
        kept, taken = _counted(conn)
        assert kept == taken, sql
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (100, 0)")
    conn.execute("ROLLBACK")
    assert _counted(conn) == (1, 1)
    conn.execute("BEGIN")
    keep_counts(conn, ("t",))  # again: nothing counted again
    conn.execute("COMMIT")
    assert _counted(conn) == (1, 1)


def test_a_table_without_its_triggers_is_counted(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    _table(conn)
    conn.executemany("INSERT INTO t VALUES (?, 0)", [(i,) for i in range(5)])
    assert _counted(conn) == (5, 5)  # no counts kept: taken
    keep_counts(conn, ("t",))
    conn.execute("DROP TABLE t")  # its triggers go with it, its kept count stays
    _table(conn)
    conn.execute("INSERT INTO t VALUES (1, 1)")
    assert _counted(conn) == (1, 1)


def test_an_attached_database_keeps_its_own_counts(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path, isolation_level=None) as other:
        _table(other)
        other.executemany("INSERT INTO t VALUES (?, 0)", [(i,) for i in range(9)])
        keep_counts(other, ("t",))
        other.execute("DELETE FROM t WHERE a < 4")
    other.close()
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("ATTACH DATABASE ? AS st", (path.absolute().as_uri() + "?mode=ro",))
    assert _counted(conn, "st") == (5, 5)


def test_the_document_store_counts_what_it_holds(tmp_path: Path) -> None:  # and its chunks
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as made_before:  # a store of a version that kept no counts
        made_before.execute(
            "CREATE TABLE documents (id TEXT PRIMARY KEY, title TEXT NOT NULL, "
            "text TEXT NOT NULL, source TEXT NOT NULL, metadata TEXT NOT NULL)"
        )
        made_before.execute("INSERT INTO documents VALUES ('x', '', 'text', '', '{}')")
    made_before.close()
    docs = [Document(text=f"text {i}") for i in range(6)]
    with SqliteDocumentStore(path) as store:
        assert store.count_documents() == 1
        store.put_documents(docs)
        store.put_documents(docs[:2])  # the same ids again: no new rows
        chunks = [
            Chunk(d.id, i, d.text[:4], 0, 4) for d in docs for i in range(2)
        ]  # two chunks a document, each its document's span
        store.put_chunks(chunks)
        store.put_chunks(chunks[:3])  # again: the same rows
        store.delete_documents([docs[0].id, "x", "unknown"])
        assert store.count_documents() == 5
        assert store.count_chunks() == 10
    with sqlite3.connect(path) as conn:
        for table, n in (("documents", 5), ("chunks", 10)):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (n,)
            assert conn.execute("SELECT n FROM row_counts WHERE tbl = ?", (table,)).fetchone() == (
                n,
            )
    conn.close()
