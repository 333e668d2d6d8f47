"""The graph stage keeps its entity resolution at the index root and patches it by the
build's delta; a state another build left (one that never committed its linking
state, or a foreign tag) is built anew, and either way the index equals one built at
once. The state never leaves the machine."""

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.graph.incremental import STATE_FILE
from quillian.index import DEFAULT_STAGES, BuildState, build_index
from quillian.index.tables import TABLES_DB
from quillian.stores.postgres.files import SKIPPED
from quillian.stores.snapshot import GraphSnapshot
from quillian.testing.corpus import LOVELACE
from quillian.testing.extractors import TitleLinkExtractor
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


def _graph_outputs(location: Path) -> dict[str, object]:
    """The graph tables' rows, the tables' arrays and the snapshot's arrays."""
    conn = sqlite3.connect(location / TABLES_DB)
    try:
        out: dict[str, object] = {
            table: conn.execute(f"SELECT * FROM {table}").fetchall()
            for table in ("entities", "sources", "names", "alias_ids", "meta")
        }
        out["relations"] = conn.execute(
            "SELECT r.pos, r.subject, r.predicate, r.object, r.source, r.start, r.end,"
            " r.sentence < 0, t.text FROM relations r LEFT JOIN texts t ON t.id = r.sentence"
        ).fetchall()
    finally:
        conn.close()
    for path in sorted((location / "tables").glob("*.npy")):
        out[path.name] = np.load(path).tolist()
    snapshot = GraphSnapshot.load(location / "graph")
    out["ids"] = snapshot.ids.ids_of(range(snapshot.n_nodes))
    for name in ("indptr", "indices", "weights", "edge_kinds", "edge_relations"):
        out[name] = np.asarray(getattr(snapshot, name)).tolist()
    return out


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
    assert _graph_outputs(steps) == _graph_outputs(tmp_path / "once")


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
    assert _graph_outputs(steps) == _graph_outputs(tmp_path / "once")


def test_the_state_stays_on_its_machine():
    assert {STATE_FILE, f"{STATE_FILE}-journal", f"{STATE_FILE}.partial"} <= SKIPPED
