"""The PostgreSQL plumbing shared by every server store: locations, connections,
workspaces (one schema each) and error translation.

A location is ``postgresql://user[:password]@host:port/db?workspace=NAME`` (a Unix
socket: ``postgresql://user@/db?host=/socket/dir&workspace=NAME``). ``workspace``
names the schema that holds the index (default ``public``); ``cache`` names the local
directory for the derived files (graph snapshot, BM25, tables), by default one per
location under ``$QUILLIAN_CACHE`` or ``~/.cache/quillian``. Every other query parameter
goes to libpq unchanged.

Opening a workspace connects once to check the server (reachable, credentials, the
``vector`` extension) and raises :class:`~quillian.errors.StoreError` naming the
problem before anything is written; then a :class:`psycopg_pool.ConnectionPool`
serves the stores, each connection with ``search_path`` set to the workspace.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from quillian.errors import ConfigError, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "PgStore",
    "PostgresLocation",
    "Workspace",
    "is_postgres_location",
    "parse_location",
    "writer_lock",
]

SCHEMES = ("postgresql://", "postgres://")
#: The version of the workspace tables this Quillian reads and writes.
SCHEMA_VERSION = 1
#: The HNSW search breadth of every pooled connection; a search for more than half as
#: many neighbours widens it for its own transaction.
EF_SEARCH = 64
#: Seconds to wait for the server before calling it unreachable.
CONNECT_TIMEOUT = 10
_WORKSPACE = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# Every table of a workspace; vector collections add one table each (see vectors.py).
# Keys and ids use the "C" collation so that ORDER BY matches Python's sorted().
DDL = (
    "CREATE TABLE IF NOT EXISTS quillian_meta (key text PRIMARY KEY, value text NOT NULL)",
    'CREATE TABLE IF NOT EXISTS documents (id text COLLATE "C" PRIMARY KEY, '
    "title text NOT NULL, text text NOT NULL, source text NOT NULL, metadata text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chunks (seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE, "
    'id text COLLATE "C" PRIMARY KEY, doc_id text COLLATE "C" NOT NULL, idx integer NOT NULL, '
    "text text NOT NULL, char_start integer NOT NULL, char_end integer NOT NULL, "
    "title text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id, idx)",
    'CREATE TABLE IF NOT EXISTS doc_status (doc_id text COLLATE "C" PRIMARY KEY, '
    "status text NOT NULL, error text NOT NULL, source text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS doc_status_by_status ON doc_status (status, doc_id)",
    'CREATE TABLE IF NOT EXISTS kv (namespace text COLLATE "C" NOT NULL, '
    'key text COLLATE "C" NOT NULL, value bytea NOT NULL, PRIMARY KEY (namespace, key))',
    'CREATE TABLE IF NOT EXISTS files (path text COLLATE "C" PRIMARY KEY, '
    "sha256 text NOT NULL, data bytea NOT NULL)",
    "CREATE TABLE IF NOT EXISTS vector_collections (name text PRIMARY KEY, dim integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS graph_nodes (seq bigint GENERATED ALWAYS AS IDENTITY "
    'PRIMARY KEY, id text COLLATE "C" NOT NULL UNIQUE, kind smallint NOT NULL)',
    "CREATE TABLE IF NOT EXISTS graph_edges (seq bigint GENERATED ALWAYS AS IDENTITY "
    "PRIMARY KEY, source bigint NOT NULL, target bigint NOT NULL, kind smallint NOT NULL, "
    "weight real NOT NULL, relation integer NOT NULL)",
)


def is_postgres_location(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL rather than a directory."""
    return isinstance(location, str) and location.startswith(SCHEMES)


@dataclass(frozen=True)
class PostgresLocation:
    """A parsed location: the URL given, what libpq gets, the workspace and the local
    cache; :attr:`display` leaves out the password."""

    url: str
    conninfo: str
    workspace: str
    cache: Path
    display: str

    def __str__(self) -> str:
        return self.display


def parse_location(location: str) -> PostgresLocation:
    """Split ``location`` into libpq's URL, the workspace and the cache directory."""
    if not is_postgres_location(location):
        raise ConfigError(f"{location!r}: not a postgresql:// location")
    parts = urlsplit(location)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in ("workspace", "cache")}
    rest = [(k, v) for k, v in query if k not in ("workspace", "cache")]
    workspace = ours.get("workspace", "public") or "public"
    if not _WORKSPACE.fullmatch(workspace):
        raise ConfigError(
            f"workspace {workspace!r}: use lower-case letters, digits and underscores "
            "(at most 63, not starting with a digit)"
        )
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), ""))
    host = parts.hostname or dict(rest).get("host", "localhost")
    user = parts.username or os.environ.get("PGUSER", "")
    where = f"{host}:{parts.port}" if parts.port else host
    display = f"postgresql://{user}@{where}{parts.path}?workspace={workspace}"
    if ours.get("cache"):
        cache = Path(ours["cache"]).expanduser()
    else:
        root = Path(os.environ.get("QUILLIAN_CACHE", "~/.cache/quillian")).expanduser()
        cache = root / "postgres" / hashlib.sha256(display.encode()).hexdigest()[:16]
    return PostgresLocation(location, conninfo, workspace, cache, display)


def connect(location: PostgresLocation, **kwargs: Any) -> psycopg.Connection[Any]:
    """One connection to the server, its failure translated into a :class:`StoreError`
    that says whether the server is unreachable or the credentials are wrong."""
    try:
        return psycopg.connect(location.conninfo, connect_timeout=CONNECT_TIMEOUT, **kwargs)
    except psycopg.OperationalError as exc:
        raise StoreError(f"{location}: {_explain(exc)}") from exc


@contextmanager
def writer_lock(location: PostgresLocation, on_wait: Callable[[], None]) -> Iterator[None]:
    """Hold the workspace's writer lock on the server: a session-level advisory lock
    (``pg_advisory_lock``) keyed by the workspace, so builds and deletes run from
    different machines, each with its own local cache, take turns as writers on one
    machine do. ``on_wait`` is called once before waiting for another writer; the lock
    goes with its connection, so a writer that dies frees it."""
    digest = hashlib.sha256(f"quillian.writer:{location.workspace}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    with connect(location, autocommit=True) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if not (row and row[0]):
            on_wait()
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _explain(exc: psycopg.OperationalError) -> str:
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    detail = lines[0].strip().removeprefix("connection failed: ") if lines else repr(exc)
    if "password authentication failed" in text or "no password supplied" in text:
        return f"wrong credentials: the server refused the user name or password ({detail})"
    if re.search(r'database ".*" does not exist', text):
        return f"no such database ({detail})"
    if re.search(r'role ".*" does not exist', text):
        return f"no such user ({detail})"
    return f"PostgreSQL server unreachable ({detail})"


class Workspace:
    """One index's schema on a server, with the connection pool its stores share.

    ``create=False`` only checks the server and whether the workspace exists
    (:attr:`exists`); ``create=True`` also creates the ``vector`` extension (when
    missing and allowed), the schema and its tables.
    """

    def __init__(
        self, location: str | PostgresLocation, *, create: bool = True, max_size: int = 4
    ) -> None:
        self.location = (
            location if isinstance(location, PostgresLocation) else (parse_location(location))
        )
        self.schema = self.location.workspace
        with connect(self.location, autocommit=True) as conn:
            self.exists = _schema_ready(conn, self.schema)
            if create and not self.exists:
                self._create(conn)
                self.exists = True
            elif self.exists:
                self._check_version(conn)
        self._lock = threading.Lock()
        self._pool: ConnectionPool[Any] | None = None
        self._max_size = max_size
        self.id = (self.meta("workspace_id") or "") if self.exists else ""

    @property
    def name(self) -> str:
        return self.location.display

    def __repr__(self) -> str:
        return f"Workspace({self.location.display!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pool; closing twice is harmless."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    @contextmanager
    def connection(
        self, action: str, *, transaction: bool = True
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in one transaction (committed on success), with server
        errors raised as :class:`StoreError` naming the location and the action.
        ``transaction=False`` (one read statement) saves the BEGIN and COMMIT round trips."""
        try:
            with self._get_pool().connection() as conn:
                if transaction:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: cannot {action}: {exc}") from exc

    def meta(self, key: str) -> str | None:
        """A value of the workspace's ``quillian_meta`` table."""
        with self.connection("read workspace metadata") as conn:
            row = conn.execute("SELECT value FROM quillian_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.connection("write workspace metadata") as conn:
            conn.execute(
                "INSERT INTO quillian_meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def _get_pool(self) -> ConnectionPool[Any]:
        with self._lock:
            if self._pool is None:
                if not self.exists:
                    raise StoreError(f"{self.location}: no such workspace")
                search_path = f"-c search_path={self.schema},public"
                self._pool = ConnectionPool(
                    self.location.conninfo,
                    min_size=1,
                    max_size=self._max_size,
                    kwargs={
                        "options": f"{search_path} -c hnsw.ef_search={EF_SEARCH}",
                        "connect_timeout": CONNECT_TIMEOUT,
                        "autocommit": True,
                    },
                    open=True,
                    name=f"quillian-{self.schema}",
                )
            return self._pool

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        _ensure_vector(conn, self.location)
        schema = sql.Identifier(self.schema)
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.schema,))
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
                conn.execute(sql.SQL("SET LOCAL search_path = {}, public").format(schema))
                for statement in DDL:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO quillian_meta (key, value) VALUES ('schema_version', %s), "
                    "('workspace_id', %s) ON CONFLICT (key) DO NOTHING",
                    (str(SCHEMA_VERSION), uuid.uuid4().hex),
                )
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: cannot create the workspace: {exc}") from exc

    def _check_version(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(
            sql.SQL("SELECT value FROM {}.quillian_meta WHERE key = 'schema_version'").format(
                sql.Identifier(self.schema)
            )
        ).fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"{self.location}: workspace schema version {row and row[0]!r}, "
                f"this Quillian reads version {SCHEMA_VERSION}"
            )


def _schema_ready(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether ``schema`` holds a Quillian workspace (its metadata table)."""
    row = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".quillian_meta',)).fetchone()
    return row is not None and row[0] is not None


def _ensure_vector(conn: psycopg.Connection[Any], location: PostgresLocation) -> None:
    """Create the ``vector`` extension when the database lacks it, or say why it cannot."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        raise StoreError(
            f"{location}: the pgvector extension ('vector') is not installed on this server; "
            "install pgvector (https://github.com/pgvector/pgvector) and retry"
        )
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"{location}: the database has no 'vector' extension and this user may not "
            "create it; ask an administrator to run CREATE EXTENSION vector in it"
        ) from exc
    except psycopg.errors.UniqueViolation:
        pass  # another process created it at the same moment


class PgStore:
    """Base class of the server stores: a workspace (shared, or opened from a location
    and then owned), the closed flag and the transaction helper."""

    def __init__(self, workspace: Workspace | str) -> None:
        self._owns = not isinstance(workspace, Workspace)
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self._closed = False

    def close(self) -> None:
        """Release the store (and the workspace when it opened it); harmless twice."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.workspace.name!r})"

    @contextmanager
    def _conn(self, action: str, *, transaction: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A connection (in one transaction unless told otherwise); raises
        :class:`StoreError` once the store is closed."""
        if self._closed:
            raise StoreError(f"{self.workspace.name}: cannot {action}: the store is closed")
        with self.workspace.connection(action, transaction=transaction) as conn:
            yield conn
