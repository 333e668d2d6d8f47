"""Incremental entity resolution equals :class:`GraphBuilder` over the whole new chunk
list, after every step of random add/change/delete sequences, across reopening the
state from its file; a missing, damaged or foreign state opens as None."""

from __future__ import annotations

import dataclasses
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph import incremental
from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.graph.compact import (
    extraction_texts,
)
from quillian.components.graph.incremental import (
    ChunkExtraction,
    ResolutionState,
    resolve_entities,
)
from quillian.errors import InputError
from quillian.stores.packed import unpack_text
from quillian.testing.resolution import RandomCorpus as _Corpus
from quillian.testing.resolution import random_extraction
from quillian.types import key64


def assert_same_graph(got: KnowledgeGraph, want: KnowledgeGraph) -> None:
    assert got.entities == want.entities
    assert got.descriptions == want.descriptions
    assert list(got.chunk_ids) == list(want.chunk_ids)
    assert got.relations == want.relations
    np.testing.assert_array_equal(got.relation_subject, want.relation_subject)
    np.testing.assert_array_equal(got.relation_object, want.relation_object)
    a, b = got.snapshot, want.snapshot
    assert [a.ids.id_of(i) for i in range(len(a.ids))] == [
        b.ids.id_of(i) for i in range(len(b.ids))
    ]
    for name in ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def assert_rows_found(path: Path, corpus: _Corpus) -> int:
    """Each description's text is one of its own chunk's extraction's texts, and each
    occurrence's index names a triple of that extraction with the occurrence's triple
    id (the state keeps no copy of them, nor of the extractions: each chunk's digest is
    the corpus's extraction's); returns how many rows were checked."""
    conn = sqlite3.connect(path)
    digests = dict(conn.execute("SELECT chunk_id, digest FROM chunks"))
    assert digests == {
        c: incremental.extraction_digest(e.extraction) for c, e in corpus.chunks.items()
    }
    own = {key64(c): e.extraction for c, e in corpus.chunks.items()}
    texts = {c: {key64(t) for t in extraction_texts(e)} for c, e in own.items()}
    described = conn.execute("SELECT chunk, text FROM descriptions").fetchall()
    occurred = conn.execute("SELECT chunk, at, triple FROM occurrences").fetchall()
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    columns = {c for _, c, *_ in conn.execute("PRAGMA table_info(chunks)")}
    conn.close()
    assert all(i in texts[c] for c, i in described)
    assert all(key64(own[c].triples[at].id) == triple for c, at, triple in occurred)
    assert "texts" not in tables and "extraction" not in columns
    return len(described) + len(occurred)


def assert_keys_indexed(path: Path, corpus: _Corpus) -> None:
    """The key -> chunk index holds exactly each stored chunk's keys (those its row
    keeps, its extraction's): none left of a chunk removed or replaced."""
    conn = sqlite3.connect(path)
    kept = {
        (k, c)
        for c, packed in conn.execute("SELECT chunk_id, keys FROM chunks")
        for k in unpack_text(packed).split("\x1f")
        if k
    }
    indexed = set(
        conn.execute("SELECT k.key, c.chunk_id FROM chunk_keys k JOIN chunks c USING (chunk)")
    )
    (keys,) = conn.execute("SELECT count(*) FROM chunk_keys").fetchone()
    conn.close()
    want = {(k, c) for c, e in corpus.chunks.items() for k in incremental._keys(e.extraction)}
    assert indexed == want == kept and keys == len(want)


@pytest.mark.parametrize(("seed", "scale"), [(s, 1) for s in range(40)] + [(40, 6), (41, 6)])
def test_every_step_equals_a_clean_build(tmp_path: Path, seed: int, scale: int) -> None:
    rng = random.Random(seed)
    max_per_chunk = rng.choice([3, 64])
    corpus = _Corpus(rng, scale)
    for _ in range(rng.randrange(12)):
        first = corpus.new()
        corpus.chunks[first.chunk_id] = first
    path = tmp_path / "state.sqlite"
    ResolutionState.create(
        path, corpus.chunks.values(), max_per_chunk, tag="0", source=corpus.source
    ).close()
    checked = 0
    for step in range(1, 11):
        state = ResolutionState.open(path, max_per_chunk, tag=str(step - 1), source=corpus.source)
        assert state is not None
        assert_same_graph(state.graph(), corpus.clean(max_per_chunk))
        removed, changed = corpus.step()
        state.apply(removed, changed, tag=str(step))
        assert state.chunk_ids() == list(corpus.clean(max_per_chunk).chunk_ids)
        state.close()
        checked += assert_rows_found(path, corpus)
        assert_keys_indexed(path, corpus)
    assert checked  # some step's state held rows
    state = ResolutionState.open(path, max_per_chunk, tag="10", source=corpus.source)
    assert state is not None
    assert_same_graph(state.graph(), corpus.clean(max_per_chunk))
    state.close()


def test_an_update_replays_only_what_it_reaches(tmp_path: Path) -> None:
    def chunk(index: int, *names: str) -> ChunkExtraction:
        entities = tuple(ExtractedEntity(n) for n in names)
        return ChunkExtraction("d", index, Extraction(f"c{index}", "d", entities))

    # c1 and c2 share "Paris"; c3 names only Rome; c4 links Rome to "Roma" by an alias
    chunks = [chunk(1, "Paris"), chunk(2, "paris", "Lyon"), chunk(3, "Rome")]
    corpus = _Corpus(random.Random(0))
    corpus.chunks = {c.chunk_id: c for c in chunks}
    path = tmp_path / "state.sqlite"
    state = ResolutionState.create(path, chunks, source=corpus.source)
    rome = ExtractedEntity("Roma", aliases=("Rome",))
    roma = ChunkExtraction("d", 0, Extraction("c0", "d", (rome,)))
    corpus.chunks["c0"] = roma
    replayed = state.apply([], [roma])
    assert replayed == 2  # c0 and c3: the Paris chunks are not read
    rows = state.positions().tolist()  # Paris and Lyon keep their rows
    assert rows[1:] == [0, 1] and rows[0] not in (0, 1, 2)
    entities, owner = state.entities()
    assert [e.name for e in entities] == ["Roma", "Paris", "Lyon"]
    assert entities[0].aliases == ["Rome"] and owner["rome"] == 0
    del corpus.chunks["c1"]
    assert state.apply(["c1"], []) == 1  # Paris now first named in c2
    assert [e.name for e in state.entities()[0]] == ["Roma", "paris", "Lyon"]
    assert state.positions().tolist()[0::2] == rows[0::2]  # Paris named anew: a new row
    assert state.positions()[1] not in rows
    state.close()


def test_a_failed_update_leaves_the_state_as_it_was(tmp_path: Path) -> None:
    extraction = Extraction("c1", "d", (ExtractedEntity("Paris"),))
    path = tmp_path / "state.sqlite"
    state = ResolutionState.create(path, [ChunkExtraction("d", 1, extraction)])
    twice = ChunkExtraction("d", 2, Extraction("c2", "d", (ExtractedEntity("Lyon"),)))
    with pytest.raises(InputError, match="chunk c2 given twice"):
        state.apply(["c1"], [twice, twice])
    clash = ChunkExtraction("d", 1, Extraction("c3", "d", (ExtractedEntity("Rome"),)))
    with pytest.raises(InputError, match="chunks c1 and c3 share one place"):
        state.apply([], [twice, clash])
    assert state.chunk_ids() == ["c1"]
    assert [e.name for e in state.entities()[0]] == ["Paris"]
    state.close()


def test_a_missing_damaged_or_foreign_state_opens_as_none(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    assert ResolutionState.open(path) is None
    chunk = ChunkExtraction("d", 1, Extraction("c1", "d", (ExtractedEntity("Paris"),)))
    ResolutionState.create(path, [chunk], tag="build-1").close()
    assert ResolutionState.open(path, max_entities_per_chunk=8) is None  # another setting
    assert ResolutionState.open(path, tag="build-2") is None  # another build's
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '0' WHERE name = 'version'")
    conn.close()
    assert ResolutionState.open(path) is None
    path.write_bytes(b"not a database" * 100)
    assert ResolutionState.open(path) is None


def test_the_stage_call_updates_the_last_build_state_or_builds_anew(tmp_path: Path) -> None:
    rng = random.Random(7)
    corpus = _Corpus(rng)
    for _ in range(10):
        first = corpus.new()
        corpus.chunks[first.chunk_id] = first
    path = tmp_path / "state.sqlite"
    reads: list[int] = []

    def everything() -> list[ChunkExtraction]:
        reads.append(len(corpus.chunks))
        return list(corpus.chunks.values())

    resolve_entities(path, everything, None, since="", tag="b1", source=corpus.source).close()
    for since, tag, full in (("b1", "b2", False), ("b0", "b3", True), ("b3", "b4", False)):
        before = len(reads)
        delta = corpus.step()
        state = resolve_entities(
            path, everything, delta, since=since, tag=tag, source=corpus.source
        )
        assert len(reads) == before + full  # read whole only without the last build's state
        assert_same_graph(state.graph(), corpus.clean(64))
        state.close()
    assert len(reads) == 2  # the first build, and the one whose last build was not b0's


def test_the_stage_call_builds_anew_when_the_update_cannot_read_the_state(
    tmp_path: Path,
) -> None:
    corpus = _Corpus(random.Random(11))
    for _ in range(6):
        first = corpus.new()
        corpus.chunks[first.chunk_id] = first
    path = tmp_path / "state.sqlite"
    everything = lambda: list(corpus.chunks.values())  # noqa: E731
    resolve_entities(path, everything, None, since="", tag="b1", source=corpus.source).close()
    with sqlite3.connect(path) as conn:  # sound pages, a table gone: quick_check passes
        conn.execute("DROP TABLE chunk_keys")
    conn.close()
    delta = corpus.step()
    state = resolve_entities(path, everything, delta, since="b1", tag="b2", source=corpus.source)
    assert_same_graph(state.graph(), corpus.clean(64))
    state.close()
    reopened = ResolutionState.open(path, tag="b2")
    assert reopened is not None
    reopened.close()


#: A writer that dies mid-transaction, leaving its rollback journal hot beside the file.
KILLED_WRITER = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")  # spill changed pages to the file before the commit
conn.execute("BEGIN IMMEDIATE")
conn.execute("DELETE FROM chunks")
conn.execute("CREATE TABLE filler (x)")
conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 2000)
os._exit(0)
"""


@pytest.mark.parametrize("leftover", ["state", "partial"])
def test_a_writer_killed_mid_transaction_leaves_nothing_the_next_build_reads(
    tmp_path: Path, leftover: str
) -> None:
    """A new state replaces a file whose writer was killed: the journal that writer
    left goes with it (played back into the new file, it would damage it), so the new
    state reads cleanly, read-only too (as the tables writer attaches it)."""
    corpus = _Corpus(random.Random(5))
    for _ in range(8):
        first = corpus.new()
        corpus.chunks[first.chunk_id] = first
    path = tmp_path / "state.sqlite"
    victim = path if leftover == "state" else path.with_name(path.name + ".partial")
    ResolutionState.create(victim, corpus.chunks.values(), tag="b1", source=corpus.source).close()
    corpus.step()  # the new state differs from the one the journal belongs to
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(victim)], check=True)
    assert victim.with_name(victim.name + "-journal").stat().st_size > 0
    state = resolve_entities(
        path, lambda: list(corpus.chunks.values()), None, since="", tag="b2", source=corpus.source
    )
    assert_same_graph(state.graph(), corpus.clean(64))
    state.close()
    assert not victim.with_name(victim.name + "-journal").exists()
    conn = sqlite3.connect(":memory:")
    conn.execute("ATTACH DATABASE ? AS st", (path.absolute().as_uri() + "?mode=ro",))
    assert conn.execute("SELECT count(*) FROM st.chunks").fetchone()[0] == len(corpus.chunks)
    conn.close()


@pytest.mark.parametrize("order", ["index", "shuffled", "late"])
def test_a_new_state_streams_its_chunks_in_any_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    """A new state is resolved batch by batch as its chunks come in index order, and
    from its stored chunks when they do not (from the start, or late): the same state
    either way, equal to a clean build."""
    monkeypatch.setattr(incremental, "_STREAM", 3)
    corpus = _Corpus(random.Random(23), 2)
    for _ in range(14):
        first = corpus.new()
        corpus.chunks[first.chunk_id] = first
    chunks = sorted(corpus.chunks.values(), key=lambda c: (c.doc_id, c.index))
    if order == "shuffled":
        random.Random(1).shuffle(chunks)
    elif order == "late":
        chunks[-1], chunks[-2] = chunks[-2], chunks[-1]
    path = tmp_path / "state.sqlite"
    state = ResolutionState.create(path, iter(chunks), tag="b1", source=corpus.source)
    assert_same_graph(state.graph(), corpus.clean(64))
    state.close()
    assert_rows_found(path, corpus)


def test_a_state_made_anew_is_packed(tmp_path: Path) -> None:
    """Rows go in by chunk id, in no order of their keys, which leaves pages part full:
    a state made anew is packed once written, as small as a ``VACUUM`` leaves it."""
    corpus = _Corpus(random.Random(3))
    while len(corpus.chunks) < 150:
        added = corpus.new()
        corpus.chunks[added.chunk_id] = added
    path, copy = tmp_path / "state.sqlite", tmp_path / "copy.sqlite"
    ResolutionState.create(path, corpus.chunks.values(), source=corpus.source).close()
    copy.write_bytes(path.read_bytes())
    conn = sqlite3.connect(copy)
    try:
        conn.execute("VACUUM")
    finally:
        conn.close()
    assert path.stat().st_size == copy.stat().st_size > 20 * 4096


def test_an_extraction_the_state_did_not_resolve_makes_it_anew(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The state keeps each chunk's digest, not its extraction: a chunk whose extraction
    changed though no delta said so (or one the source lacks) is not read as the one the
    state resolved. The update raises StaleState and leaves the state as it was; the
    stage call makes it anew, equal to a clean build."""
    corpus = _Corpus(random.Random(13))
    while len(corpus.chunks) < 8:
        added = corpus.new()
        corpus.chunks[added.chunk_id] = added
    path = tmp_path / "state.sqlite"
    everything = lambda: list(corpus.chunks.values())  # noqa: E731
    resolve_entities(path, everything, None, since="", tag="b1", source=corpus.source).close()
    # every chunk's extraction changed behind the state's back: any the update reads
    for chunk_id, old in list(corpus.chunks.items()):
        shown = random_extraction(corpus.rng, chunk_id, old.doc_id)
        corpus.chunks[chunk_id] = dataclasses.replace(old, extraction=shown)
    state = ResolutionState.open(path, tag="b1", source=corpus.source)
    assert state is not None
    with pytest.raises(incremental.StaleState, match="not the one the state resolved"):
        state.graph()
    added = corpus.new()
    corpus.chunks[added.chunk_id] = added
    with pytest.raises(incremental.StaleState):
        state.apply([], [added])
    assert added.chunk_id not in state.chunk_ids()  # the update left no trace
    state.close()
    state = resolve_entities(
        path, everything, ([], [added]), since="b1", tag="b2", source=corpus.source
    )
    assert "building anew" in caplog.text
    assert_same_graph(state.graph(), corpus.clean(64))
    state.close()
    del corpus.chunks[added.chunk_id]  # gone from the source: stale too
    state = ResolutionState.open(path, tag="b2", source=corpus.source)
    assert state is not None
    with pytest.raises(incremental.StaleState, match=added.chunk_id):
        state.graph()
    state.close()
