"""Two writers of one index take turns: a build or a delete holds the index's writer
lock, and a second one waits for it (two ``bench qa`` runs on one index raced and left
its graph without a snapshot)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.index import delete_documents, read_manifest
from quillian.index.layout import WRITER_LOCK, writer_lock
from quillian.testing.corpus import build_tiny
from quillian.testing.extractors import TitleLinkExtractor

CORPUS = {"Ada": "Ada wrote the first program.", "Turing": "Turing read what Ada wrote."}


def build(location: Path) -> None:
    build_tiny(location, CORPUS)


def test_a_second_writer_waits_for_the_first_and_says_so(tmp_path, caplog) -> None:
    location = tmp_path / "index"
    finished = threading.Event()

    def second() -> None:
        build(location)
        finished.set()

    with caplog.at_level(logging.WARNING, logger="quillian.index.layout"):
        with writer_lock(location):
            thread = threading.Thread(target=second)
            thread.start()
            assert not finished.wait(0.5)  # the build cannot start while the lock is held
            assert not (location / "manifest.json").exists()
        thread.join(30)
    assert finished.is_set() and read_manifest(location)["state"] == "complete"
    assert "another process is writing the index" in caplog.text
    assert (location / WRITER_LOCK).exists()


def test_builds_started_together_both_finish_on_one_complete_index(tmp_path) -> None:
    location = tmp_path / "index"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            build(location)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    manifest = read_manifest(location)
    assert manifest["state"] == "complete" and manifest["counts"]["documents"] == 2


def test_a_delete_from_a_missing_index_makes_no_directory(tmp_path) -> None:
    location = tmp_path / "nothing"
    with pytest.raises(Exception, match="nothing"):
        delete_documents(
            location, ["d"], extractor=TitleLinkExtractor([]), embedder=KeywordEmbedder()
        )
    assert not location.exists()
