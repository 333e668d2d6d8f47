"""The graph tables' database of an embedded index is patched where it is, in SQLite's
write-ahead-log mode: an update never copies it; an index opened before an update
keeps reading the build it opened (its read transaction, and the arrays it mapped);
a patch that fails leaves the tables as they were, and the next update is made good;
tables of an earlier version (no write-ahead log) are copied once, then patched where
they are."""

from __future__ import annotations

import gc
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.errors import IndexDamagedError
from quillian.index import open_index, state_tables
from quillian.index import tables as tables_module
from quillian.index.build import delete_documents
from quillian.index.integrity import STORE_DB, unchanged_since_build
from quillian.index.storage import Storage
from quillian.index.tables import TABLES_DB, StoredTables
from quillian.stores.embedded.sqlite import wal_bytes, wal_mode
from quillian.testing import tables as tables_testing
from quillian.testing.corpus import build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.tables import assert_same_outputs

CORPUS = {
    f"Place {i}": f"Place {i} lies near Place {(i + 1) % 14} and Place {(i * 5) % 14}."
    for i in range(14)
}
QUESTIONS = ("Where is Place 3?", "What lies near Place 7?", "Place 11 and Place 2")
METHODS = ("ppr", "sa", "bm25", "dense")


def rankings(location: Path) -> dict[str, list[list[str]]]:
    """Each method's top 5 chunk ids for each question, of the index as opened now."""
    return ranked(open_index(location, KeywordEmbedder()).context)


def ranked(context: object) -> dict[str, list[list[str]]]:
    return tables_testing.ranked(context, QUESTIONS, METHODS)


def delete(index: Path, titles: list[str]) -> None:
    with closing(sqlite3.connect(index / STORE_DB)) as conn:
        ids = [
            conn.execute("SELECT id FROM documents WHERE title = ?", (t,)).fetchone()[0]
            for t in titles
        ]
    delete_documents(index, ids, extractor=TitleLinkExtractor(CORPUS), embedder=KeywordEmbedder())


def log_bytes(index: Path) -> int:
    """The size of the tables' write-ahead log (0 where there is none)."""
    return wal_bytes(index / TABLES_DB)


def titles(*left_out: int) -> list[str]:
    return [t for i, t in enumerate(CORPUS) if i not in left_out]


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """An index of all places but the last two, grown by one (its first update)."""
    path = tmp_path / "index"
    build_tiny(path, CORPUS, titles=titles(12, 13))
    build_tiny(path, CORPUS, titles=titles(13))
    return path


def test_an_update_patches_the_database_where_it_is(index: Path, tmp_path: Path) -> None:
    db = index / TABLES_DB
    assert wal_mode(db)
    inode = db.stat().st_ino
    build_tiny(index, CORPUS)
    delete(index, ["Place 2"])
    assert db.stat().st_ino == inode  # the same file: never copied
    assert log_bytes(index) == 0  # no reader: its log emptied
    build_tiny(tmp_path / "clean", CORPUS, titles=titles(2))
    assert_same_outputs(index, tmp_path / "clean")
    assert rankings(index) == rankings(tmp_path / "clean")


def test_an_index_opened_before_updates_keeps_reading_its_build(
    index: Path, tmp_path: Path
) -> None:
    before = tmp_path / "before"
    shutil.copytree(index, before)
    opened = open_index(index, KeywordEmbedder()).context
    tables = opened.kg.indexes
    assert isinstance(tables, StoredTables)
    rows = (list(opened.kg.entities), list(opened.kg.relations), list(opened.chunk_texts))
    positions = np.array(tables.array("entity_positions"))
    build_tiny(index, CORPUS)  # rows added where it is
    delete(index, ["Place 0", "Place 5"])  # and deleted
    # the opened index reads the rows and arrays of the build it opened
    assert (list(opened.kg.entities), list(opened.kg.relations), list(opened.chunk_texts)) == rows
    assert np.array_equal(tables.array("entity_positions"), positions)
    assert ranked(opened) == rankings(before)
    # its snapshot is kept in the log until it closes; a new open reads the last build
    assert log_bytes(index) > 0
    build_tiny(tmp_path / "clean", CORPUS, titles=titles(0, 5))
    assert rankings(index) == rankings(tmp_path / "clean")
    # and opening it does not make the next update check the tables whole
    assert unchanged_since_build(index, TABLES_DB)
    tables.db.close()  # (the indexes the rankings above opened closed when let go)
    delete(index, ["Place 1"])
    assert log_bytes(index) == 0


def open_tables(index: Path) -> int:
    """How many of this process's open files are the tables' database."""
    db = (index / TABLES_DB).resolve()
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if _target(fd) == db)


def _target(fd: Path) -> Path | None:
    try:
        return fd.resolve()
    except OSError:  # closed since it was listed
        return None


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_tables_close_when_let_go_not_at_a_later_garbage_collection(index: Path) -> None:
    """A build closes the tables it read back once its stages are done, and an opened
    index let go closes its own (its snapshot with them): the connection's statement
    cache holds it in a reference cycle, which only a garbage collection, in some later
    call, would otherwise end."""
    gc.collect()
    gc.disable()
    try:
        build_tiny(index, CORPUS)
        assert open_tables(index) == 0
        opened = open_index(index, KeywordEmbedder())
        ranked(opened.context)  # rows read
        assert open_tables(index) > 0
        delete(index, ["Place 3"])
        assert log_bytes(index) > 0  # the opened index's snapshot, kept in the log
        del opened
        assert open_tables(index) == 0
        delete(index, ["Place 4"])
        assert log_bytes(index) == 0  # no reader left: the log emptied
    finally:
        gc.enable()


def test_a_patch_that_fails_leaves_the_tables_and_a_rerun_equals_a_clean_build(
    index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = index / TABLES_DB
    with closing(sqlite3.connect(db)) as conn:
        kept = conn.execute("SELECT * FROM meta ORDER BY key").fetchall()

    def fails(*args: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:  # after the rows are patched, before the commit
        patched.setattr(state_tables, "_titled_names", fails)
        with pytest.raises(OSError, match="No space left"):
            build_tiny(index, CORPUS)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT * FROM meta ORDER BY key").fetchall() == kept
    build_tiny(index, CORPUS)  # a build that stopped: linked and written whole again
    build_tiny(tmp_path / "clean", CORPUS)
    assert_same_outputs(index, tmp_path / "clean")
    assert rankings(index) == rankings(tmp_path / "clean")


def test_tables_of_an_earlier_version_are_copied_once_then_patched_where_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "index"
    with monkeypatch.context() as patched:  # as an earlier version left them
        patched.setattr(Storage, "tables_in_place", False)
        build_tiny(index, CORPUS, titles=titles(12, 13))
    db = index / TABLES_DB
    assert not wal_mode(db)
    inode = db.stat().st_ino
    build_tiny(index, CORPUS, titles=titles(13))
    assert wal_mode(db) and db.stat().st_ino != inode  # copied, in the new mode
    inode = db.stat().st_ino
    delete(index, ["Place 4"])
    assert db.stat().st_ino == inode
    build_tiny(tmp_path / "clean", CORPUS, titles=titles(4, 13))
    assert_same_outputs(index, tmp_path / "clean")
    assert rankings(index) == rankings(tmp_path / "clean")


def test_a_log_that_readers_kept_growing_is_folded_into_a_copy(
    index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index served throughout its updates always holds a snapshot, so the log is
    never emptied: past its share of the database, an update copies the database with
    the log folded in and swaps it in whole; the reader keeps reading its build."""
    monkeypatch.setattr(state_tables, "LOG_FLOOR", 0)
    db = index / TABLES_DB
    before = tmp_path / "before"
    shutil.copytree(index, before)
    opened = open_index(index, KeywordEmbedder()).context
    inode = db.stat().st_ino
    build_tiny(index, CORPUS)
    assert db.stat().st_ino == inode and log_bytes(index) > 0  # the reader's snapshot
    monkeypatch.setattr(state_tables, "LOG_SHARE", log_bytes(index) / db.stat().st_size / 2)
    delete(index, ["Place 6"])
    assert db.stat().st_ino != inode and log_bytes(index) == 0  # copied, the log folded in
    assert ranked(opened) == rankings(before)
    build_tiny(tmp_path / "clean", CORPUS, titles=titles(6))
    assert_same_outputs(index, tmp_path / "clean")
    assert rankings(index) == rankings(tmp_path / "clean")


def test_a_folder_the_reader_may_not_write_is_read_where_the_log_is_empty(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader of the log needs SQLite's file of shared memory beside the database,
    which it cannot make in a folder it may not write (an index on a read-only mount;
    root here may write anywhere, so the refusal is SQLite's error, given): with the
    log empty it reads the database as an immutable file, else it names the tables."""
    connected = tables_module._connected

    def refused(path: Path, texts: object, in_place: bool, hold: bool) -> sqlite3.Connection:
        if in_place:
            raise sqlite3.OperationalError("unable to open database file")
        return connected(path, texts, in_place, hold)  # type: ignore[arg-type]

    clean = rankings(index)
    # a reader of the log that stays open (another process's), so that no connection
    # the opens below make and close is the last one, which would remove the log
    reader = open_index(index, KeywordEmbedder())
    monkeypatch.setattr(tables_module, "_connected", refused)
    assert log_bytes(index) == 0
    assert rankings(index) == clean
    (index / (TABLES_DB + "-wal")).write_bytes(b"\0" * 32)  # a log that may hold commits
    with pytest.raises(IndexDamagedError, match="unable to open database file"):
        rankings(index)
    assert isinstance(reader.context.kg.indexes, StoredTables)
