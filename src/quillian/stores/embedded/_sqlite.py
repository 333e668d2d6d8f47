"""The SQLite plumbing shared by the embedded document, status and key-value stores.

Each store owns one connection in WAL mode, opened with ``check_same_thread=False`` and
guarded by a lock, so a store may be shared between threads. Several stores may use the
same database file; each records its schema version in ``quillian_schema``.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, ClassVar, Self

from quillian.errors import IndexDamagedError, StoreError

__all__ = ["SqliteStore", "quick_check", "sqlite_rebuild_hint"]

#: Ids per ``IN (...)`` query; far below SQLite's limit on bound variables.
IN_BATCH = 500
#: Rows fetched per page by iterators, which never hold the lock between pages.
PAGE = 1000

_SCHEMA_TABLE = (
    "CREATE TABLE IF NOT EXISTS quillian_schema (name TEXT PRIMARY KEY, version INTEGER NOT NULL)"
)


class SqliteStore:
    """Base class: one locked WAL connection, transactions and error translation.

    Subclasses set ``SCHEMA_NAME``, ``SCHEMA_VERSION`` and ``DDL`` (the statements that
    create their tables, all ``IF NOT EXISTS``).
    """

    SCHEMA_NAME: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int] = 1
    #: Older versions this class reads as they are: such a store is marked
    #: ``SCHEMA_VERSION`` when opened (a later Quillian's writes need not be read by an
    #: earlier one, which then refuses the store by its version).
    SCHEMA_UPGRADES: ClassVar[frozenset[int]] = frozenset()
    DDL: ClassVar[tuple[str, ...]]

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = _connect(self._path)
        try:
            self._init_schema()
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._path)!r})"

    def _init_schema(self) -> None:
        with self._transaction("create the schema") as conn:
            conn.execute(_SCHEMA_TABLE)
            for statement in self.DDL:
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO quillian_schema (name, version) VALUES (?, ?)",
                (self.SCHEMA_NAME, self.SCHEMA_VERSION),
            )
            row = conn.execute(
                "SELECT version FROM quillian_schema WHERE name = ?", (self.SCHEMA_NAME,)
            ).fetchone()
            if row[0] in self.SCHEMA_UPGRADES:
                self._upgrade(conn, row[0])
                conn.execute(
                    "UPDATE quillian_schema SET version = ? WHERE name = ?",
                    (self.SCHEMA_VERSION, self.SCHEMA_NAME),
                )
                row = (self.SCHEMA_VERSION,)
            if row[0] == self.SCHEMA_VERSION:
                self._schema_ready(conn)
        if row[0] != self.SCHEMA_VERSION:
            raise StoreError(
                f"{self._path}: {self.SCHEMA_NAME} schema version {row[0]}, "
                f"this Quillian reads version {self.SCHEMA_VERSION}"
            )

    def _upgrade(self, conn: sqlite3.Connection, version: int) -> None:
        """Bring tables of ``version`` (one of ``SCHEMA_UPGRADES``) to this version's,
        in the transaction that marks them so; none by default (read as they are)."""

    def _schema_ready(self, conn: sqlite3.Connection) -> None:
        """What needs the tables in this version's form (triggers on a column an
        upgrade adds), in the schema's transaction; none by default."""

    @contextmanager
    def _errors(self, action: str) -> Iterator[sqlite3.Connection]:
        """Hold the lock and turn SQLite errors into :class:`StoreError` naming the file."""
        with self._lock:
            if self._conn is None:
                raise StoreError(f"{self._path}: cannot {action}: the store is closed")
            try:
                yield self._conn
            except sqlite3.Error as exc:
                if type(exc) is sqlite3.DatabaseError:  # "malformed", "not a database"
                    raise _damaged(self._path, str(exc)) from exc
                raise StoreError(f"{self._path}: cannot {action}: {exc}") from exc

    @contextmanager
    def _transaction(self, action: str) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed on success, rolled back on any error."""
        with self._errors(action) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def release_free_pages(self) -> int:
        """Give the database's free pages back to the file system (a build empties its
        caches: the embedding cache's pages alone took 230 MB of the 20 MB text's index)
        and return how many there were. A database made before its stores set
        ``auto_vacuum`` keeps them (until a ``VACUUM``)."""
        with self._errors("release free pages") as conn:
            (free,) = conn.execute("PRAGMA freelist_count").fetchone()
            conn.executescript("PRAGMA incremental_vacuum;")  # execute() frees one page
            return int(free)

    def pack(self) -> None:
        """Rewrite the database with its pages full (SQLite's ``VACUUM``), and empty the
        write-ahead log it went through. Rows put in an order other than their keys'
        (chunk ids, the caches' keys) split pages and leave them part full: the 100k
        passages' store of docs/scale.md took 190 MB, 175 MB packed in 1.3 s
        (``research/store_bytes.py``, under load). A build that wrote the whole store
        packs it; an update, which writes a few rows, does not."""
        with self._errors("pack the database") as conn:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _query(self, action: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._errors(action) as conn:
            return conn.execute(sql, params).fetchall()

    def _write(self, action: str, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        with self._transaction(action) as conn:
            conn.executemany(sql, rows)

    def _by_keys(
        self, action: str, sql: str, keys: Sequence[str], prefix: Sequence[Any] = ()
    ) -> dict[str, Any]:
        """Run ``sql`` (with one ``{marks}`` placeholder) over ``keys`` in batches.

        ``prefix`` holds the parameters bound before the keys. The first column of every
        row is its key; returns ``{key: row}``.
        """
        found: dict[str, Any] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), IN_BATCH):
            batch = unique[start : start + IN_BATCH]
            marks = ",".join("?" * len(batch))
            for row in self._query(action, sql.format(marks=marks), [*prefix, *batch]):
                found[row[0]] = row
        return found


def sqlite_rebuild_hint(path: Path) -> str:
    """How to rebuild what the database at ``path`` held: its documents are in it, so
    they are indexed again from the corpus, with the damaged file moved aside."""
    return f"quillian index CORPUS --out {path.parent} after moving {path.name} aside"


def _damaged(path: Path, reason: str) -> IndexDamagedError:
    return IndexDamagedError(str(path), reason, rebuild=sqlite_rebuild_hint(path))


def quick_check(path: Path) -> None:
    """Run SQLite's ``PRAGMA quick_check`` over the database at ``path`` (its pages and
    b-trees; it reads the whole file, about 2 ms a megabyte) and raise
    :class:`IndexDamagedError` naming it when the check fails."""
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    except sqlite3.Error as exc:
        raise _damaged(path, f"cannot open: {exc}") from exc
    try:
        rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise _damaged(path, str(exc)) from exc
    finally:
        conn.close()
    if rows != ["ok"]:  # a report line per problem, under a "*** in database" heading
        found = [line for row in rows for line in row.splitlines() if line.strip("* ")]
        problems = [line for line in found if not line.startswith("***")]
        raise _damaged(path, "integrity check failed: " + "; ".join(problems[:2]))


def wal_mode(path: Path) -> bool:
    """Whether the SQLite database at ``path`` is in write-ahead-log mode (its header's
    read and write versions are 2), read from its first 20 bytes: a database patched
    where it is. False where it is missing or shorter."""
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18:20] == b"\x02\x02"


def wal_bytes(path: Path) -> int:
    """The size of the write-ahead log beside the database at ``path`` (0: none)."""
    try:
        return path.with_name(path.name + "-wal").stat().st_size
    except FileNotFoundError:
        return 0


def copy_with_log(source: Path, target: Path) -> None:
    """Copy the database ``source``, in write-ahead-log mode, to ``target`` with the
    pages its log holds folded in: the file and its log copied as files (no writer may
    run, so they are what SQLite finds after a crash), then the log copied back into the
    copy, whose last connection removes it."""
    shutil.copyfile(source, target)
    if wal_bytes(source):
        log = "-wal"
        shutil.copyfile(source.with_name(source.name + log), target.with_name(target.name + log))
        with closing(sqlite3.connect(target)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` in WAL mode, raising :class:`StoreError` naming it on any failure."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, expected an SQLite database file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"{path}: cannot open the SQLite database: {exc}") from exc
    try:
        # pages freed by deletes can go back to the file system (release_free_pages);
        # this takes effect only in a new database, before its first table, and is set
        # only there: on one that has tables it still writes the header's page, so
        # every open (a served index reopening after an update) changed the file, and
        # the next build and open checked it whole (quick_check: about 0.2 s at 100k)
        if not conn.execute("PRAGMA page_count").fetchone()[0]:
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _damaged(path, f"not an SQLite database, or unreadable: {exc}") from exc
    return conn
