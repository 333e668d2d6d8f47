"""The graph tables written from the entity-resolution state
(:func:`save_state_tables`) equal :func:`save_tables` of the graph
:class:`GraphBuilder` makes of the same extractions, row for row, array for array, and
the snapshot node for node and edge for edge, after every step of random add, change
and delete sequences; deliberate breakages of the writer or its output are caught."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quillian.components.extraction.base import Extraction
from quillian.components.graph.builder import GraphBuilder, KnowledgeGraph
from quillian.components.graph.incremental import STATE_FILE, ChunkExtraction, ResolutionState
from quillian.components.retrieval import derived
from quillian.errors import InputError
from quillian.index import artifacts, graph_positions, state_tables
from quillian.index.chunk_table import rows_of
from quillian.index.graph_positions import GraphPositions
from quillian.index.state_tables import GraphTextIds, save_state_tables
from quillian.index.tables import TABLES_DB, StoredTables, load_tables, save_tables
from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.integrity import file_digest
from quillian.stores.snapshot import GraphSnapshot, IdMap
from quillian.testing import resolution
from quillian.testing.resolution import RandomCorpus
from quillian.testing.tables import (
    assert_same_outputs,
    assert_same_snapshot,
    chunk_texts_in_texts,
    description_chunk_ids,
    relation_words_in_rows,
    whole_texts,
)
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
    text between the offsets or not, an empty one, one read in another chunk or another
    document), and at times a triple many chunks hold."""
    text = _chunk(chunk).text
    triples = []
    for t in chunk.extraction.triples:
        p = t.provenance
        if p is not None and rng.random() < 0.6:
            start = rng.randrange(3)
            end = start + rng.randrange(3)
            sentence = rng.choice([text[start:end], "", "other", text[start:end] + "!"])
            where = rng.choice([p.chunk_id, p.chunk_id, "c1", "elsewhere"])
            # at times another document's (drawn apart, so the seeds' draws stay)
            other = random.Random(f"{chunk.chunk_id} {start} {sentence}").random() < 0.3
            doc = "d-other" if other else p.doc_id
            p = Provenance(doc, where, start, end, sentence)
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
            source=self.source,
        )
        self.steps = 0
        #: the chunks of the last tables written, for the delta a build would tell
        self.written: set[str] | None = None

    def source(self, wanted: Sequence[tuple[str, str, int]]) -> list[Extraction]:
        """The chunks' extractions as the run holds them (the state keeps none)."""
        return [self.chunks[chunk_id].extraction for chunk_id, _, _ in wanted]

    def _add(self, chunk: ChunkExtraction) -> ChunkExtraction:
        self.corpus.chunks[chunk.chunk_id] = chunk
        varied = self.chunks[chunk.chunk_id] = _varied(self.rng, chunk)
        return varied

    def step(self) -> None:
        removed, changed = self.corpus.step()
        for chunk_id in removed:
            del self.chunks[chunk_id]
        self.state.apply(removed, [self._add(c) for c in changed])

    def write(self) -> tuple[Path, Path, Path, KnowledgeGraph, GraphSnapshot]:
        """The state's writer's directory (patched from the last step's where it can),
        a directory written whole from a copy of the state, the builder's, the built
        graph and the snapshot the state's writer returned."""
        self.steps += 1
        ordered = sorted(self.chunks.values(), key=lambda c: (c.doc_id, c.index))
        chunk_ids = [c.chunk_id for c in ordered]
        chunks = [_chunk(c) for c in ordered]
        got, whole = self.root / "got", self.root / f"whole{self.steps}"
        want = self.root / f"want{self.steps}"
        builder = GraphBuilder(self.max_per_chunk)
        builder.add_all(c.extraction for c in ordered)
        with CSRGraphStore(want / "graph") as store:
            kg = builder.build(chunk_ids, store=store)
        save_tables(want, kg, chunks)
        copy = self.root / "copy.sqlite"
        shutil.copyfile(self.state.path, copy)
        other = ResolutionState.open(
            copy, self.max_per_chunk, facts=derived.ENTITY_FACTS, source=self.source
        )
        assert other is not None
        save_state_tables(whole, other, chunk_ids, chunks).save(whole / "graph")
        other.close()
        shutil.rmtree(got / "graph", ignore_errors=True)
        # from the second step on, the tables are patched: the state's log follows them
        db = got / TABLES_DB
        follows = db.is_file() and file_digest(db) == self.state.tables_changes().tables
        assert follows == (self.steps > 1)
        self.text_ids: list[GraphTextIds] = []
        told: dict[str, Any] = {"text_ids_into": self.text_ids}
        if self.written is not None and self.steps % 3:  # the chunks that came and went
            now = set(chunk_ids)  # (titles never change here: drawn by the chunk id)
            told.update(retitled=set(), moved=(now - self.written, self.written - now))
        if self.steps % 2:  # the snapshot in memory, or written through the store
            snapshot = save_state_tables(got, self.state, chunk_ids, chunks, **told)
            snapshot.save(got / "graph")
        else:
            with CSRGraphStore(got / "graph") as store:
                snapshot = save_state_tables(got, self.state, chunk_ids, chunks, store, **told)
        self.written = set(chunk_ids)
        artifacts.settle()  # the columns written aside, as a build waits for them
        return got, whole, want, kg, snapshot


def _count_column_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each read of the graph columns from the rows: True where only the rows a patch
    wrote were read, False where every row was."""
    reads: list[bool] = []
    real = state_tables._Columns.read.__func__  # type: ignore[attr-defined]

    def read(cls: type, conn: sqlite3.Connection, patched: bool = False) -> object:
        reads.append(patched)
        return real(cls, conn, patched)

    monkeypatch.setattr(state_tables._Columns, "read", classmethod(read))
    return reads


def _count_positions_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each time the graph's positions were made from every row: the number of rows."""
    made: list[int] = []
    real = GraphPositions.read.__func__  # type: ignore[attr-defined]

    def read(cls: type, columns: Any, *args: Any) -> object:
        made.append(len(columns.entities))
        return real(cls, columns, *args)

    monkeypatch.setattr(GraphPositions, "read", classmethod(read))
    return made


@pytest.mark.parametrize(("seed", "scale"), [(s, 1) for s in range(24)] + [(40, 6), (41, 6)])
def test_every_step_writes_what_the_builder_graph_writes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    seed: int,
    scale: int,
) -> None:
    reads = _count_column_reads(monkeypatch)
    made = _count_positions_made(monkeypatch)
    run = _Run(tmp_path, seed, scale)
    for _ in range(8):
        got, whole, want, kg, snapshot = run.write()
        assert_same_outputs(got, want)
        assert_same_outputs(whole, want)
        assert_same_snapshot(snapshot, kg.snapshot)
        opened, _ = load_tables(got, snapshot)
        # the text ids the writer gives are those the tables hold, by position
        assert isinstance(opened.indexes, StoredTables)
        (given,) = run.text_ids
        read = opened.indexes.distinct_texts()
        told = opened.indexes.distinct_texts((given.descriptions, given.relations))
        for name in ("ids", "description_rows", "relation_rows"):
            np.testing.assert_array_equal(getattr(told, name), getattr(read, name))
        assert told.read(np.arange(len(told.ids))) == read.read(np.arange(len(read.ids)))
        assert list(opened.entities) == list(kg.entities)
        assert list(opened.descriptions) == list(kg.descriptions)
        assert list(opened.relations) == list(kg.relations)
        assert opened.find_entity("ent-none") is None
        run.step()
        if run.rng.random() < 0.3:  # two updates, the tables written after both
            run.step()
    run.state.close()
    # a patch read back only the rows it wrote: every row was read by the whole writes
    assert reads.count(True) == run.steps - 1 and reads.count(False) == run.steps + 1
    assert "graph columns" not in caplog.text
    # the positions and the snapshot made from every row by the whole writes and the
    # first; each patch carried them from the last write's
    assert len(made) == run.steps + 1 and "snapshot not carried" not in caplog.text


@pytest.mark.parametrize("seed", [50, 51, 52])
def test_a_patch_that_leaves_chunks_alone_keeps_their_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, seed: int
) -> None:
    """Names drawn from thousands, so a step's replay reaches few chunks: the patched
    columns keep the other chunks' rows, and every step still writes what the
    builder's graph writes."""
    monkeypatch.setattr(resolution, "random_name", lambda rng: f"Name {rng.randrange(5000)}")
    reads = _count_column_reads(monkeypatch)
    run = _Run(tmp_path, seed, 2)
    left_alone = 0
    for _ in range(8):
        got, whole, want, _, _ = run.write()
        assert_same_outputs(got, want)
        assert_same_outputs(whole, want)
        before = set(run.chunks)
        run.step()
        left_alone += len(before & set(run.chunks) - set(run.state.tables_changes().chunks))
    run.state.close()
    assert left_alone >= 5  # chunks whose rows the patches kept, not read again
    assert reads.count(True) == run.steps - 1 and "graph columns" not in caplog.text


def _kept(run: _Run) -> tuple[Path, str]:
    """Where the columns are kept, and the digest of the tables the state follows."""
    return state_tables.columns_path(run.state.path), run.state.tables_changes().tables


def _no_file(run: _Run) -> None:
    _kept(run)[0].unlink()


def _junk(run: _Run) -> None:
    _kept(run)[0].write_bytes(b"PK\x03\x04 not a zip file")


def _other_tables(run: _Run) -> None:
    path, digest = _kept(run)
    columns = state_tables._Columns.load(path, digest)
    assert columns is not None
    columns.save(path, "0" * len(digest))


def _misshapen(run: _Run) -> None:
    path, digest = _kept(run)
    columns = state_tables._Columns.load(path, digest)
    assert columns is not None
    dataclasses.replace(columns, descriptions=columns.descriptions[1:]).save(path, digest)


def test_columns_keep_stable_node_ids_as_their_numbers(tmp_path: Path) -> None:
    """The kept file holds each entity's and description's node id as its 64-bit number
    and reads back the same ids."""
    run = _Run(tmp_path, 40, 6)
    run.write()
    path, digest = _kept(run)
    columns = state_tables._Columns.load(path, digest)  # waits for the file
    assert columns is not None and len(columns.description_nodes) and len(columns.entity_nodes)
    with np.load(path) as kept:
        assert {"description_nodes.0.numbers", "entity_nodes.0.numbers"} <= set(kept.files)
        assert not {"description_nodes.0", "entity_nodes.0"} & set(kept.files)
        for name in ("description_nodes", "entity_nodes"):
            read = state_tables._stacked(kept, name)
            assert read.tolist() == getattr(columns, name).tolist()
    run.state.close()


@pytest.mark.parametrize(
    ("change", "warned"),
    [(_no_file, False), (_other_tables, False), (_junk, True), (_misshapen, True)],
    ids=["none", "other-tables", "unreadable", "misshapen"],
)
def test_columns_missing_or_damaged_are_read_from_every_row(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    change: Callable[[_Run], None],
    warned: bool,
) -> None:
    """Tables the state follows whose columns are not kept (an index made before, a
    build stopped between the state's mark and the columns) or do not read: the patch
    reads every row's columns again, writes what the builder's graph gives, and keeps
    the columns for the next patch."""
    reads = _count_column_reads(monkeypatch)
    run = _Run(tmp_path, 40, 6)
    run.write()
    change(run)
    graph_positions.KEPT.clear()  # a new process: only the kept file
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    # whole, got; whole, got: the rows the patch wrote read, then every row (none kept)
    assert reads == [False, False, False, True, False]
    assert ("graph columns" in caplog.text) == warned
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    assert reads[-2:] == [False, True]  # whole, got (patched)
    run.state.close()


def test_a_kept_graph_that_miscounts_is_made_again_from_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The graph this process kept lacking a row (as if the log had missed a chunk):
    the carry's count differs from the tables', and the positions and the snapshot are
    made from every row; the tables are what the builder's graph gives."""
    monkeypatch.setattr(resolution, "random_name", lambda rng: f"Name {rng.randrange(5000)}")
    made = _count_positions_made(monkeypatch)
    run = _Run(tmp_path, 50, 2)
    run.write()
    run.step()
    changes = run.state.tables_changes()
    kept = graph_positions.KEPT.get(run.state.path, changes.tables)
    assert kept is not None
    graph, snapshot = kept
    # a mention of a chunk the step left alone
    (left,) = np.flatnonzero(~np.isin(graph.mentions[:, 0], rows_of(changes.chunks)))[:1]
    keep = np.arange(len(graph.mentions)) != left
    fewer = GraphPositions(
        graph.chunk_rows,
        graph.entities,
        (graph.descriptions, graph.description_chunk, graph.description_nodes),
        (graph.relations, graph.relation_own, graph.relation_chunk),
        (graph.mentions[keep], graph.mention_chunk[keep], graph.mention_weights[keep]),
        graph.node_ids,
        True,
    )
    graph_positions.KEPT.keep(run.state.path, changes.tables, (fewer, snapshot))
    got, _, want, kg, snapshot = run.write()
    assert_same_outputs(got, want)
    assert_same_snapshot(snapshot, kg.snapshot)
    assert "graph columns patched to" in caplog.text and len(made) == 4  # whole, got twice
    run.state.close()


def test_a_snapshot_that_does_not_carry_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A kept snapshot whose carry is refused (an edge of a row said unchanged that
    reaches a node gone): a warning, and the snapshot built from the carried
    positions' edges, what the builder's graph gives."""
    run = _Run(tmp_path, 40, 6)
    run.write()

    def refused(*args: Any) -> GraphSnapshot:
        raise ValueError("a kept edge reaches a node that is gone")

    monkeypatch.setattr(GraphSnapshot, "carried", refused)
    run.step()
    got, _, want, kg, snapshot = run.write()
    assert_same_outputs(got, want)
    assert_same_snapshot(snapshot, kg.snapshot)
    assert "graph snapshot not carried" in caplog.text
    run.state.close()


def test_a_snapshot_write_that_fails_leaves_the_tables_and_the_log_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot is written in a thread of its own while the tables are finished: its
    error is raised by the write, after the tables' own work ended; the tables swapped
    in before and the state's log stay, and the next write is made good from them."""
    run = _Run(tmp_path, 42, 6)
    run.write()
    db = tmp_path / "got" / TABLES_DB
    before = file_digest(db)
    run.step()

    def full(self: CSRGraphStore, snapshot: GraphSnapshot) -> GraphSnapshot:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CSRGraphStore, "write_snapshot", full)
    with pytest.raises(OSError, match="No space left"):
        run.write()  # the second step's: through the store
    assert file_digest(db) == before == run.state.tables_changes().tables
    assert run.state.tables_changes().chunks  # the step still logged, to patch again
    monkeypatch.undo()
    got, _, want, kg, snapshot = run.write()
    assert_same_outputs(got, want)
    assert_same_snapshot(snapshot, kg.snapshot)
    run.state.close()


def test_patched_columns_that_miscount_are_read_from_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Kept columns that read but lack rows (as if the log had missed chunks): the
    count after the patch differs from the tables', and every row is read again."""
    monkeypatch.setattr(resolution, "random_name", lambda rng: f"Name {rng.randrange(5000)}")
    reads = _count_column_reads(monkeypatch)
    run = _Run(tmp_path, 50, 2)
    run.write()
    path, digest = _kept(run)
    columns = state_tables._Columns.load(path, digest)
    assert columns is not None and len(columns.mentions) > 1
    fewer = dataclasses.replace(columns, mentions=columns.mentions[:0], weights=columns.weights[:0])
    fewer.save(path, digest)
    graph_positions.KEPT.clear()
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    assert reads[2:] == [False, True, False]  # whole; got patched, miscounted, read again
    assert "graph columns patched to" in caplog.text
    run.state.close()


def test_columns_that_cannot_be_kept_leave_the_build_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A columns file that cannot be written (here a folder in its place) is named in a
    warning; the tables are written and marked, and the next patch reads every row."""
    run = _Run(tmp_path, 40, 6)
    state_tables.columns_path(run.state.path).mkdir()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    assert "graph columns not kept" in caplog.text
    assert file_digest(got / TABLES_DB) == run.state.tables_changes().tables
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    run.state.close()


def test_the_columns_stay_on_the_machine(tmp_path: Path) -> None:
    """The columns are kept beside the state (machine-local, never synchronised with a
    PostgreSQL workspace's files), not in the tables database."""
    from quillian.stores.postgres.files import SKIPPED

    run = _Run(tmp_path, 40, 6)
    got, *_ = run.write()
    path, digest = _kept(run)
    assert state_tables._Columns.load(path, digest) is not None
    assert path.name == "state.sqlite.columns"  # beside the state, named after it
    index_state = state_tables.columns_path(Path(STATE_FILE))
    assert {index_state.name, index_state.name + ".partial"} <= SKIPPED
    with sqlite3.connect(got / TABLES_DB) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert not any("column" in name for name in tables)
    run.state.close()


def test_columns_are_kept_in_runs_where_smaller_and_read_back_exactly(tmp_path: Path) -> None:
    """A chunk's key repeated on its rows and its sequence numbers counting up are kept
    as runs (of values, of steps), 64-bit keys whose steps wrap around included; a
    column without runs is kept whole, narrowed; each reads back as it was."""
    top, low = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    keys = np.repeat(np.array([top, low, -5, top, 7], np.int64), [300, 2, 40, 1, 200])
    seqs = np.concatenate([np.arange(n) for n in (300, 2, 40, 1, 200)])
    drawn = np.random.default_rng(3).integers(low, top, 500, dtype=np.int64)
    weights = np.repeat([1.0, 0.5, 0.25, 0.5], [1, 250, 1, 248])
    with np.errstate(over="ignore"):  # counting up past the largest key, on from the least
        wrapping = np.arange(500, dtype=np.int64) + (top - 3)
    columns = {"keys": keys, "seqs": seqs, "drawn": drawn, "rows": np.arange(7, 507)}
    columns |= {"weights": weights, "wrapping": wrapping}
    path = tmp_path / "runs.npz"
    kept: dict[str, Any] = {}
    for name, column in columns.items():
        steps = name in ("seqs", "rows", "drawn", "wrapping")
        kept.update(state_tables._in_runs(name, column, steps))
    np.savez(path, **kept)
    assert {"keys.runs", "seqs.first", "rows.first", "weights.runs", "drawn"} <= set(kept)
    assert kept["wrapping.runs"].tolist() == [1] and kept["wrapping.lengths"].tolist() == [499]
    assert "drawn.runs" not in kept and kept["seqs.runs"].dtype == np.int16
    assert sum(a.nbytes for a in kept.values()) < 0.4 * sum(a.nbytes for a in columns.values())
    with np.load(path) as read:
        for name, column in columns.items():
            back = state_tables._from_runs(read, name)
            assert back.tolist() == column.tolist() and back.dtype.kind == column.dtype.kind


def _swap_entities(directory: Path) -> None:
    first, second = (int(r) for r in np.load(directory / "tables" / "entity_order.npy")[:2])
    with sqlite3.connect(directory / TABLES_DB) as conn:
        conn.execute("UPDATE entities SET row = -1 WHERE row = ?", (first,))
        conn.execute("UPDATE entities SET row = ? WHERE row = ?", (first, second))
        conn.execute("UPDATE entities SET row = ? WHERE row = -1", (second,))
    conn.close()


def _shift_source(directory: Path) -> None:
    with sqlite3.connect(directory / TABLES_DB) as conn:
        conn.execute(
            "UPDATE relations SET source = (SELECT max(id) FROM sources) + 1"
            " WHERE row = (SELECT min(row) FROM relations WHERE source IS NOT NULL)"
        )
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
        _swap_array("relation_order"),
        _swap_array("by_entity_order"),
        _swap_array("page_entities"),
        _swap_edges,
    ],
)
def test_the_comparison_catches_a_damaged_output(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    run = _Run(tmp_path, 40, 6)
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    damage(got)
    with pytest.raises(AssertionError):
        assert_same_outputs(got, want)
    run.state.close()


@pytest.mark.parametrize(
    ("query", "old", "new"),
    [
        ("_ENTITY_ORDER", "ORDER BY doc_id, idx, seq", "ORDER BY doc_id DESC, idx, seq"),
        ("_ORDER", "ORDER BY doc_id, idx)", "ORDER BY doc_id, idx DESC)"),
        ("_ORDER", "ORDER BY c.ord, o.seq", "ORDER BY c.ord DESC, o.seq DESC"),
        ("_FIRST", "ORDER BY c.doc_id, c.idx, o.seq", "ORDER BY c.doc_id DESC, c.idx, o.seq"),
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
        got, whole, want, _, _ = run.write()
        try:
            assert_same_outputs(got, want)
            assert_same_outputs(whole, want)
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


@pytest.mark.parametrize("told", [False, True], ids=["compared", "told"])
def test_a_chunk_whose_title_changed_is_written_again(tmp_path: Path, told: bool) -> None:
    """A document given its own id may come back with its text and another title: its
    chunks keep their ids, and the patched tables take the new title, whether every
    title is compared with the tables' or the build names the chunks retitled (the
    linking's delta)."""
    run = _Run(tmp_path, 5, 1)
    run.write()
    ordered = sorted(run.chunks.values(), key=lambda c: (c.doc_id, c.index))
    chunk_ids = [c.chunk_id for c in ordered]
    chunks = [_chunk(c) for c in ordered]
    chunks[0] = dataclasses.replace(chunks[0], title="Another (title)")
    got, want = tmp_path / "got", tmp_path / "want"
    shutil.rmtree(got / "graph")
    follows = file_digest(got / TABLES_DB) == run.state.tables_changes().tables
    retitled = {chunk_ids[0]} if told else None
    save_state_tables(got, run.state, chunk_ids, chunks, retitled=retitled).save(got / "graph")
    builder = GraphBuilder(run.max_per_chunk)
    builder.add_all(c.extraction for c in ordered)
    with CSRGraphStore(want / "graph") as store:
        save_tables(want, builder.build(chunk_ids, store=store), chunks)
    assert follows  # the second write was a patch
    assert_same_outputs(got, want)
    run.state.close()


def test_a_delta_the_tables_do_not_follow_is_a_warning_and_every_chunk_compared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Told that a chunk the tables hold came, or that one they lack went, the patch
    compares every chunk instead, and writes what the builder's graph writes."""
    run = _Run(tmp_path, 8, 1)  # a seed whose steps leave a chunk the tables hold
    run.write()
    for lie in ("held chunk told as added", "absent chunk told as removed"):
        run.step()
        ordered = sorted(run.chunks.values(), key=lambda c: (c.doc_id, c.index))
        chunk_ids = [c.chunk_id for c in ordered]
        chunks = [_chunk(c) for c in ordered]
        assert run.written is not None
        now = set(chunk_ids)
        added, removed = now - run.written, run.written - now
        if lie.startswith("held"):
            held = now & run.written
            assert held, "this step replaced every chunk: the test needs another seed"
            added |= {min(held)}
        else:
            removed |= {"chunk-never-stored"}
        got, want = tmp_path / "got", tmp_path / f"want-{len(lie)}"
        shutil.rmtree(got / "graph")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="quillian.index.state_tables"):
            save_state_tables(
                got, run.state, chunk_ids, chunks, retitled=set(), moved=(added, removed)
            ).save(got / "graph")
        assert "not the delta's: every chunk compared" in caplog.text, lie
        run.written = now
        builder = GraphBuilder(run.max_per_chunk)
        builder.add_all(c.extraction for c in ordered)
        with CSRGraphStore(want / "graph") as store:
            save_tables(want, builder.build(chunk_ids, store=store), chunks)
        assert_same_outputs(got, want)
    run.state.close()


@pytest.mark.parametrize("seed", range(5))
def test_new_entities_are_placed_where_the_index_order_puts_them(seed: int) -> None:
    """A patch keeps the entities' order and places the logged ones by bisection on
    their order keys: the same order as sorting every entity, ties settled by row."""
    rng = random.Random(seed)
    conn = sqlite3.connect(":memory:")
    conn.execute("ATTACH DATABASE ':memory:' AS st")
    conn.execute("CREATE TABLE st.entities (row INTEGER PRIMARY KEY, doc_id, idx, seq)")
    keys = {
        row: (f"doc-{rng.randrange(30):02d}é", rng.randrange(4), rng.randrange(3))
        for row in rng.sample(range(10_000), 400)
    }
    conn.executemany(
        "INSERT INTO st.entities VALUES (?, ?, ?, ?)", ((r, *k) for r, k in keys.items())
    )
    ordered = sorted(keys, key=lambda r: (*keys[r], r))
    new = set(rng.sample(ordered, rng.randrange(1, 60)))
    kept = np.array([r for r in ordered if r not in new], np.int64)
    added = np.array([r for r in ordered if r in new], np.int64)
    at = state_tables._entity_places(conn, kept, added)
    assert np.insert(kept, at, added).tolist() == ordered


def test_node_ids_inserted_keep_their_whole_width() -> None:
    kept = state_tables._node_ids(["ent-a", "ent-b"])
    merged = state_tables._inserted(kept, [1], state_tables._node_ids(["ent-longer"]))
    assert merged.tolist() == [b"ent-a", b"ent-longer", b"ent-b"]
    ids = IdMap.from_bytes(merged)
    assert ids.ids_of(range(3)) == ["ent-a", "ent-longer", "ent-b"]


def test_tables_a_state_marked_with_blake2b_are_patched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state marked its tables with their BLAKE2b digest before file records were
    hashed with XXH3: the next write finds them the state's all the same and patches
    them, rather than writing them whole."""
    run = _Run(tmp_path, 40, 6)
    got, *_ = run.write()
    digest = hashlib.blake2b((got / TABLES_DB).read_bytes(), digest_size=16).hexdigest()
    run.state.mark_tables(digest)
    run.step()
    patched: list[int] = []
    real = state_tables._Writer._patch

    def patch(self: state_tables._Writer, *args: Any) -> list[str]:
        patched.append(1)
        return real(self, *args)

    monkeypatch.setattr(state_tables._Writer, "_patch", patch)
    ordered = sorted(run.chunks.values(), key=lambda c: (c.doc_id, c.index))
    save_state_tables(got, run.state, [c.chunk_id for c in ordered], [_chunk(c) for c in ordered])
    assert patched == [1]
    got, _, want, _, _ = run.write()  # nothing logged since: the patched tables kept
    assert_same_outputs(got, want)
    run.state.close()


@pytest.mark.parametrize(
    ("layout", "older"),
    [
        ("keyed-1", chunk_texts_in_texts),
        ("keyed-2", description_chunk_ids),
        ("keyed-3", whole_texts),
        ("keyed-4", relation_words_in_rows),
    ],
)
def test_tables_of_an_older_layout_are_written_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    layout: str,
    older: Callable[[Path], None],
) -> None:
    """Tables of layout ``keyed-1`` (a build before chunk texts were rows' bodies),
    ``keyed-2`` (before descriptions named their chunk by key alone), ``keyed-3``
    (before texts were kept as spans of their chunks) or ``keyed-4`` (before relations
    left out the words their entities imply), the very tables
    the state's log follows, are written whole once in the layout of now, not patched,
    and equal the builder's."""
    run = _Run(tmp_path, 40, 6)
    got, *_ = run.write()
    older(got)
    run.state.mark_tables(file_digest(got / TABLES_DB))
    run.step()
    patched: list[int] = []
    monkeypatch.setattr(state_tables._Writer, "_patch", lambda *a: patched.append(1))
    ordered = sorted(run.chunks.values(), key=lambda c: (c.doc_id, c.index))
    with caplog.at_level(logging.INFO):
        save_state_tables(
            got, run.state, [c.chunk_id for c in ordered], [_chunk(c) for c in ordered]
        ).save(got / "graph")
    assert not patched and f"has layout {layout}" in caplog.text
    monkeypatch.undo()
    got, _, want, _, _ = run.write()  # nothing logged since: the tables written kept
    assert_same_outputs(got, want)
    run.state.close()


@pytest.mark.parametrize("at", [0, -1])
def test_kept_columns_naming_an_entity_the_state_lacks_are_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, at: int
) -> None:
    """Kept columns holding an entity row the state does not (first or last in index
    order): the patch finds it, by its key or by the count, and reads every row again."""
    reads = _count_column_reads(monkeypatch)
    run = _Run(tmp_path, 41, 6)
    run.write()
    path, digest = _kept(run)
    columns = state_tables._Columns.load(path, digest)
    assert columns is not None
    where = 0 if at == 0 else len(columns.entities)
    bogus = dataclasses.replace(
        columns,
        entities=np.insert(columns.entities, where, 10**9),
        entity_nodes=np.insert(columns.entity_nodes, where, b"ent-bogus"),
        literal=np.insert(columns.literal, where, False),
    )
    bogus.save(path, digest)
    graph_positions.KEPT.clear()
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    assert reads[2:] == [False, True, False]  # whole; got patched, found wrong, read again
    assert "graph columns" in caplog.text
    run.state.close()


def test_a_patch_reads_the_state_by_the_logged_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each statement of a patch that joins the logged chunks, triples, keys or alias
    ids to the state's rows finds those rows by key: no plan scans a table of the
    state or of the tables. (SQLite put the state's 185k descriptions outside the one
    logged chunk of an update at 100k passages, and its occurrences, entity keys and
    alias ids likewise: about 0.06 s of every update.)"""
    run = _Run(tmp_path, 42, 6)
    run.write()
    run.step()
    plans: list[tuple[str, list[str]]] = []
    connect = sqlite3.connect

    class Explained(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            words = " ".join(sql.split())
            logged = ("FROM cc ", "FROM ct ", "FROM ck ", "FROM ca ", "FROM first f ")
            if any(w in words for w in logged):
                rows = super().execute("EXPLAIN QUERY PLAN " + sql, *args).fetchall()
                plans.append((words, [r[3] for r in rows]))
            return super().execute(sql, *args)

    def explained(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return connect(*args, factory=Explained, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", explained)
    run.write()
    assert len(plans) >= 8  # the descriptions', the relations' and the lexicon's joins
    temp = ("cc", "ct", "ck", "ca", "f", "first")
    for sql, plan in plans:
        scanned = [step.split()[1] for step in plan if step.startswith("SCAN ")]
        # a subquery's rows, made from the logged keys, are scanned as made
        assert all(t in temp or t.startswith("(subquery-") for t in scanned), (sql, plan)
    run.state.close()


def test_columns_this_process_kept_are_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patch in the process that kept the columns takes them from its memory, not
    from the file; with that memory gone (another process), from the file: the same
    outputs either way."""
    loads: list[Path] = []
    real = state_tables.load_arrays

    def counted(path: Path, *args: Any) -> Any:
        loads.append(path)
        return real(path, *args)

    monkeypatch.setattr(state_tables, "load_arrays", counted)
    run = _Run(tmp_path, 41, 6)
    run.write()
    kept = _kept(run)[0]
    for _ in range(3):
        run.step()
        got, _, want, _, _ = run.write()
        assert_same_outputs(got, want)
    assert kept not in loads
    artifacts.write_kept()  # what this process kept, written as it exits
    monkeypatch.setattr(artifacts, "_REMEMBERED", type(artifacts._REMEMBERED)())
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    assert loads.count(kept) == 1
    run.state.close()


def test_columns_a_killed_process_did_not_write_are_read_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Updates in one process write the columns' file only once they pause: a process
    killed before leaves the file of an earlier build, which the next process's patch
    finds does not follow its tables, and reads past (every row): the same outputs."""
    monkeypatch.setattr(artifacts, "LATER_S", 3600.0)  # no pause within the test
    run = _Run(tmp_path, 42, 6)
    run.write()
    path, first = _kept(run)
    for _ in range(3):
        run.step()
        run.write()
    assert _kept(run)[1] != first
    # killed: its kept writes and its memory gone
    monkeypatch.setattr(artifacts, "_LATER", artifacts._Later())
    monkeypatch.setattr(artifacts, "_REMEMBERED", type(artifacts._REMEMBERED)())
    graph_positions.KEPT.clear()
    assert state_tables._Columns.load(path, _kept(run)[1]) is None  # an earlier build's
    run.step()
    got, _, want, _, _ = run.write()
    assert_same_outputs(got, want)
    run.state.close()
