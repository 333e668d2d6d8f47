"""Writers of one server index on different machines take turns: each machine keeps
its own local cache, so the server's advisory lock, not the cache's file lock, makes a
second build wait (two caches of one workspace stand for two machines; marked
``postgres``)."""

from __future__ import annotations

import logging
import threading
import uuid

import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.index import build_index, read_manifest
from quillian.index.layout import writer_lock
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.postgres import PostgresServer
from quillian.types import Document

pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres

CORPUS = [("Ada", "Ada wrote the first program."), ("Turing", "Turing read what Ada wrote.")]


def build(location: str) -> None:
    build_index(
        [Document(text, title) for title, text in CORPUS],
        location,
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor([t for t, _ in CORPUS]),
        embedder=KeywordEmbedder(),
    )


def test_a_writer_on_another_machine_waits_for_the_first(
    postgres_server: PostgresServer, postgres_url: str, tmp_path, caplog
) -> None:
    from quillian.stores.postgres import parse_location

    here = parse_location(postgres_url)
    there = postgres_server.url(here.workspace, tmp_path / "other-machine-cache")
    assert parse_location(there).cache != here.cache
    finished = threading.Event()
    errors: list[BaseException] = []

    def second() -> None:
        try:
            build(there)
        except BaseException as exc:
            errors.append(exc)
        finished.set()

    with caplog.at_level(logging.WARNING, logger="quillian.index.layout"):
        with writer_lock(postgres_url):
            thread = threading.Thread(target=second)
            thread.start()
            assert not finished.wait(1.0)  # the build cannot start while the lock is held
            assert not (parse_location(there).cache / "manifest.json").exists()
        thread.join(60)
    assert finished.is_set() and errors == []
    assert read_manifest(postgres_url)["state"] == "complete"
    assert "another process is writing the index" in caplog.text


def test_the_lock_is_per_workspace(
    postgres_server: PostgresServer, postgres_url: str, tmp_path
) -> None:
    workspace = f"t_{uuid.uuid4().hex[:12]}"
    other = postgres_server.url(workspace, tmp_path / "other-workspace-cache")
    try:
        with writer_lock(postgres_url):
            thread = threading.Thread(target=build, args=(other,), daemon=True)
            thread.start()
            thread.join(60)  # another workspace's writer does not wait for this one
            assert not thread.is_alive()
        assert read_manifest(other)["state"] == "complete"
    finally:
        postgres_server.execute(f'DROP SCHEMA IF EXISTS "{workspace}" CASCADE')
