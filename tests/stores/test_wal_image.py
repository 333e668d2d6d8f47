"""A database in write-ahead-log mode read as its readers see it, without copying it:
the file with the pages its log holds put in, equal to what SQLite itself gives
(``serialize``) whatever the log holds."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from quillian.stores.embedded.wal_image import wal_image

BLOCK = 1 << 16


def writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # copied back only when told
    conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
    return conn


def write(conn: sqlite3.Connection, keys: range, text: str) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)", [(k, text * 40) for k in keys])
    conn.execute("COMMIT")


def snapshot(path: Path) -> sqlite3.Connection:
    """A reader holding a snapshot: the log's later pages cannot be copied back."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM t").fetchone()
    return conn


def seen(path: Path) -> bytes:
    """The database as a new reader sees it, by SQLite."""
    with closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as conn:
        return conn.serialize()


def image_bytes(path: Path) -> bytes:
    image = wal_image(path)
    assert image is not None
    n = -(-image.size // BLOCK)
    with image.reading() as read:
        data = b"".join(read(i, BLOCK) for i in range(n))
        assert read(n, BLOCK) == b""  # past its end
        assert b"".join(read(i, 4096) for i in range(-(-image.size // 4096))) == data
    assert len(data) == image.size
    return data


@pytest.mark.parametrize("page_size", [1024, 4096])
def test_the_image_is_what_a_new_reader_reads(tmp_path: Path, page_size: int) -> None:
    db = tmp_path / "graph.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.close()
    conn = writer(db)
    write(conn, range(3000), "a")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    held = snapshot(db)  # the pages written from here on stay in the log
    write(conn, range(0, 3000, 7), "b")  # pages changed in the middle
    write(conn, range(3000, 6000), "c")  # and the file grown past its end
    conn.execute("DELETE FROM t WHERE k % 11 = 0")  # a page changed twice: the latest
    assert image_bytes(db) == seen(db)
    assert len(seen(db)) > db.stat().st_size  # the file alone lacks pages
    held.close()
    conn.close()


def test_a_log_begun_again_is_read_to_its_end_not_past_it(tmp_path: Path) -> None:
    """After the log is copied back and begun again, its file still holds the earlier
    log's frames past the new ones (another salt): they are not taken."""
    db = tmp_path / "graph.sqlite"
    conn = writer(db)
    write(conn, range(4000), "a")  # many frames
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # all copied back, the log kept
    held = snapshot(db)
    write(conn, range(10), "z")  # the log begun again: a few frames at its start
    log = db.with_name(db.name + "-wal").stat().st_size
    image = wal_image(db)
    assert image is not None and image.data is None and len(image.frames) < 10
    assert log > (len(image.frames) + 1) * (image.page_size + 24)  # stale frames past them
    assert image_bytes(db) == seen(db)
    held.close()
    conn.close()


def test_a_log_that_does_not_read_as_sqlite_counts_it_is_read_through_sqlite(
    tmp_path: Path,
) -> None:
    db = tmp_path / "graph.sqlite"
    conn = writer(db)
    write(conn, range(500), "a")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    held = snapshot(db)
    write(conn, range(500), "b")
    log = db.with_name(db.name + "-wal")
    raw = bytearray(log.read_bytes())
    raw[32 + 8 : 32 + 12] = b"\xff\xff\xff\xff"  # the first frame's salt: not this log's
    # (SQLite reads its frames by its index in shared memory, not by their salts)
    log.write_bytes(bytes(raw))
    image = wal_image(db)
    assert image is not None and image.data is not None
    with image.reading() as read:
        assert b"".join(read(i, BLOCK) for i in range(-(-image.size // BLOCK))) == seen(db)
    held.close()
    conn.close()


def test_no_image_where_the_file_is_what_readers_read(tmp_path: Path) -> None:
    db = tmp_path / "graph.sqlite"
    conn = writer(db)
    write(conn, range(100), "a")
    assert wal_image(db) is None  # no reader: its passive checkpoint copies every frame
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert wal_image(db) is None  # an empty log
    conn.close()
    plain = tmp_path / "plain.sqlite"
    with closing(sqlite3.connect(plain)) as other:
        other.execute("CREATE TABLE t (v)")
        other.commit()
    assert wal_image(plain) is None  # not in write-ahead-log mode
