"""The BM25 stage updates its index in place: a build tokenizes only the chunks it adds,
and an index an older Quillian wrote through bm25s opens and is converted by its next
build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.components.retrieval import bm25_incremental
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.index import delete_documents, open_index, open_storage, stages
from quillian.index.build import processed_chunks
from quillian.index.integrity import FILES, record_index_files
from quillian.index.stages import chunk_text
from quillian.testing.corpus import LOVELACE, build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document

QUESTIONS = ("Where was Charles Babbage born?", "the Analytical Engine", "Ada Lovelace poet")
MORE = {**LOVELACE, "Difference Engine": "Charles Babbage built the Difference Engine first."}


def bm25(location: Path) -> list[list[tuple[str, float]]]:
    """Top 5 chunk ids and scores of ``bm25`` for each question."""
    context = open_index(location, KeywordEmbedder()).context
    retriever = make_retriever(context, "bm25")
    return [
        [(p.chunk_id, round(p.score, 5)) for p in retriever.retrieve(q, 5).passages]
        for q in QUESTIONS
    ]


def as_old_quillian_wrote_it(location: Path) -> None:
    """Replace the index's BM25 folder with the bm25s index an older Quillian wrote, and
    record its files in the manifest as that Quillian did."""
    with open_storage(location) as storage:
        texts = [chunk_text(c) for c in processed_chunks(storage)]
    shutil.rmtree(location / "bm25")
    (location / "bm25").mkdir()
    BM25Index.build(texts).save(location / "bm25")
    manifest = json.loads((location / "manifest.json").read_text())
    manifest[FILES] = record_index_files(location)
    (location / "manifest.json").write_text(json.dumps(manifest))


def test_an_index_bm25s_wrote_opens_and_the_next_build_converts_it(tmp_path):
    old = tmp_path / "old"
    build_tiny(old, LOVELACE)
    new_format = bm25(old)
    as_old_quillian_wrote_it(old)
    assert (old / "bm25" / "params.index.json").exists()
    assert [[s for _, s in q] for q in bm25(old)] == [[s for _, s in q] for q in new_format]
    build_tiny(old, MORE)
    assert not (old / "bm25" / "params.index.json").exists()
    assert (old / "bm25" / bm25_incremental.MANIFEST).exists()
    build_tiny(tmp_path / "once", MORE)
    assert bm25(old) == bm25(tmp_path / "once")


def test_a_build_tokenizes_only_the_chunks_it_adds(tmp_path, monkeypatch):
    build_tiny(tmp_path / "idx", LOVELACE)
    seen: list[list[str]] = []
    tokenize = bm25_incremental.tokenize

    def recording(texts):
        seen.append(list(texts))
        return tokenize(texts)

    monkeypatch.setattr(bm25_incremental, "tokenize", recording)
    build_tiny(tmp_path / "idx", MORE)
    indexed = [t for batch in seen for t in batch]
    assert indexed == [f"Difference Engine\n{MORE['Difference Engine']}"]
    positions = np.load(sorted((tmp_path / "idx" / "bm25").glob("positions-*.npy"))[-1])
    assert sorted(positions.tolist()) == list(range(len(MORE)))


def test_an_update_carries_the_chunk_positions_through_the_catalog(tmp_path, monkeypatch):
    """An update after a build (the chunk catalog patched from that build's table) looks
    no chunk up by id: the BM25 position map, the chunks' keys and their collection are
    carried through where the table's rows went, and the index equals one built at once."""
    location = tmp_path / "idx"
    build_tiny(location, LOVELACE)

    def refused(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("every chunk matched again")

    monkeypatch.setattr(bm25_incremental, "_match", refused)
    opened: list[tuple[str, bool]] = []  # each collection, and whether it held the kept keys
    open_collection = stages._open_collection

    def spied(state, collection, kept, **kwargs):  # type: ignore[no-untyped-def]
        index, stored = open_collection(state, collection, kept, **kwargs)
        opened.append((collection, stored is None and kwargs.get("distinct", False)))
        return index, stored

    monkeypatch.setattr(stages, "_open_collection", spied)
    build_tiny(location, MORE)
    gone = next(iter(LOVELACE))
    delete_documents(
        location,
        [Document(MORE[gone], gone).id],
        extractor=TitleLinkExtractor(MORE),
        embedder=KeywordEmbedder(),
    )
    monkeypatch.undo()
    assert [o for o in opened if o[0] == "chunks"] == [("chunks", True)] * 2
    less = {k: v for k, v in MORE.items() if k != gone}
    build_tiny(tmp_path / "once", MORE, titles=list(less))
    assert bm25(location) == bm25(tmp_path / "once")
    for name in ("chunk_keys.npy", "text_keys.npy"):
        np.testing.assert_array_equal(
            np.load(location / "tables" / name), np.load(tmp_path / "once" / "tables" / name)
        )
    held = []  # the chunks' collection: the same keys as one built at once
    for path in (location, tmp_path / "once"):
        with open_storage(path) as storage:
            held.append(sorted(storage.vectors("chunks", KeywordEmbedder().dim).ids().tolist()))
    assert held[0] == held[1] == sorted(np.load(location / "tables" / "chunk_keys.npy").tolist())
