"""The PostgreSQL plumbing shared by every server store: workspaces (one schema
each), their connection pool and error translation; locations and single connections
are in :mod:`._connect`.

A location is ``postgresql://user[:password]@host:port/db?workspace=NAME`` (a Unix
socket: ``postgresql://user@/db?host=/socket/dir&workspace=NAME``). ``workspace``
names the schema that holds the index (default ``public``); ``cache`` names the local
directory for the derived files (graph snapshot, BM25, tables), by default one per
location under ``$QUILLIAN_CACHE`` or ``~/.cache/quillian``. ``deadline`` is how many
seconds a refused or lost connection is retried before giving up (default
:data:`~._connect.DEADLINE`). Every other query parameter goes to libpq unchanged;
libpq's ``connect_timeout`` defaults to :data:`~._connect.CONNECT_TIMEOUT` here.

Opening a workspace connects once to check the server (reachable, credentials, rights,
the ``vector`` extension) and raises :class:`~quillian.errors.StoreError` naming the
problem before anything is written; then a :class:`psycopg_pool.ConnectionPool`
serves the stores, each connection with ``search_path`` set to the workspace and
checked when it is taken from the pool (a server restart leaves stale ones there).

Outages: a connection that cannot be made, or a pooled one that is found dead, is
retried with a doubling pause until the deadline; a server still away by then, or a
connection lost in the middle of a statement (which cannot be replayed), raises
:class:`~quillian.errors.StoreUnavailableError`, one line with libpq's reason. A build
stops on it with its index incomplete, and rerunning it resumes. No message names a
password: locations are shown by :func:`~quillian.stores.locations.location_name`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from quillian.errors import ConfigError, StoreError, StoreUnavailableError
from quillian.stores.postgres._connect import (
    PostgresLocation,
    Retry,
    connect,
    connect_once,
    connection_lost,
    denied,
    first_line,
    is_postgres_location,
    parse_location,
)
from quillian.stores.postgres.textcodec import ADAPTERS

__all__ = [
    "CHANGE_LOG_DDL",
    "SCHEMA_VERSION",
    "PgStore",
    "PostgresLocation",
    "Workspace",
    "is_postgres_location",
    "parse_location",
]

#: The version of the workspace tables this Quillian reads and writes.
SCHEMA_VERSION = 1
#: The oldest server version taken (``server_version_num``): the change log needs 13
#: (``xid8``, ``pg_snapshot``), the vector ids' summary 14 (``bit_xor``).
MIN_SERVER_VERSION = 140000
#: The HNSW search breadth of every pooled connection; a search for more than half as
#: many neighbours widens it for its own transaction.
EF_SEARCH = 64
#: Seconds to wait for a connection from the pool before probing the server directly.
POOL_WAIT = 5.0

#: The writer lease (see lease.py): one row, kept by the writer's heartbeat; a
#: workspace made before it existed gets it from its first writer.
LEASE_DDL = (
    "CREATE TABLE IF NOT EXISTS writer_lease (id smallint PRIMARY KEY CHECK (id = 1), "
    "owner text NOT NULL, holder text NOT NULL, started timestamptz, "
    "expires timestamptz NOT NULL)"
)

#: A graph written whole (graph.py): its snapshot's files in parts; a workspace made
#: before it existed gets it from its first graph writer. The arrays' bytes are stored
#: uncompressed (EXTERNAL): PostgreSQL's pglz made writing them several times slower
#: (12 MB of sorted integers in 64 KB rows: 0.79 s against 0.10 s uncompressed,
#: research/pg_file_blocks.py).
GRAPH_ARRAYS_DDL = (
    'CREATE TABLE IF NOT EXISTS graph_arrays (name text COLLATE "C" NOT NULL, '
    "part integer NOT NULL, data bytea NOT NULL, PRIMARY KEY (name, part))",
    "ALTER TABLE graph_arrays ALTER COLUMN data SET STORAGE EXTERNAL",
)

#: Files sent by blocks (files.py): each distinct 64 KB block once, by its SHA-256; a
#: file's row lists its blocks. A workspace made before gets both from its first push.
#: Blocks are stored uncompressed, as the graph's arrays are.
FILE_BLOCKS_DDL = (
    'CREATE TABLE IF NOT EXISTS file_blocks (sha256 text COLLATE "C" PRIMARY KEY, '
    "data bytea NOT NULL)",
    "ALTER TABLE file_blocks ALTER COLUMN data SET STORAGE EXTERNAL",
    "ALTER TABLE files ADD COLUMN IF NOT EXISTS blocks text[]",
)

#: The change log of the documents' chunks and statuses (documents.py, PgChangeLog):
#: a trigger on each table logs the document id with the writing transaction's id, so a
#: mark is a snapshot and the changes since are those it does not see. ``floor``: the
#: transaction id below which the log was forgotten. A workspace made before the log
#: gets it from its first build. The function runs with the workspace's search path.
CHANGE_LOG_DDL = (
    "CREATE TABLE IF NOT EXISTS doc_changes (xid xid8 NOT NULL DEFAULT pg_current_xact_id(), "
    'doc_id text COLLATE "C" NOT NULL)',
    "CREATE INDEX IF NOT EXISTS doc_changes_by_xid ON doc_changes (xid)",
    "CREATE TABLE IF NOT EXISTS doc_changes_meta (one smallint PRIMARY KEY CHECK (one = 0), "
    "log text NOT NULL, floor xid8 NOT NULL)",
    "INSERT INTO doc_changes_meta VALUES (0, md5(gen_random_uuid()::text), '0') "
    "ON CONFLICT (one) DO NOTHING",
    "CREATE OR REPLACE FUNCTION log_doc_change() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path FROM CURRENT AS $$ BEGIN "
    "IF TG_OP <> 'INSERT' THEN INSERT INTO doc_changes (doc_id) VALUES (OLD.doc_id); END IF; "
    "IF TG_OP <> 'DELETE' THEN INSERT INTO doc_changes (doc_id) VALUES (NEW.doc_id); END IF; "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE TRIGGER chunks_logged AFTER INSERT OR UPDATE OR DELETE ON chunks "
    "FOR EACH ROW EXECUTE FUNCTION log_doc_change()",
    "CREATE OR REPLACE TRIGGER doc_status_logged AFTER INSERT OR UPDATE OR DELETE ON doc_status "
    "FOR EACH ROW EXECUTE FUNCTION log_doc_change()",
)

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
    *GRAPH_ARRAYS_DDL,
    *FILE_BLOCKS_DDL,
    LEASE_DDL,
    *CHANGE_LOG_DDL,
)


#: Per location URL, the token of the writer lease this process holds (lease.py): every
#: transaction on that location checks the lease is still its own before it commits.
FENCES: dict[str, str] = {}


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
            version = conn.info.server_version
            if version < MIN_SERVER_VERSION:
                raise ConfigError(
                    f"{self.location.display}: the PostgreSQL server is version"
                    f" {version // 10000}; Quillian needs {MIN_SERVER_VERSION // 10000} or later"
                )
            try:
                self.exists = _schema_ready(conn, self.schema)
                if self.exists:
                    _check_rights(conn, self.location, write=create)
                if create and not self.exists:
                    self._create(conn)
                    self.exists = True
                elif self.exists:
                    self._check_version(conn)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise denied(self.location, exc, conn.info.user) from exc
            except psycopg.Error as exc:
                if connection_lost(exc, conn):
                    raise StoreUnavailableError(
                        f"{self.location}: lost the connection to the PostgreSQL server "
                        f"({first_line(exc)}); run the command again once it is back"
                    ) from exc
                raise StoreError(f"{self.location}: {first_line(exc)}") from exc
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
        ``transaction=False`` (one read statement) saves the BEGIN and COMMIT round trips.

        Taking the connection is retried until the deadline while the server is away;
        a connection lost in the body raises :class:`StoreUnavailableError` (the body
        cannot be replayed). While this process holds the location's writer lease, a
        transaction that wrote checks the lease is still its own before it commits
        (fencing: a writer that lost it to another stops before its writes land). One
        that only read has nothing to fence and is not checked: a read must not fail for
        a lease it does not need, and in REPEATABLE READ the lease row's heartbeat (every
        few seconds) would make the check a serialization error once the read outlasts a
        beat."""
        pool, conn = self._checkout(action)
        try:
            if transaction:
                with conn.transaction():
                    yield conn
                    self._fence(conn, action)  # last: it holds the lease row to COMMIT
            else:
                yield conn
        except psycopg.Error as exc:
            raise self._error(action, exc, conn) from exc
        finally:
            pool.putconn(conn)

    def _checkout(self, action: str) -> tuple[ConnectionPool[Any], psycopg.Connection[Any]]:
        """A live connection from the pool; while none comes, the server is probed with
        a connection of its own for the reason, the pool is replaced (its connections
        died with the server) and the attempt retried until the deadline."""
        retry = Retry(self.location, action)
        while True:
            pool = self._get_pool()
            try:
                return pool, pool.getconn(timeout=min(max(retry.left(), 0.5), POOL_WAIT))
            except (PoolTimeout, psycopg.OperationalError) as exc:
                self._reset_pool(pool)
                reason = self._probe() or f"no connection from the pool ({first_line(exc)})"
            retry.wait(reason)
            while reason := self._probe():  # no pool (its reconnection pauses) till it answers
                retry.wait(reason)

    def _probe(self) -> str:
        """Why the server cannot be reached now ("" where it answers)."""
        try:
            connect_once(self.location).close()
        except StoreError as exc:
            return str(exc).removeprefix(f"{self.location}: ")
        return ""

    def _fence(self, conn: psycopg.Connection[Any], action: str) -> None:
        token = FENCES.get(self.location.url)
        if token is None:
            return
        wrote = conn.execute("SELECT pg_current_xact_id_if_assigned() IS NOT NULL").fetchone()
        if not (wrote and wrote[0]):  # a read: no transaction id was assigned
            return
        row = conn.execute("SELECT owner FROM writer_lease WHERE id = 1 FOR SHARE").fetchone()
        if row is None or row[0] != token:
            raise StoreUnavailableError(
                f"{self.location}: cannot {action}: this process lost the writer lock "
                "(another writer took it while this one could not reach the server); "
                "stopped before writing. The other writer's build goes on"
            )

    def _error(self, action: str, exc: psycopg.Error, conn: psycopg.Connection[Any]) -> StoreError:
        if connection_lost(exc, conn):
            return StoreUnavailableError(
                f"{self.location}: cannot {action}: lost the connection to the PostgreSQL "
                f"server ({first_line(exc)}). What was stored is kept: run the command "
                "again once the server is back"
            )
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return denied(self.location, exc, conn.info.user)
        return StoreError(f"{self.location}: cannot {action}: {first_line(exc)}")

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
                        "autocommit": True,
                        "context": ADAPTERS,
                    },
                    check=ConnectionPool.check_connection,
                    reconnect_timeout=max(self.location.deadline, 1.0),
                    open=True,
                    name=f"quillian-{self.schema}",
                )
            return self._pool

    def _reset_pool(self, pool: ConnectionPool[Any]) -> None:
        """Close ``pool`` if it is still the workspace's: the next connection asked for
        makes a new one, which connects at once rather than after the old one's
        reconnection pauses."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
            else:
                return
        pool.close(timeout=1.0)

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
    """Whether ``schema`` holds a Quillian workspace (its metadata table), read from
    the catalogs, which any user may read (``to_regclass`` needs rights on the schema)."""
    row = conn.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'quillian_meta'",
        (schema,),
    ).fetchone()
    return row is not None


def _check_rights(conn: psycopg.Connection[Any], location: PostgresLocation, write: bool) -> None:
    """Refuse, in one line, a user who may not use the workspace: no USAGE on its
    schema, or a table it may not read (or, to ``write``, change)."""
    user = conn.info.user
    schema = location.workspace
    usage = conn.execute("SELECT has_schema_privilege(%s, 'USAGE')", (schema,)).fetchone()
    if not (usage and usage[0]):
        raise denied(location, _Refused(f"permission denied for schema {schema}"), user)
    needed = ("SELECT", "INSERT", "UPDATE", "DELETE") if write else ("SELECT",)
    checks = " AND ".join(f"has_table_privilege(c.oid, '{p}')" for p in needed)
    row = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = %s AND c.relkind = 'r' AND NOT ({checks}) ORDER BY c.relname LIMIT 1",
        (schema,),
    ).fetchone()
    if row is not None:
        what = "write" if write else "read"
        raise denied(location, _Refused(f"permission denied to {what} table {row[0]}"), user)


class _Refused(Exception):
    """A right found missing before the server refused a statement."""


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
        """A connection (in one transaction unless told otherwise, fenced as in
        :meth:`Workspace.connection`); raises :class:`StoreError` once the store is
        closed."""
        if self._closed:
            raise StoreError(f"{self.workspace.name}: cannot {action}: the store is closed")
        with self.workspace.connection(action, transaction=transaction) as conn:
            yield conn
