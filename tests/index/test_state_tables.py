"""The graph tables written from the entity-resolution state
(:func:`save_state_tables`) equal :func:`save_tables` of the graph
:class:`GraphBuilder` makes of the same extractions, row for row, array for array, and
the snapshot node for node and edge for edge, after every step of random add, change
and delete sequences; deliberate breakages of the writer or its output are caught."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quillian.components.graph.builder import GraphBuilder, KnowledgeGraph
from quillian.components.graph.incremental import ChunkExtraction, ResolutionState
from quillian.components.retrieval import derived
from quillian.errors import InputError
from quillian.index import state_tables
from quillian.index.state_tables import save_state_tables
from quillian.index.tables import TABLES_DB, load_tables, save_tables
from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.snapshot import GraphSnapshot
from quillian.testing.resolution import RandomCorpus
from quillian.types import Chunk, Provenance, Triple

#: Page titles: with and without a qualifier, bases two pages share, initials.
TITLES = ["", "Paris", "Paris (city)", "Lyon (city)", "Lyon (band)", "A. Turing (man)", "ü (x)"]
TEXTS = ["s", "s is here", "", "Paris in France", "ü s ü", "born in Lyon", "ss"]


def _chunk(extraction: ChunkExtraction) -> Chunk:
    """The chunk an extraction was read from (its title and text drawn by its id)."""
    rng = random.Random(extraction.chunk_id)
    text = rng.choice(TEXTS)
    return Chunk(extraction.doc_id, extraction.index, text, 0, len(text), rng.choice(TITLES))


def _varied(rng: random.Random, chunk: ChunkExtraction) -> ChunkExtraction:
    """``chunk`` with its triples' provenance varied (a sentence that is the chunk's
    text between the offsets or not, an empty one, one read in another chunk), and at
    times a triple many chunks hold."""
    text = _chunk(chunk).text
    triples = []
    for t in chunk.extraction.triples:
        p = t.provenance
        if p is not None and rng.random() < 0.6:
            start = rng.randrange(3)
            end = start + rng.randrange(3)
            sentence = rng.choice([text[start:end], "", "other", text[start:end] + "!"])
            where = rng.choice([p.chunk_id, p.chunk_id, "c1", "elsewhere"])
            p = Provenance(p.doc_id, where, start, end, sentence)
        triples.append(Triple(t.subject, t.predicate, t.object, t.description, p))
    if rng.random() < 0.4:  # one triple id in many chunks: the first occurrence kept
        shared = Provenance(chunk.doc_id, "shared", 0, 1, rng.choice(["s", "t"]))
        where = rng.choice([None, shared])
        triples.append(Triple("Paris", "in", "France", rng.choice(["", "x", "y"]), where))
    extraction = chunk.extraction
    varied = type(extraction)(
        extraction.chunk_id, extraction.doc_id, extraction.entities, tuple(triples)
    )
    return ChunkExtraction(chunk.doc_id, chunk.index, varied)


class _Run:
    """A random corpus, its resolution state, and both writers' outputs after a step."""

    def __init__(self, root: Path, seed: int, scale: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.max_per_chunk = self.rng.choice([3, 64])
        self.corpus = RandomCorpus(self.rng, scale)
        self.chunks: dict[str, ChunkExtraction] = {}
        for _ in range(self.rng.randrange(1, 14)):
            self._add(self.corpus.new())
        self.state = ResolutionState.create(
            root / "state.sqlite",
            self.chunks.values(),
            self.max_per_chunk,
            facts=derived.ENTITY_FACTS,
        )
        self.steps = 0

    def _add(self, chunk: ChunkExtraction) -> ChunkExtraction:
        self.corpus.chunks[chunk.chunk_id] = chunk
        varied = self.chunks[chunk.chunk_id] = _varied(self.rng, chunk)
        return varied

    def step(self) -> None:
        removed, changed = self.corpus.step()
        for chunk_id in removed:
            del self.chunks[chunk_id]
        self.state.apply(removed, [self._add(c) for c in changed])

    def write(self) -> tuple[Path, Path, KnowledgeGraph, GraphSnapshot]:
        """Both writers' directories (state's, builder's), the built graph and the
        snapshot the state's writer returned."""
        self.steps += 1
        ordered = sorted(self.chunks.values(), key=lambda c: (c.doc_id, c.index))
        chunk_ids = [c.chunk_id for c in ordered]
        chunks = [_chunk(c) for c in ordered]
        got, want = self.root / f"got{self.steps}", self.root / f"want{self.steps}"
        builder = GraphBuilder(self.max_per_chunk)
        builder.add_all(c.extraction for c in ordered)
        with CSRGraphStore(want / "graph") as store:
            kg = builder.build(chunk_ids, store=store)
        save_tables(want, kg, chunks)
        if self.steps % 2:  # the snapshot in memory, or written through the store
            snapshot = save_state_tables(got, self.state, chunk_ids, chunks)
            snapshot.save(got / "graph")
        else:
            with CSRGraphStore(got / "graph") as store:
                snapshot = save_state_tables(got, self.state, chunk_ids, chunks, store)
        return got, want, kg, snapshot


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, texts given by value (their row numbers may differ)."""
    queries = {
        "meta": "SELECT * FROM meta ORDER BY key",
        "texts": "SELECT text FROM texts ORDER BY text",
        "chunks": "SELECT c.pos, c.id, a.text, b.text FROM chunks c"
        " LEFT JOIN texts a ON a.id = c.title LEFT JOIN texts b ON b.id = c.text ORDER BY pos",
        "entities": "SELECT * FROM entities ORDER BY pos",
        "descriptions": "SELECT d.pos, d.entity, t.text, d.chunk_id FROM descriptions d"
        " JOIN texts t ON t.id = d.text ORDER BY pos",
        "relations": "SELECT r.pos, r.subject, r.predicate, r.object, d.text, r.source,"
        " r.start, r.end, CASE WHEN r.sentence < 0 THEN r.sentence ELSE s.text END,"
        " r.sentence IS NULL FROM relations r LEFT JOIN texts d ON d.id = r.description"
        " LEFT JOIN texts s ON s.id = r.sentence ORDER BY pos",
        "sources": "SELECT * FROM sources ORDER BY id",
        "names": "SELECT * FROM names ORDER BY key, titled",
        "alias_ids": "SELECT * FROM alias_ids ORDER BY id",
    }
    conn = sqlite3.connect(db)
    try:
        return {table: conn.execute(sql).fetchall() for table, sql in queries.items()}
    finally:
        conn.close()


def assert_same_snapshot(got: GraphSnapshot, want: GraphSnapshot) -> None:
    assert got.ids.ids_of(range(len(got.ids))) == want.ids.ids_of(range(len(want.ids)))
    for name in ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations"):
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def assert_same_outputs(got: Path, want: Path) -> None:
    """``got`` holds what ``want`` holds: the tables' rows, the arrays, the graph."""
    assert _rows(got / TABLES_DB) == _rows(want / TABLES_DB)
    arrays = sorted(p.name for p in (want / "tables").glob("*.npy"))
    assert sorted(p.name for p in (got / "tables").glob("*.npy")) == arrays
    for name in arrays:
        a, b = np.load(got / "tables" / name), np.load(want / "tables" / name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    loaded = (GraphSnapshot.load(d / "graph", verify=False) for d in (got, want))
    assert_same_snapshot(*loaded)


@pytest.mark.parametrize(("seed", "scale"), [(s, 1) for s in range(24)] + [(40, 6), (41, 6)])
def test_every_step_writes_what_the_builder_graph_writes(
    tmp_path: Path, seed: int, scale: int
) -> None:
    run = _Run(tmp_path, seed, scale)
    for _ in range(8):
        got, want, kg, snapshot = run.write()
        assert_same_outputs(got, want)
        assert_same_snapshot(snapshot, kg.snapshot)
        opened, _ = load_tables(got, snapshot)
        assert list(opened.entities) == list(kg.entities)
        assert list(opened.descriptions) == list(kg.descriptions)
        assert list(opened.relations) == list(kg.relations)
        assert opened.find_entity("ent-none") is None
        run.step()
    run.state.close()


def _swap_entities(directory: Path) -> None:
    with sqlite3.connect(directory / TABLES_DB) as conn:
        conn.execute("UPDATE entities SET pos = -1 WHERE pos = 0")
        conn.execute("UPDATE entities SET pos = 0 WHERE pos = 1")
        conn.execute("UPDATE entities SET pos = 1 WHERE pos = -1")
    conn.close()


def _shift_source(directory: Path) -> None:
    with sqlite3.connect(directory / TABLES_DB) as conn:
        conn.execute("UPDATE relations SET source = source + 1 WHERE pos = 0")
    conn.close()


def _swap_array(name: str) -> Callable[[Path], None]:
    def swap(directory: Path) -> None:
        path = directory / "tables" / f"{name}.npy"
        array = np.load(path)
        (differ,) = np.flatnonzero(array != array[0])[:1]  # two values that differ
        array[[0, differ]] = array[[differ, 0]]
        np.save(path, array)

    return swap


def _swap_edges(directory: Path) -> None:
    path = directory / "graph" / "indices.npy"
    indices = np.load(path)
    indptr = np.load(directory / "graph" / "indptr.npy")
    node = int(np.flatnonzero(np.diff(indptr) >= 2)[0])
    first = int(indptr[node])
    indices[[first, first + 1]] = indices[[first + 1, first]]
    np.save(path, indices)


@pytest.mark.parametrize(
    "damage",
    [
        _swap_entities,
        _shift_source,
        _swap_array("relation_chunks"),
        _swap_array("by_entity_order"),
        _swap_array("page_entities"),
        _swap_edges,
    ],
)
def test_the_comparison_catches_a_damaged_output(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    run = _Run(tmp_path, 40, 6)
    got, want, _, _ = run.write()
    assert_same_outputs(got, want)
    damage(got)
    with pytest.raises(AssertionError):
        assert_same_outputs(got, want)
    run.state.close()


@pytest.mark.parametrize(
    ("query", "old", "new"),
    [
        ("_ENTITIES", "ORDER BY doc_id, idx, seq", "ORDER BY doc_id DESC, idx, seq"),
        ("_CHUNK_ORDER", "ORDER BY doc_id, idx", "ORDER BY doc_id, idx DESC"),
        ("_RELATIONS", "ORDER BY c.ord, o.seq", "ORDER BY c.ord DESC, o.seq DESC"),
        ("_RELATIONS", "ORDER BY ord, seq", "ORDER BY ord, seq DESC"),
    ],
)
def test_the_comparison_catches_a_broken_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str, old: str, new: str
) -> None:
    """Positions in another order (entities, which occurrence of a triple is kept, the
    relations' order) do not pass for the builder's."""
    sql = getattr(state_tables, query)
    if isinstance(sql, str):
        assert old in sql
        monkeypatch.setattr(state_tables, query, sql.replace(old, new))
    else:
        assert sum(old in part for part in sql) == 1
        monkeypatch.setattr(state_tables, query, tuple(p.replace(old, new) for p in sql))
    run = _Run(tmp_path, 40, 6)
    failed = False
    for _ in range(8):
        got, want, _, _ = run.write()
        try:
            assert_same_outputs(got, want)
        except AssertionError:
            failed = True
            break
        run.step()
    run.state.close()
    assert failed


def test_a_state_without_the_entity_facts_is_refused_or_read_as_none(tmp_path: Path) -> None:
    """The tables need each entity's lexicon keys and literal flag, which only a state
    made with :data:`derived.ENTITY_FACTS` keeps."""
    corpus = RandomCorpus(random.Random(3))
    chunk = corpus.new()
    path = tmp_path / "state.sqlite"
    state = ResolutionState.create(path, [chunk])  # no facts
    with pytest.raises(InputError, match="entity facts"):
        save_state_tables(tmp_path, state, [chunk.chunk_id], [_chunk(chunk)])
    state.close()
    assert ResolutionState.open(path, facts=derived.ENTITY_FACTS) is None
    assert not (tmp_path / "tables").exists()
