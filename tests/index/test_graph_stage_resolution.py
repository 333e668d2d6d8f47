"""The graph stage keeps its entity resolution at the index root and patches it by the
build's delta; a state another build left (one that never committed its linking
state, or a foreign tag) is built anew, and either way the index equals one built at
once. The state never leaves the machine."""

import logging
import sqlite3
from pathlib import Path

import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.graph.incremental import STATE_FILE
from quillian.index import DEFAULT_STAGES, BuildState, build_index
from quillian.stores.postgres.files import SKIPPED
from quillian.testing.corpus import LOVELACE
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.tables import graph_outputs
from quillian.types import Document

CORPUS = {
    **LOVELACE,
    "Luigi Menabrea": "Luigi Menabrea wrote on the Analytical Engine, which Ada Lovelace"
    " translated in London.",
    "Difference Engine": "Charles Babbage designed the Difference Engine before the"
    " Analytical Engine.",
}
TITLES = list(CORPUS)
LOGGER = "quillian.components.graph.incremental"


class Fails:
    """A stage after the graph stage that stops the build."""

    name = "fails"

    def run(self, state: BuildState) -> None:
        raise RuntimeError("stopped")


def _build(location: Path, titles: list[str], stages=DEFAULT_STAGES) -> None:
    build_index(
        [Document(CORPUS[t], t) for t in titles],
        location,
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
        stages=stages,
    )


def test_a_build_patches_the_state_the_last_build_left(tmp_path, caplog):
    steps = tmp_path / "steps"
    _build(steps, TITLES[:2])
    assert (steps / STATE_FILE).is_file()
    for title in TITLES[2:]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            _build(steps, [title])
        assert "chunks replayed" in caplog.text and "every chunk" not in caplog.text
    _build(tmp_path / "once", TITLES)
    assert graph_outputs(steps) == graph_outputs(tmp_path / "once")


def test_a_state_no_committed_build_left_is_built_anew(tmp_path, caplog):
    steps = tmp_path / "steps"
    _build(steps, TITLES[:2])
    with pytest.raises(RuntimeError, match="stopped"):  # graph written, links not committed
        _build(steps, TITLES[2:3], stages=(*DEFAULT_STAGES[:1], Fails()))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        _build(steps, TITLES[3:4])
    assert "every chunk resolved" in caplog.text and "replayed" not in caplog.text
    with sqlite3.connect(steps / STATE_FILE) as conn:  # a state another build left
        conn.execute("UPDATE meta SET value = 'another' WHERE name = 'tag'")
    conn.close()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        _build(steps, TITLES[4:])
    assert "every chunk resolved" in caplog.text and "replayed" not in caplog.text
    _build(tmp_path / "once", TITLES)
    assert graph_outputs(steps) == graph_outputs(tmp_path / "once")


def test_the_state_stays_on_its_machine():
    assert {STATE_FILE, f"{STATE_FILE}-journal", f"{STATE_FILE}.partial"} <= SKIPPED
