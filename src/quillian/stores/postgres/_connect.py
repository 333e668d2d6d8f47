"""Locations and connections of the PostgreSQL backend: parsing a location, one
connection with retries until the location's deadline, and what a failure means
(server away, connection lost, wrong credentials, missing rights), each as one line
that names the location without its password.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import PoolTimeout

from quillian.errors import ConfigError, StoreError, StoreUnavailableError
from quillian.stores.locations import SERVER_SCHEMES, location_name
from quillian.stores.postgres.textcodec import ADAPTERS

__all__ = [
    "CONNECT_TIMEOUT",
    "DEADLINE",
    "PostgresLocation",
    "Retry",
    "connect",
    "connect_once",
    "connection_lost",
    "denied",
    "first_line",
    "is_postgres_location",
    "parse_location",
]

logger = logging.getLogger(__name__)

SCHEMES = SERVER_SCHEMES
#: libpq's ``connect_timeout`` unless the location sets it: seconds one connection
#: attempt waits for the server. A server that has not answered within 5 s on a network
#: that works is down or unreachable, and this leaves room for several attempts within
#: the deadline.
CONNECT_TIMEOUT = 5
#: Seconds within which a refused, dead or timed-out connection is retried, unless the
#: location sets ``deadline``: long enough to ride out a server restart or a managed
#: server's failover (seconds to about half a minute), short enough that a server that
#: is gone is reported within half a minute, not after a pool timeout per statement.
#: One connection attempt may run past it by up to its ``connect_timeout``.
DEADLINE = 30.0
#: The first pause between two attempts, doubled after each up to the longest.
FIRST_PAUSE, LONGEST_PAUSE = 0.25, 4.0
_WORKSPACE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def is_postgres_location(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL rather than a directory."""
    return isinstance(location, str) and location.startswith(SCHEMES)


@dataclass(frozen=True)
class PostgresLocation:
    """A parsed location: the URL given, what libpq gets, the workspace, the local
    cache and the retry deadline; :attr:`display` (also its ``str``) leaves out the
    password, and so does its ``repr``."""

    url: str = field(repr=False)
    conninfo: str = field(repr=False)
    workspace: str
    cache: Path
    display: str
    deadline: float = DEADLINE

    def __str__(self) -> str:
        return self.display


def parse_location(location: str) -> PostgresLocation:
    """Split ``location`` into libpq's URL, the workspace and the cache directory."""
    if not is_postgres_location(location):
        raise ConfigError(f"{location!r}: not a postgresql:// location")
    parts = urlsplit(location)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _OURS}
    rest = [(k, v) for k, v in query if k not in _OURS]
    if not any(k == "connect_timeout" for k, _ in rest):
        rest.append(("connect_timeout", str(CONNECT_TIMEOUT)))
    workspace = ours.get("workspace", "public") or "public"
    if not _WORKSPACE.fullmatch(workspace):
        raise ConfigError(
            f"workspace {workspace!r}: use lower-case letters, digits and underscores "
            "(at most 63, not starting with a digit)"
        )
    deadline = _seconds(ours.get("deadline"), DEADLINE)
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), ""))
    display = location_name(location)
    if ours.get("cache"):
        cache = Path(ours["cache"]).expanduser()
    else:
        root = Path(os.environ.get("QUILLIAN_CACHE", "~/.cache/quillian")).expanduser()
        cache = root / "postgres" / hashlib.sha256(display.encode()).hexdigest()[:16]
    return PostgresLocation(location, conninfo, workspace, cache, display, deadline)


_OURS = ("workspace", "cache", "deadline")


def _seconds(value: str | None, default: float) -> float:
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ConfigError(f"deadline={value!r}: give the seconds to retry a connection (>= 0)")
    return seconds


class Retry:
    """Pauses between connection attempts, doubling from :data:`FIRST_PAUSE` to
    :data:`LONGEST_PAUSE`, until ``location.deadline`` seconds have passed; then
    :meth:`wait` raises :class:`StoreUnavailableError` with the last reason."""

    def __init__(self, location: PostgresLocation, action: str) -> None:
        self.location = location
        self.action = action
        self.started = time.monotonic()
        self.pause = FIRST_PAUSE
        self.tries = 0

    def left(self) -> float:
        """Seconds left before the deadline (negative once past it)."""
        return self.started + self.location.deadline - time.monotonic()

    def wait(self, reason: str) -> None:
        """Sleep before the next attempt, or raise once the deadline has passed."""
        self.tries += 1
        left = self.left()
        if left <= 0:
            raise StoreUnavailableError(
                f"{self.location}: cannot {self.action}: {reason}; gave up after "
                f"{self.tries} attempts in {time.monotonic() - self.started:.0f} s. What was "
                "stored is kept: run the command again once the server is back"
            )
        if self.tries == 1:
            logger.warning(
                "%s: %s; retrying for up to %g s", self.location, reason, self.location.deadline
            )
        time.sleep(min(self.pause, left))
        self.pause = min(self.pause * 2, LONGEST_PAUSE)


def connect(location: PostgresLocation, **kwargs: Any) -> psycopg.Connection[Any]:
    """One connection to the server, retried while the server is unreachable (until
    the location's deadline); a failure is a :class:`StoreError` that says whether the
    server is unreachable (:class:`StoreUnavailableError`), the credentials are wrong
    or the user may not connect."""
    retry = Retry(location, "connect")
    while True:
        try:
            return connect_once(location, **kwargs)
        except StoreUnavailableError as exc:
            retry.wait(str(exc).removeprefix(f"{location}: "))


def connect_once(location: PostgresLocation, **kwargs: Any) -> psycopg.Connection[Any]:
    """One attempt at :func:`connect`: :class:`StoreUnavailableError` where the server
    did not answer. The connection stores any string, NUL included (see
    :mod:`.textcodec`)."""
    try:
        return psycopg.connect(location.conninfo, context=ADAPTERS, **kwargs)
    except psycopg.OperationalError as exc:
        reason, transient = _explain(exc)
        error = StoreUnavailableError if transient else StoreError
        raise error(f"{location}: {reason}") from exc


def first_line(exc: BaseException) -> str:
    """An error's first non-empty line (libpq adds hints and context on later ones)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0].removeprefix("connection failed: ") if lines else type(exc).__name__


def _explain(exc: psycopg.OperationalError) -> tuple[str, bool]:
    """What a failed connection attempt means, and whether retrying may help."""
    text = str(exc).strip()
    detail = first_line(exc)
    if "password authentication failed" in text or "no password supplied" in text:
        return f"wrong credentials: the server refused the user name or password ({detail})", False
    if re.search(r'database ".*" does not exist', text):
        return f"no such database ({detail})", False
    if re.search(r'role ".*" does not exist', text):
        return f"no such user ({detail})", False
    if "permission denied" in text:
        return (
            f"{detail}; ask the database's owner to GRANT CONNECT on it to this user",
            False,
        )
    return f"PostgreSQL server unreachable ({detail})", True


def connection_lost(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``exc`` means the connection to the server is gone (not a statement's
    own failure): a broken connection, or a connection-class or shutdown SQLSTATE."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate or ""
    broken = conn is not None and conn.broken
    return broken or not state or state.startswith("08") or state in _SHUTDOWN


#: SQLSTATEs of a server going away: admin, crash and cannot-connect-now shutdowns.
_SHUTDOWN = frozenset({"57P01", "57P02", "57P03"})


def denied(location: PostgresLocation, exc: BaseException, user: str) -> StoreError:
    """A permission error as one line: what was refused, to whom, and what to do."""
    schema = location.workspace
    return StoreError(
        f"{location}: {first_line(exc)} for user {user!r}; ask the workspace's owner to "
        f"grant it (GRANT USAGE ON SCHEMA {schema}; GRANT SELECT, and to write also INSERT, "
        f"UPDATE, DELETE, ON ALL TABLES IN SCHEMA {schema}; GRANT USAGE ON ALL SEQUENCES IN "
        f"SCHEMA {schema}; each TO {user}), or use the workspace owner's user"
    )
