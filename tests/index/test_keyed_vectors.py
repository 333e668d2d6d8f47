"""The embed stage updates its collections by key: a build that adds a document adds
only its vectors, and an index built before keys (vectors by position) opens and is
converted by its next build."""

import json
from pathlib import Path

import numpy as np

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.index import open_index, open_storage
from quillian.index.layout import read_manifest, write_manifest
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.testing.corpus import build_tiny

CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "London": "London is the capital of England. Charles Babbage lived in London.",
    "Allegra Byron": "Allegra Byron was a daughter of the poet Lord Byron.",
}
QUERIES = ("Where was Charles Babbage born?", "capital of England")


def build(location: Path, titles: list[str]) -> None:
    build_tiny(location, CORPUS, titles=titles)


def results(location: Path) -> dict[str, list[tuple[str, float]]]:
    """The dense top 3 of each query: chunk ids and scores, best first."""
    context = open_index(location, KeywordEmbedder()).context
    found = {}
    for query in QUERIES:
        ranked = context.dense_ranking(context.embedder.embed([query])[0], 3)
        found[query] = [(context.kg.chunk_ids[c], round(s, 5)) for c, s in ranked]
    return found


def inodes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in directory.glob("*.npy")}


def test_a_build_adds_only_the_new_vectors(tmp_path: Path) -> None:
    titles = list(CORPUS)
    build(tmp_path / "idx", titles[:3])
    chunks = tmp_path / "idx" / "vectors" / "chunks"
    before = inodes(chunks)
    build(tmp_path / "idx", titles)
    after = inodes(chunks)
    assert all(after[name] == ino for name, ino in before.items())  # kept, not rewritten
    meta = json.loads((chunks / "index.json").read_text())
    assert [rows for _, rows in meta["segments"]] == [3, 1] and meta["dead"] == 0
    keys = np.load(tmp_path / "idx" / "tables" / "chunk_keys.npy")
    assert len(keys) == 4 and len(set(keys.tolist())) == 4
    build(tmp_path / "clean", titles)
    assert results(tmp_path / "idx") == results(tmp_path / "clean")


def test_an_index_with_vectors_by_position_opens_and_is_converted(tmp_path: Path) -> None:
    titles = list(CORPUS)
    old, clean = tmp_path / "old", tmp_path / "clean"
    build(old, titles[:3])
    context = open_index(old, KeywordEmbedder()).context  # rewrite it as before keys
    by_position = {
        "chunks": context.chunk_vectors.get(np.arange(len(context.chunk_vectors))),
        "texts": context.text_vectors.get(np.arange(len(context.text_vectors))),
    }
    with open_storage(old) as storage:
        for name, vectors in by_position.items():
            index = storage.vectors(name, vectors.shape[1], fresh=True)
            index.add(np.arange(len(vectors)), vectors)
            index.close()
    for name in ("chunk_keys.npy", "text_keys.npy"):
        (old / "tables" / name).unlink()
    write_manifest(old, read_manifest(old))  # records the files as they now are
    build(clean, titles[:3])
    got, want = results(old), results(clean)  # opened by position: ties rank by it
    assert {q: sorted(r) for q, r in got.items()} == {q: sorted(r) for q, r in want.items()}
    build(old, titles)  # converted: every positional id deleted, every key added
    build(clean, titles)
    assert results(old) == results(clean)
    with ExactVectorIndex(old / "vectors" / "chunks") as chunks:
        assert (chunks.ids() >= 1 << 62).all() and len(chunks) == 4
