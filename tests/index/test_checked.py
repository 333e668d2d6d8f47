"""A database a build left is not checked whole again until something changes it: a
build's end records the stat stamps of ``store.sqlite`` and the resolution state
(``checked.json``), and the next build, update or open skips SQLite's ``quick_check``
of a database whose stamp is the recorded one, and checks any other whole."""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.index import integrity, open_index, stages, state_tables
from quillian.index.build import delete_documents
from quillian.index.integrity import CHECKED, STORE_DB, recorded_digest, unchanged_since_build
from quillian.index.stages import RESOLUTION_FILE
from quillian.index.tables import TABLES_DB
from quillian.stores.embedded.sqlite import wal_mode
from quillian.testing.corpus import build_tiny
from quillian.testing.extractors import TitleLinkExtractor

CORPUS = {
    f"Place {i}": f"Place {i} lies near Place {(i + 1) % 12} and Place {(i * 5) % 12}."
    for i in range(12)
}
DATABASES = (STORE_DB, RESOLUTION_FILE)


class Checks:
    """The whole-file checks a build or open runs: ``quick_check`` of the store, and
    whether the resolution state was opened trusted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store: list[Path] = []
        self.state_trusted: list[bool] = []
        check, resolve = integrity.quick_check, stages.resolve_entities

        def counted_check(path: Path) -> None:
            self.store.append(path)
            check(path)

        def seen_resolve(*args: Any, **kwargs: Any) -> Any:
            self.state_trusted.append(kwargs["verified"])
            return resolve(*args, **kwargs)

        monkeypatch.setattr(integrity, "quick_check", counted_check)
        monkeypatch.setattr(stages, "resolve_entities", seen_resolve)

    def take(self) -> tuple[int, list[bool]]:
        seen = (len(self.store), self.state_trusted)
        self.store, self.state_trusted = [], []
        return seen


def delete(index: Path, title: str) -> None:
    with closing(sqlite3.connect(index / STORE_DB)) as conn:
        (doc,) = conn.execute("SELECT id FROM documents WHERE title = ?", (title,)).fetchone()
    delete_documents(index, [doc], extractor=TitleLinkExtractor(CORPUS), embedder=KeywordEmbedder())


@pytest.fixture
def index(tmp_path: Path) -> Path:
    path = tmp_path / "index"
    build_tiny(path, CORPUS, titles=list(CORPUS)[:-1])
    return path


def test_a_build_records_both_databases_as_it_left_them(index: Path) -> None:
    assert (index / CHECKED).is_file()
    assert all(unchanged_since_build(index, name) for name in DATABASES)


def test_updates_and_opens_skip_the_check_of_databases_no_one_wrote(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = Checks(monkeypatch)
    build_tiny(index, CORPUS)  # one document added
    assert checks.take() == (0, [True])
    delete(index, "Place 3")
    assert checks.take() == (0, [True])
    open_index(index, KeywordEmbedder())
    assert checks.take() == (0, [])


def test_an_open_leaves_the_databases_as_the_build_left_them(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening an index writes nothing to its databases (a served index opens each build
    an update completes): the next update and open skip their whole-file checks. Setting
    the store's auto-vacuum mode on each connection wrote its header page, so every
    open changed the file, and the next build checked it whole."""
    opened = open_index(index, KeywordEmbedder())
    make_retriever(opened.context, "sa").retrieve("Where is Place 3?", 5)
    del opened
    assert all(unchanged_since_build(index, name) for name in DATABASES)
    checks = Checks(monkeypatch)
    build_tiny(index, CORPUS)
    assert checks.take() == (0, [True])
    open_index(index, KeywordEmbedder())
    assert checks.take() == (0, [])


@pytest.mark.parametrize("database", DATABASES)
def test_a_database_changed_since_the_build_is_checked_whole(
    index: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    with closing(sqlite3.connect(index / database)) as conn, conn:
        conn.execute("CREATE TABLE written_by_someone_else (x)")  # a write SQLite made
    assert not unchanged_since_build(index, database)
    checks = Checks(monkeypatch)
    build_tiny(index, CORPUS)
    assert checks.take() == ((1, [True]) if database == STORE_DB else (0, [False]))
    assert unchanged_since_build(index, database)  # the build checked it, then recorded it


def test_what_changes_a_stamp(index: Path, tmp_path: Path) -> None:
    store = index / STORE_DB
    os.utime(store)  # touched, the bytes the same
    assert not unchanged_since_build(index, STORE_DB)
    assert unchanged_since_build(index, RESOLUTION_FILE)
    build_tiny(index, CORPUS, titles=list(CORPUS)[:-1])  # nothing new: the files reused
    build_tiny(index, CORPUS)
    assert unchanged_since_build(index, STORE_DB)
    wal = store.with_name(STORE_DB + "-wal")
    wal.write_bytes(b"committed pages")  # a log beside it holds what the file does not
    assert not unchanged_since_build(index, STORE_DB)
    wal.unlink()
    assert unchanged_since_build(index, STORE_DB)
    copy = tmp_path / "copy"
    shutil.copytree(index, copy)  # another file at each path: checked there
    assert not any(unchanged_since_build(copy, name) for name in DATABASES)
    (index / CHECKED).write_text("{not json")
    assert not any(unchanged_since_build(index, name) for name in DATABASES)
    (index / CHECKED).unlink()
    assert not unchanged_since_build(index, STORE_DB)


def test_an_update_patches_the_tables_where_they_are_and_checks_them_only_if_changed(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables' database is patched where it is (the same file, never copied) and
    marked by its generation, not a digest of its bytes: SQLite checks it whole only
    where its stamp is not the one the last build recorded."""
    tables = index / TABLES_DB
    assert wal_mode(tables) and unchanged_since_build(index, TABLES_DB)
    assert recorded_digest(index, TABLES_DB) is None  # no digest: its bytes are not read
    copies: list[Path] = []
    copy = state_tables.copy_with_digest

    def counted(source: Path, target: Path) -> str | None:
        copies.append(source)
        return copy(source, target)

    monkeypatch.setattr(state_tables, "copy_with_digest", counted)
    checks = Checks(monkeypatch)
    inode = tables.stat().st_ino
    build_tiny(index, CORPUS)
    assert copies == [] and checks.take() == (0, [True]) and tables.stat().st_ino == inode
    assert unchanged_since_build(index, TABLES_DB)
    os.utime(tables)  # touched: checked whole by SQLite, then patched where it is
    delete(index, "Place 3")
    assert copies == [] and checks.take() == (1, [True]) and tables.stat().st_ino == inode
    assert unchanged_since_build(index, TABLES_DB)


def test_a_build_that_reuses_the_index_records_what_it_checked(index: Path) -> None:
    """A build killed after it marked the index complete, before its record: the next
    build (nothing new: it reuses the index) records the store it checked, and neither
    the state nor the tables it did not; with the record in place, it keeps theirs."""
    (index / CHECKED).unlink()
    build_tiny(index, CORPUS, titles=list(CORPUS)[:-1])
    assert unchanged_since_build(index, STORE_DB)
    assert not unchanged_since_build(index, RESOLUTION_FILE)
    assert not unchanged_since_build(index, TABLES_DB)
    delete(index, "Place 0")  # a build that writes them records them again
    build_tiny(index, CORPUS, titles=list(CORPUS)[1:-1])  # reused
    assert all(unchanged_since_build(index, name) for name in (*DATABASES, TABLES_DB))


def test_the_databases_a_build_writes_whole_are_packed(tmp_path: Path) -> None:
    """Their rows go in keyed by hashes (chunk ids, text ids), which leaves pages part
    full: the resolution state made anew and the tables written whole are packed once
    written, as small as a ``VACUUM`` leaves them."""
    words = ["river", "city", "castle", "bridge", "market", "abbey", "harbour"]
    corpus = {
        f"Place {i}": " ".join(f"{words[(i * j) % 7]} {j}" for j in range(60)) + f" Place {i}."
        for i in range(300)
    }
    build_tiny(tmp_path / "idx", corpus)
    for name in (RESOLUTION_FILE, TABLES_DB):
        db, copy = tmp_path / "idx" / name, tmp_path / "copy.sqlite"
        shutil.copyfile(db, copy)
        with closing(sqlite3.connect(copy)) as conn:
            conn.execute("VACUUM")
        assert db.stat().st_size == copy.stat().st_size > 20 * 4096, name
