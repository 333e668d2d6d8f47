"""On PostgreSQL too, the cache's graph tables are patched where they are: an update no
reader holds a snapshot of sends the patched file itself; one whose readers kept its
write-ahead log sends the database as they see it, the file with the log's pages put
in, copying nothing, the readers keeping their build;
another machine's cache fetches a changed database into a copy of its folder swapped
in whole, never renaming a file over one its readers read through the log; no file of
a log or of shared memory is ever sent or removed by a pull (a real server; marked
``postgres``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.index import open_index
from quillian.index.build import delete_documents
from quillian.index.layout import server_backend
from quillian.index.tables import TABLES_DB
from quillian.stores.embedded.sqlite import wal_bytes, wal_mode
from quillian.testing import tables as tables_testing
from quillian.testing.corpus import build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document

pytest.importorskip("psycopg")
from quillian.stores.postgres import Workspace, pull_files, push_files, refetch_files

pytestmark = pytest.mark.postgres

CORPUS = {
    f"Place {i}": f"Place {i} lies near Place {(i + 1) % 12} and Place {(i * 5) % 12}."
    for i in range(12)
}
QUESTIONS = ("Where is Place 3?", "What lies near Place 7?")
METHODS = ("ppr", "sa", "bm25")


def titles(*left_out: int) -> list[str]:
    return [t for i, t in enumerate(CORPUS) if i not in left_out]


def ranked(context: object) -> dict[str, list[list[str]]]:
    return tables_testing.ranked(context, QUESTIONS, METHODS)


def rankings(location: str | Path) -> dict[str, list[list[str]]]:
    return ranked(open_index(location, KeywordEmbedder()).context)


def delete(location: str, *gone: str) -> None:
    ids = [Document(CORPUS[t], t).id for t in gone]
    delete_documents(
        location, ids, extractor=TitleLinkExtractor(CORPUS), embedder=KeywordEmbedder()
    )


def test_updates_patch_the_cache_where_it_is_and_send_what_they_patched(
    postgres_url: str, tmp_path: Path
) -> None:
    build_tiny(postgres_url, CORPUS, titles=titles(10, 11))
    build_tiny(postgres_url, CORPUS, titles=titles(11))  # the first update: written whole
    cache = server_backend().parse_location(postgres_url).cache
    db = cache / TABLES_DB
    assert wal_mode(db)
    inode = db.stat().st_ino
    build_tiny(postgres_url, CORPUS)
    delete(postgres_url, "Place 2")
    assert db.stat().st_ino == inode and wal_bytes(db) == 0  # never copied; no reader
    build_tiny(tmp_path / "clean", CORPUS, titles=titles(2))
    clean = rankings(tmp_path / "clean")
    assert rankings(postgres_url) == clean
    elsewhere = postgres_url.replace("pg-cache", "other-cache")  # another machine's cache
    assert rankings(elsewhere) == clean


def test_readers_keep_their_build_while_an_update_sends_the_pages_of_the_log(
    postgres_url: str, tmp_path: Path
) -> None:
    build_tiny(postgres_url, CORPUS, titles=titles(10, 11))
    build_tiny(postgres_url, CORPUS, titles=titles(11))
    elsewhere = postgres_url.replace("pg-cache", "other-cache")
    before = rankings(postgres_url)
    assert rankings(elsewhere) == before  # that machine's cache holds this build
    cache = server_backend().parse_location(postgres_url).cache
    db = cache / TABLES_DB
    inode = db.stat().st_ino
    opened = open_index(postgres_url, KeywordEmbedder()).context  # holds a snapshot
    build_tiny(postgres_url, CORPUS)
    # patched where it is, the pages the reader kept in the log: not copied
    assert db.stat().st_ino == inode and wal_mode(db) and wal_bytes(db) > 0
    assert ranked(opened) == before
    build_tiny(tmp_path / "clean", CORPUS)
    clean = rankings(tmp_path / "clean")
    assert rankings(postgres_url) == clean
    other = open_index(elsewhere, KeywordEmbedder()).context  # reads through the log
    assert ranked(other) == clean
    delete(postgres_url, "Place 4")  # the other machine's reader holds its snapshot
    build_tiny(tmp_path / "clean4", CORPUS, titles=titles(4))
    assert rankings(elsewhere) == rankings(tmp_path / "clean4")
    assert ranked(other) == clean


def make_db(path: Path, *rows: str) -> None:
    """A database in write-ahead-log mode holding ``rows`` (its log emptied on close)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [(r,) for r in rows])


def reader(path: Path) -> sqlite3.Connection:
    """A read-only connection holding a snapshot of the database at ``path``."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM t").fetchone()  # the snapshot, taken by a read
    return conn


def values(conn: sqlite3.Connection) -> list[str]:
    return [v for (v,) in conn.execute("SELECT v FROM t ORDER BY v")]


def test_a_pull_swaps_in_a_copy_of_a_folder_whose_database_a_log_reads(
    postgres_url: str, tmp_path: Path
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    make_db(one / "tables" / "graph.sqlite", "a")
    (one / "tables" / "kept.npy").write_bytes(b"k" * 100)
    with Workspace(postgres_url) as workspace:
        push_files(workspace, one)
        pull_files(workspace, two)
        held = reader(two / "tables" / "graph.sqlite")
        assert values(held) == ["a"]
        assert (two / "tables" / "graph.sqlite-shm").exists()  # the reader's
        folder = (two / "tables").stat().st_ino
        make_db(one / "tables" / "graph.sqlite", "b")  # patched where it is
        assert push_files(workspace, one) == 1
        assert pull_files(workspace, two) == 1
        assert (two / "tables").stat().st_ino != folder  # a copy, swapped in
        assert values(held) == ["a"]  # the reader's snapshot whole
        held.close()
        with closing(reader(two / "tables" / "graph.sqlite")) as fresh:
            assert values(fresh) == ["a", "b"]
        assert (two / "tables" / "kept.npy").read_bytes() == b"k" * 100
        # a file fetched again beside a database a reader holds: the database copied
        # into the folder's copy, not linked (one file under two names would have two
        # logs), so the reader keeps its own
        held = reader(two / "tables" / "graph.sqlite")
        inode = (two / "tables" / "graph.sqlite").stat().st_ino
        assert refetch_files(workspace, two, ["tables/kept.npy"]) == 1
        assert (two / "tables" / "graph.sqlite").stat().st_ino != inode
        with closing(reader(two / "tables" / "graph.sqlite")) as fresh:
            assert values(fresh) == values(held) == ["a", "b"]
        held.close()
        # a writer whose reader kept the log: its log and shared memory are not sent,
        # the database as its readers see it is
        held = reader(one / "tables" / "graph.sqlite")
        make_db(one / "tables" / "graph.sqlite", "c")
        assert wal_bytes(one / "tables" / "graph.sqlite") > 0
        assert push_files(workspace, one) == 1
        with workspace.connection("list the files") as conn:
            sent = {path for (path,) in conn.execute("SELECT path FROM files")}
        assert sent == {"tables/graph.sqlite", "tables/kept.npy"}
        assert pull_files(workspace, two) == 1
        with closing(reader(two / "tables" / "graph.sqlite")) as fresh:
            assert values(fresh) == ["a", "b", "c"]
        # the log grows while the reader holds it: each push sends its pages
        make_db(one / "tables" / "graph.sqlite", "d")
        assert push_files(workspace, one) == 1
        assert push_files(workspace, one) == 0  # nothing changed since
        three = tmp_path / "three"
        assert pull_files(workspace, three) == 2
        with closing(reader(three / "tables" / "graph.sqlite")) as fresh:
            assert values(fresh) == ["a", "b", "c", "d"]
        held.close()
        assert not list(tmp_path.glob("*/*.tmp"))  # no copy or folder left aside
