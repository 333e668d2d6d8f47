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
