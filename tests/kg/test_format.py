"""Graph directory formats: a format-1 graph (alias index keyed by the old folding of
names) is upgraded in place on open, atomically, and refused with a clear error when
its directory cannot be written."""

from __future__ import annotations

import json
import logging
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.kg import store
from quillian.components.kg.store import (
    FORMAT,
    MANIFEST,
    ImportedGraph,
    TextTable,
    name_key,
    upgrade_graph,
)
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.errors import IndexSchemaError

RELEASE = {
    "wikidata5m_entity.txt": "Q1\tThe Beatles\tFab Four\nQ2\t'Paris'\tCity of Light\n"
    "Q3\tLiverpool\n",
    "wikidata5m_relation.txt": "P1\tfrom\n",
    "wikidata5m_all_triplet.txt": "Q1\tP1\tQ3\nQ2\tP1\tQ3\n",
    "wikidata5m_text.txt": "Q1\tEnglish rock band\nQ2\tcapital of France\nQ3\tcity in England\n",
}
ALIAS_FILES = ("alias_keys.npy", "alias_entities.npy")


def old_fold(name: str) -> str:
    """How format 1 keyed names: NFKC, case-folded, spaces collapsed; no more."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def downgrade(directory: Path) -> None:
    """Make ``directory`` what a format-1 Quillian wrote: alias index and manifest."""
    names = TextTable.load(directory, "names", mmap=False)
    pairs = sorted(
        {
            (name_key(key), e)
            for e in range(len(names))
            for key in map(old_fold, names[e].split("\t"))
            if key
        }
    )
    np.save(directory / "alias_keys.npy", np.array([k for k, _ in pairs], dtype=np.uint64))
    np.save(directory / "alias_entities.npy", np.array([e for _, e in pairs], dtype=np.int32))
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    (directory / MANIFEST).write_text(json.dumps({**manifest, "format": 1}), encoding="utf-8")


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def manifest_format(directory: Path) -> object:
    return json.loads((directory / MANIFEST).read_text(encoding="utf-8"))["format"]


@pytest.fixture
def graphs(tmp_path):
    """``(format-1 graph, its files as format 2 wrote them)``."""
    for name, text in RELEASE.items():
        (tmp_path / "w5m").mkdir(exist_ok=True)
        (tmp_path / "w5m" / name).write_text(text, encoding="utf-8")
    options = ImportOptions(preprocess=False, embedder_name="keyword")
    import_wikidata5m(tmp_path / "w5m", tmp_path / "kg", KeywordEmbedder(), options=options)
    current = snapshot(tmp_path / "kg")
    downgrade(tmp_path / "kg")
    assert manifest_format(tmp_path / "kg") == 1 and FORMAT == 2
    return tmp_path / "kg", current


def test_a_new_graph_is_written_in_the_current_format(graphs):
    _, current = graphs
    assert json.loads(current[MANIFEST])["format"] == FORMAT


def test_format_1_graph_is_upgraded_in_place_on_open(graphs, caplog):
    directory, current = graphs
    old = snapshot(directory)
    with caplog.at_level(logging.WARNING), ImportedGraph.open(directory) as graph:
        beatles, paris = graph.index_of("Q1"), graph.index_of("Q2")
        # the names the old keys missed: a leading article, surrounding quotes
        assert graph.lookup("Beatles") == [beatles] == graph.lookup("the beatles")
        assert graph.lookup("Paris") == [paris] == graph.lookup("'paris'")
        assert graph.lookup("fab four") == [beatles]
    assert "upgrading graph format 1 to 2" in caplog.text
    assert manifest_format(directory) == FORMAT
    upgraded = snapshot(directory)
    # the alias index is the one an import writes today; nothing else changed but the
    # manifest's format, and no temporary file is left
    assert set(upgraded) == set(old)
    for name in ALIAS_FILES:
        assert upgraded[name] == current[name] != old[name]
    assert {n for n in upgraded if upgraded[n] != old[n]} == {*ALIAS_FILES, MANIFEST}
    assert json.loads(upgraded[MANIFEST]) == {**json.loads(old[MANIFEST]), "format": FORMAT}
    caplog.clear()
    with caplog.at_level(logging.WARNING), ImportedGraph.open(directory) as graph:
        assert graph.lookup("Beatles") == [graph.index_of("Q1")]
    assert "upgrading" not in caplog.text
    assert upgrade_graph(directory)["format"] == FORMAT


def test_format_1_graph_in_a_read_only_directory_is_refused_with_what_to_run(graphs, monkeypatch):
    directory, _ = graphs
    old = snapshot(directory)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(np, "save", read_only)
    with pytest.raises(IndexSchemaError) as caught:
        ImportedGraph.open(directory)
    message = str(caught.value)
    assert "format 1" in message and "cannot be written (Permission denied)" in message
    assert f"upgrade_graph({str(directory)!r})" in message and "import the graph again" in message
    assert snapshot(directory) == old  # untouched, nothing left behind
    monkeypatch.undo()
    with ImportedGraph.open(directory) as graph:  # once writable, it opens
        assert graph.lookup("Beatles") == [graph.index_of("Q1")]


def test_an_interrupted_upgrade_is_done_again_on_the_next_open(graphs, monkeypatch):
    directory, current = graphs

    def interrupted(path, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "write_json_atomic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ImportedGraph.open(directory)
    assert manifest_format(directory) == 1
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]
    monkeypatch.undo()
    with ImportedGraph.open(directory) as graph:
        assert graph.lookup("'Paris'") == [graph.index_of("Q2")]
    upgraded = snapshot(directory)
    assert manifest_format(directory) == FORMAT
    assert all(upgraded[name] == current[name] for name in ALIAS_FILES)


@pytest.mark.parametrize("version", [0, 3, "2", None])
def test_an_unknown_format_is_refused(graphs, version):
    directory, _ = graphs
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    (directory / MANIFEST).write_text(json.dumps({**manifest, "format": version}))
    with pytest.raises(IndexSchemaError, match=r"graph format .*this Quillian reads 1, 2"):
        ImportedGraph.open(directory)
