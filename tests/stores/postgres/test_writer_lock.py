"""Writers of one server index on different machines take turns: each machine keeps
its own local cache, so the server's advisory lock, not the cache's file lock, makes a
second build wait (two caches of one workspace stand for two machines; marked
``postgres``)."""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from quillian.index import read_manifest
from quillian.index.layout import writer_lock
from quillian.testing.corpus import build_tiny
from quillian.testing.postgres import PostgresServer

pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres

CORPUS = {"Ada": "Ada wrote the first program.", "Turing": "Turing read what Ada wrote."}


def test_a_writer_on_another_machine_waits_for_the_first(
    postgres_server: PostgresServer, postgres_url: str, tmp_path, caplog
) -> None:
    from quillian.stores.postgres import parse_location

    here = parse_location(postgres_url)
    there = postgres_server.url(here.workspace, tmp_path / "other-machine-cache")
    assert parse_location(there).cache != here.cache
    with (
        caplog.at_level(logging.WARNING, logger="quillian.index.layout"),
        ThreadPoolExecutor(1) as pool,
    ):
        with writer_lock(postgres_url):
            second = pool.submit(build_tiny, there, CORPUS)
            time.sleep(1.0)
            assert not second.done()  # the build cannot start while the lock is held
            assert not (parse_location(there).cache / "manifest.json").exists()
        second.result(60)
    assert read_manifest(postgres_url)["state"] == "complete"
    assert "another process is writing the index" in caplog.text


def test_the_lock_is_per_workspace(
    postgres_server: PostgresServer, postgres_url: str, tmp_path
) -> None:
    workspace = f"t_{uuid.uuid4().hex[:12]}"
    other = postgres_server.url(workspace, tmp_path / "other-workspace-cache")
    try:
        with ThreadPoolExecutor(1) as pool, writer_lock(postgres_url):
            # another workspace's writer does not wait for this one
            pool.submit(build_tiny, other, CORPUS).result(60)
        assert read_manifest(other)["state"] == "complete"
    finally:
        postgres_server.execute(f'DROP SCHEMA IF EXISTS "{workspace}" CASCADE')


def test_a_slow_graph_read_under_the_lease_outlasts_its_heartbeat(
    postgres_server: PostgresServer, postgres_url: str, tmp_path, monkeypatch
) -> None:
    """A build reads the graph in one REPEATABLE READ transaction while it holds the
    lease, whose heartbeat updates the lease row every few seconds: a read that outlasts
    a beat must not fail on the fence's lock of that row (a serialization error before)."""
    from quillian.stores.postgres import graph, parse_location
    from quillian.stores.postgres.graph import PgGraphStore

    build_tiny(postgres_url, CORPUS)
    schema = parse_location(postgres_url).workspace
    version = graph._version

    def beat_meanwhile(conn):  # the heartbeat lands after the read's snapshot is taken
        found = version(conn)
        postgres_server.execute(
            f"UPDATE \"{schema}\".writer_lease SET expires = expires + interval '1 second'"
        )
        return found + 1  # a version not cached yet: the snapshot is read from the tables

    with writer_lock(postgres_url):
        store = PgGraphStore(postgres_url, tmp_path / "graph-cache")
        monkeypatch.setattr(graph, "_version", beat_meanwhile)
        try:
            snapshot = store.snapshot()
        finally:
            store.close()
    assert snapshot.n_nodes > 0


def test_a_writer_that_lost_the_lease_is_stopped_but_its_reads_are_not(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Fencing: once another writer holds the lease row, a transaction of this process
    that writes fails before its commit, naming the lost lock, and nothing it wrote
    lands; one that only reads (listing the index files, reading metadata) still
    answers, as a replica's reads must while a build of its own runs."""
    from quillian.errors import StoreUnavailableError
    from quillian.stores.postgres import Workspace, parse_location

    build_tiny(postgres_url, CORPUS)
    schema = parse_location(postgres_url).workspace
    with writer_lock(postgres_url), Workspace(postgres_url, create=False) as workspace:
        postgres_server.execute(f"UPDATE \"{schema}\".writer_lease SET owner = 'someone else'")
        assert workspace.meta("workspace_id")  # a read: answered
        with workspace.connection("list the index files") as conn:
            assert conn.execute("SELECT count(*) FROM files").fetchone()[0] > 0
        with pytest.raises(StoreUnavailableError, match="lost the writer lock"):
            workspace.set_meta("fenced", "written")
        assert workspace.meta("fenced") is None  # the refused write did not land
