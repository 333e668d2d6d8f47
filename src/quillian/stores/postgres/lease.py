"""The writer lock of a workspace: a lease row on the server that outlives a restart.

Builds and deletes run from different machines, each with its own local cache, so only
the server can make them take turns. A session advisory lock alone goes with its
connection: when the server restarted mid-build it was silently gone, and a second
writer built beside the first. So the lock is a row (``writer_lease``: owner token,
holder, expiry) that a heartbeat thread renews every :data:`HEARTBEAT` seconds for
:data:`LEASE_SECONDS`, reconnecting after a restart; a second writer waits while the
row names a live owner. The advisory lock is kept beside it as a liveness probe: a
writer that died lost its session, so on the same server run (``started``, the
server's start time when the holder last held the advisory lock) a second writer may
take over at once instead of waiting for the lease to run out; so may a writer on the
host of a holder that no longer runs. Otherwise a lease its holder could not release
(the server was away when it stopped) is free after :data:`LEASE_SECONDS`.

Fencing: while a process holds the lease, every transaction it makes on the location
checks the row still names it (``_pg.FENCES``), so a writer whose lease ran out and was
taken by another (an outage longer than the lease) stops before writing anything.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg

from quillian.errors import StoreError
from quillian.stores.postgres._connect import (
    PostgresLocation,
    Retry,
    connect,
    connect_once,
    connection_lost,
    first_line,
)
from quillian.stores.postgres._pg import FENCES, LEASE_DDL, Workspace

__all__ = ["HEARTBEAT", "LEASE_SECONDS", "holder_name", "process_gone", "writer_lock"]

logger = logging.getLogger(__name__)

#: How long a lease lasts unrenewed: a writer cut off from the server for longer (its
#: builds stop on the connection deadline, 30 s by default, well before) loses it.
LEASE_SECONDS = 60.0
#: Seconds between two renewals (and between reconnection attempts after a restart).
HEARTBEAT = 2.0
#: Seconds between two looks at the lease by a writer waiting for it.
POLL = 0.5

_TAKE = """
SELECT owner, holder, owner = '' OR expires < now(),
       started IS NOT DISTINCT FROM pg_postmaster_start_time()
FROM writer_lease WHERE id = 1 FOR UPDATE
"""
_CLAIM = """
UPDATE writer_lease SET owner = %(token)s, holder = %(holder)s,
    started = CASE WHEN %(probe)s THEN pg_postmaster_start_time() END,
    expires = now() + make_interval(secs => %(ttl)s)
WHERE id = 1
"""
_RENEW = """
UPDATE writer_lease SET expires = now() + make_interval(secs => %(ttl)s),
    started = CASE WHEN %(probe)s THEN pg_postmaster_start_time() END
WHERE id = 1 AND owner = %(token)s
"""
#: Tokens of leases this process could not release (the server was away): its later
#: writers take them over at once.
_LEFT: set[str] = set()

_RELEASE = "UPDATE writer_lease SET owner = '', holder = '', started = NULL, expires = now() "
_RELEASE += "WHERE id = 1 AND owner = %(token)s"


@contextmanager
def writer_lock(
    location: PostgresLocation, on_wait: Callable[[], None], *, create: bool = True
) -> Iterator[None]:
    """Hold the workspace's writer lease while the body writes; ``on_wait`` is called
    once before waiting for another writer. With ``create`` the workspace is made when
    missing; without, a missing workspace is not locked (there is nothing to write)."""
    with Workspace(location, create=create) as workspace:
        if not workspace.exists:
            yield
            return
    lease = _Lease(location)
    lease.acquire(on_wait)
    try:
        yield
    finally:
        lease.release()


class _Lease:
    """One acquisition of a workspace's lease, with its heartbeat thread."""

    def __init__(self, location: PostgresLocation) -> None:
        self.location = location
        self.token = uuid.uuid4().hex
        self.holder = holder_name()
        digest = hashlib.sha256(f"quillian.writer:{location.workspace}".encode()).digest()
        self.key = int.from_bytes(digest[:8], "big", signed=True)
        self.conn: psycopg.Connection[Any] | None = None
        self.probe = False  # whether self.conn holds the advisory lock
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"quillian-lease-{location.workspace}", daemon=True
        )

    def acquire(self, on_wait: Callable[[], None]) -> None:
        """Wait until the lease is free (released, run out, or its holder's session gone
        on the same server run), then take it and start renewing it."""
        waited = False
        retry: Retry | None = None
        while True:
            try:
                if self._try_take():
                    break
                retry = None
            except psycopg.Error as exc:  # the server went away while waiting
                self._drop()
                if not connection_lost(exc):
                    why = f"cannot take the writer lock: {first_line(exc)}"
                    raise StoreError(f"{self.location}: {why}") from exc
                retry = retry or Retry(self.location, "take the writer lock")
                retry.wait(first_line(exc))
                continue
            if not waited:
                on_wait()
                waited = True
            self._stop.wait(POLL)
        FENCES[self.location.url] = self.token
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and free the lease (one attempt: where the server is away, the
        lease runs out by itself)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        FENCES.pop(self.location.url, None)
        try:
            try:
                self._connection(once=True).execute(_RELEASE, {"token": self.token})
            except psycopg.Error:  # a connection the server dropped since the last beat
                self._drop()
                self._connection(once=True).execute(_RELEASE, {"token": self.token})
        except (psycopg.Error, StoreError) as exc:
            _LEFT.add(self.token)
            why = first_line(exc)
            logger.info("%s: the writer lock runs out by itself (%s)", self.location, why)
        finally:
            self._drop()

    def _try_take(self) -> bool:
        conn = self._connection()
        args = {"token": self.token, "holder": self.holder, "ttl": LEASE_SECONDS}
        if not self.probe:
            self.probe = bool(_one(conn, "SELECT pg_try_advisory_lock(%s)", (self.key,)))
        with conn.transaction():
            conn.execute(
                "INSERT INTO writer_lease (id, owner, holder, expires) "
                "VALUES (1, '', '', now()) ON CONFLICT (id) DO NOTHING"
            )
            row = conn.execute(_TAKE).fetchone()
            free = row is None or self._free(*row)
            if free:
                conn.execute(_CLAIM, {**args, "probe": self.probe})
        if not free and self.probe:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            self.probe = False
        return free

    @property
    def _options(self) -> dict[str, Any]:
        return {"autocommit": True, "options": f"-c search_path={self.location.workspace}"}

    def _free(self, owner: str, holder: str, lapsed: bool, same_run: bool) -> bool:
        """Whether the lease may be taken: released or run out; its holder's session
        gone on the same server run (this lease's probe got the advisory lock); or its
        holder known dead (this process left it when the server was away, or it names a
        process of this host that no longer runs)."""
        if lapsed or (self.probe and same_run) or owner in _LEFT:
            return True
        return process_gone(holder)

    def _connection(self, *, once: bool = False) -> psycopg.Connection[Any]:
        """The lease's own connection (not pooled: it holds the advisory lock), made
        with the table in place (a workspace older than the lease has none yet); a new
        one is retried until the deadline unless made ``once``."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return self.conn
        self._drop()
        schema = self.location.workspace
        conn = (connect_once if once else connect)(self.location, **self._options)
        exists = _one(
            conn,
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'writer_lease'",
            (schema,),
        )
        if not exists:
            conn.execute(LEASE_DDL)
        self.conn = conn
        return conn

    def _beat(self) -> None:
        """Renew the lease until released; after a restart, reconnect and take the
        advisory lock again. A lease found taken by another is left alone: the fence
        stops this process's next transaction."""
        args = {"token": self.token, "ttl": LEASE_SECONDS}
        while not self._stop.wait(HEARTBEAT):
            try:
                conn = self._connection(once=True)
                if not self.probe:
                    self.probe = bool(_one(conn, "SELECT pg_try_advisory_lock(%s)", (self.key,)))
                if conn.execute(_RENEW, {**args, "probe": self.probe}).rowcount == 0:
                    logger.error("%s: the writer lock was taken by another writer", self.location)
                    return
            except (psycopg.Error, StoreError) as exc:
                why = first_line(exc)
                logger.info("%s: cannot renew the writer lock yet (%s)", self.location, why)
                self._drop()

    def _drop(self) -> None:
        """Close the lease's connection (its advisory lock goes with it)."""
        if self.conn is not None:
            with suppress(psycopg.Error):
                self.conn.close()
        self.conn = None
        self.probe = False


def holder_name() -> str:
    """This process as a lease or a job record names its holder: ``HOST pid N``."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def process_gone(holder: str) -> bool:
    """Whether ``holder`` (:func:`holder_name`) names a process of this host, not this
    one, that no longer runs (a process elsewhere cannot be checked: False)."""
    host, _, pid = holder.rpartition(" pid ")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _one(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]
