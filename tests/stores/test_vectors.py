"""Vector indexes: the contract for exact (float32, float16, int8) and FAISS HNSW, plus
specifics."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from quillian.errors import (
    ConfigError,
    IndexIncompleteError,
    InputError,
    MissingExtraError,
    StoreError,
)
from quillian.stores.embedded import _vecutil
from quillian.stores.embedded import vectors as vectors_module
from quillian.stores.embedded.vectors import (
    ExactVectorIndex,
    ExactVectorWriter,
    FaissHNSWIndex,
    UnknownIdError,
)
from quillian.stores.mapped import is_mapped
from quillian.stores.recent import Recent
from quillian.testing.contracts import VectorIndexContract, unit_vectors


class TestExactVectorIndex(VectorIndexContract):
    dtype: ClassVar[str] = "float32"

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[ExactVectorIndex]:
        with ExactVectorIndex(tmp_path / "vectors", self.dim, dtype=self.dtype) as index:
            yield index

    def reopen(self, store: ExactVectorIndex) -> ExactVectorIndex:  # type: ignore[override]
        store.close()
        return ExactVectorIndex(store.directory)


class TestExactVectorIndexFloat16(TestExactVectorIndex):
    dtype = "float16"
    atol = 1e-3
    recall_threshold = 0.99


class TestExactVectorIndexInt8(TestExactVectorIndex):
    """Rows stored as int8 codes and a scale: read back within a code's step."""

    dtype = "int8"
    atol = 5e-3
    recall_threshold = 0.95


class AlwaysSketched:
    """Every search of few queries goes through the int8 sketch, whatever the size."""

    @pytest.fixture(autouse=True)
    def always_sketch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(vectors_module, "SKETCH_MIN_ROWS", 1)
        monkeypatch.setattr(vectors_module, "SKETCH_ROWS_PER_K", 0)


class SmallBlocks:
    """Every search spans several row blocks, so the running top-k merge is exercised;
    no segment is read back whole (float16 and int8 are cast block by block)."""

    @pytest.fixture(autouse=True)
    def small_blocks(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from quillian.stores.embedded import _segments

        monkeypatch.setattr(_vecutil, "BLOCK", 64)
        monkeypatch.setattr(_segments, "WIDEN_MAX_VALUES", 0)


class TestExactVectorIndexSketched(AlwaysSketched, TestExactVectorIndex):
    pass


class TestExactVectorIndexSmallBlocks(SmallBlocks, TestExactVectorIndex):
    pass


class TestExactVectorIndexInt8Sketched(AlwaysSketched, TestExactVectorIndexInt8):
    pass


class TestExactVectorIndexInt8SmallBlocks(SmallBlocks, TestExactVectorIndexInt8):
    pass


class TestFaissHNSWIndex(VectorIndexContract):
    recall_threshold = 0.9

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[FaissHNSWIndex]:
        with FaissHNSWIndex(tmp_path / "hnsw", self.dim, m=16) as index:
            yield index

    def reopen(self, store: FaissHNSWIndex) -> FaissHNSWIndex:  # type: ignore[override]
        store.close()
        return FaissHNSWIndex(store.directory)


def test_reopened_vectors_are_memory_mapped(tmp_path: Path) -> None:
    with ExactVectorIndex(tmp_path, 4) as index:
        index.add([1, 2], unit_vectors(2, 4, 0))
    again = ExactVectorIndex(tmp_path)
    vectors = again._base.parts[0].vectors
    assert is_mapped(vectors) and not isinstance(vectors, np.memmap)
    assert json.loads((tmp_path / "index.json").read_text())["count"] == 2
    again.close()


def test_flush_writes_a_new_generation_and_removes_the_old(tmp_path: Path) -> None:
    with ExactVectorIndex(tmp_path, 4) as index:
        index.add([1], unit_vectors(1, 4, 0))
        index.flush()
        first = sorted(p.name for p in tmp_path.iterdir())
        index.add([2], unit_vectors(1, 4, 1))
        index.flush()
        second = sorted(p.name for p in tmp_path.iterdir())
    assert first == ["ids-000001.npy", "index.json", "vectors-000001.npy"]
    assert second == ["ids-000002.npy", "index.json", "vectors-000002.npy"]


def test_a_flush_that_merges_only_deleted_rows_keeps_no_empty_segment(tmp_path: Path) -> None:
    with ExactVectorIndex(tmp_path, 4) as index:
        index.add([1, 2], unit_vectors(2, 4, 0))
        index.flush()
        index.delete([1, 2])
        index.flush()
        assert json.loads((tmp_path / "index.json").read_text())["segments"] == []
        assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]
        assert len(index) == 0 and index.search(unit_vectors(1, 4, 0), 3)[0].size == 0
        index.add([3], unit_vectors(1, 4, 1))
    with ExactVectorIndex(tmp_path) as again:
        assert again.ids().tolist() == [3]


def test_an_interrupted_flush_leaves_the_last_commit(tmp_path: Path) -> None:
    x = unit_vectors(3, 4, 0)
    with ExactVectorIndex(tmp_path, 4) as index:
        index.add([1, 2], x[:2])
    # A crash after writing generation 2's data but before committing the manifest.
    np.save(tmp_path / "vectors-000002.npy", x)
    (tmp_path / "index.json.tmp").write_text("{")
    with ExactVectorIndex(tmp_path) as index:
        assert len(index) == 2
    assert not (tmp_path / "vectors-000002.npy").exists()
    assert not (tmp_path / "index.json.tmp").exists()


def test_damaged_index_is_reported(tmp_path: Path) -> None:
    with ExactVectorIndex(tmp_path, 4) as index:
        index.add([1], unit_vectors(1, 4, 0))
    (tmp_path / "ids-000001.npy").unlink()
    with pytest.raises(IndexIncompleteError, match=str(tmp_path)):
        ExactVectorIndex(tmp_path)
    (tmp_path / "index.json").write_text("not json")
    with pytest.raises(IndexIncompleteError, match=r"index\.json"):
        ExactVectorIndex(tmp_path)


def test_configuration_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dim"):
        ExactVectorIndex(tmp_path / "new")
    with pytest.raises(ConfigError, match="dtype"):
        ExactVectorIndex(tmp_path / "new", 4, dtype="int4")
    ExactVectorIndex(tmp_path / "old", 4, dtype="float16").close()
    with pytest.raises(ConfigError, match="dim 4"):
        ExactVectorIndex(tmp_path / "old", 8)
    with pytest.raises(ConfigError, match="float16"):
        ExactVectorIndex(tmp_path / "old", dtype="float32")
    with pytest.raises(StoreError, match="'exact'"):
        FaissHNSWIndex(tmp_path / "old")
    with pytest.raises(ConfigError, match="ef_search"):
        FaissHNSWIndex(tmp_path / "hnsw", 4, ef_search=0)


def test_float16_range_is_checked(tmp_path: Path) -> None:
    with ExactVectorIndex(tmp_path, 2, dtype="float16") as index:
        with pytest.raises(InputError, match="float16"):
            index.add([1], [[1e6, 0.0]])
        assert len(index) == 0


def test_a_small_float16_segment_is_scanned_from_a_float32_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small float16 segment is cast once, on its first scan, and the copy is scanned
    after; a larger one is scanned as mapped, block by block: both rank alike."""
    from quillian.stores.embedded import _segments

    x = unit_vectors(300, 8, 3)
    with ExactVectorIndex(tmp_path, 8, dtype="float16") as index:
        index.add(np.arange(300), x)
        index.flush()
    with ExactVectorIndex(tmp_path) as index:
        expected = index.search(x[:5], 7)
        (scanned, _, _), *_ = index._base.searched()
        assert scanned.dtype == np.float32
        np.testing.assert_array_equal(scanned, index.get(np.arange(300)))
        assert index._base.searched()[0][0] is scanned  # cast once
        monkeypatch.setattr(_segments, "WIDEN_MAX_VALUES", 300 * 8 - 1)
        assert index._base.searched()[0][0].dtype == np.float16
        found = index.search(x[:5], 7)
    np.testing.assert_array_equal(found[0], expected[0])
    np.testing.assert_array_equal(found[1], expected[1])


def test_int8_rows_keep_their_scale_and_rank_as_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An int8 row is its codes and scale: a quarter of float32's bytes and four more,
    read back within half a code's step of each value; searches rank the rows as read
    back, exactly, through every path (a whole scan, blocks, the sketch, a merge)."""
    from quillian.stores.embedded import _segments

    x = unit_vectors(600, 16, 9) * np.linspace(0.1, 40, 600, dtype=np.float32)[:, None]
    x[7] = 0.0  # a zero row keeps a unit scale and zero codes
    with ExactVectorIndex(tmp_path, 16, dtype="int8") as index:
        index.add(np.arange(400), x[:400])
        index.flush()
        index.add(np.arange(400, 600), x[400:])  # unflushed: the tail
        back = index.get(np.arange(600))
        step = np.abs(x).max(axis=1, keepdims=True) / 127
        assert (np.abs(back - x) <= step / 2 + 1e-6 * np.abs(x)).all()
        assert not back[7].any()
        queries = unit_vectors(6, 16, 2)
        exact = np.argsort(-(queries.astype(np.float64) @ back.T.astype(np.float64)), axis=1)
        found = index.search(queries, 5)[0]
        np.testing.assert_array_equal(found, exact[:, :5])
        index.flush()
    stored = np.load(tmp_path / "vectors-000001.npy", mmap_mode="r")
    assert stored.dtype == np.int8 and stored.shape == (400, 20)
    with ExactVectorIndex(tmp_path) as index:
        assert index.dtype == "int8"
        np.testing.assert_array_equal(index.get(np.arange(600)), back)
        for widen, sketch_rows in ((1 << 21, 4096), (0, 4096), (0, 1)):  # copy, blocks, sketch
            monkeypatch.setattr(_segments, "WIDEN_MAX_VALUES", widen)
            monkeypatch.setattr(vectors_module, "SKETCH_MIN_ROWS", sketch_rows)
            index._base._widened, index._sketch = {}, None
            for query, expected in zip(queries, found, strict=True):  # few: the sketch's
                np.testing.assert_array_equal(index.search(query, 5)[0][0], expected)
        assert index._sketch is not None
        batches = list(index.read_batches(128))
        np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), back)


def test_an_int8_bulk_write_reads_back_as_an_added_one(tmp_path: Path) -> None:
    x = unit_vectors(10, 4, 3)
    with ExactVectorWriter(tmp_path / "bulk", 4, 10, dtype="int8") as writer:
        writer.append(np.arange(10), x)
    with ExactVectorIndex(tmp_path / "added", 4, dtype="int8") as added:
        added.add(np.arange(10), x)
        with ExactVectorIndex(tmp_path / "bulk") as bulk:
            np.testing.assert_array_equal(bulk.get(np.arange(10)), added.get(np.arange(10)))


def test_search_among_allowed_ids(tmp_path: Path) -> None:
    x = unit_vectors(100, 8, 0)
    with ExactVectorIndex(tmp_path, 8) as index:
        index.add(np.arange(100), x)
        allowed = [5, 50, 7, 7]
        ids, scores = index.search(x[7], 10, allowed=allowed)
        assert ids.tolist()[0][0] == 7 and sorted(ids.tolist()[0]) == [5, 7, 50]
        np.testing.assert_allclose(scores[0], x[ids[0]] @ x[7], atol=1e-6)
        with pytest.raises(UnknownIdError, match="1000"):
            index.search(x[0], 3, allowed=[1, 1000])


def test_faiss_search_among_allowed_ids(tmp_path: Path) -> None:
    x = unit_vectors(50, 8, 1)
    with FaissHNSWIndex(tmp_path, 8) as index:
        index.add(np.arange(50), x)
        ids, _ = index.search(x[3], 2, allowed=[3, 4, 5])
        assert ids[0, 0] == 3 and len(ids[0]) == 2


def test_contains(tmp_path: Path) -> None:
    with ExactVectorIndex(tmp_path, 2) as index:
        index.add([4], [[1.0, 0.0]])
        assert index.contains([4, 5]).tolist() == [True, False]


def test_many_small_adds_then_replacements(tmp_path: Path) -> None:
    x = unit_vectors(6000, 4, 2)
    with ExactVectorIndex(tmp_path, 4) as index:
        for start in range(0, 5000, 100):
            index.add(np.arange(start, start + 100), x[start : start + 100])
        index.add(np.arange(0, 1000), x[5000:])
        assert len(index) == 5000
        np.testing.assert_array_equal(index.get([0, 999, 1000, 4999]), x[[5000, 5999, 1000, 4999]])


def test_missing_faiss_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(MissingExtraError, match=r"quillian\[ann\]"):
        FaissHNSWIndex(tmp_path, 4)


def test_keep_last() -> None:
    ids, vecs = _vecutil.keep_last(
        np.array([3, 1, 3, 2, 1]), np.arange(5, dtype=np.float32)[:, None]
    )
    assert ids.tolist() == [3, 2, 1] and vecs[:, 0].tolist() == [2.0, 3.0, 4.0]


# --- bulk writer --------------------------------------------------------------------------


def test_bulk_writer_round_trip(tmp_path: Path) -> None:
    x = unit_vectors(10, 4, 3)
    with ExactVectorWriter(tmp_path, 4, 10, dtype="float16") as writer:
        writer.append(np.arange(10, 6, -1), x[:4])
        writer.append(np.arange(6), x[4:])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ids-000001.npy",
        "index.json",
        "vectors-000001.npy",
    ]
    with ExactVectorIndex(tmp_path) as index:
        assert len(index) == 10 and index.dtype == "float16"
        np.testing.assert_allclose(index.get([10, 7, 0, 5]), x[[0, 3, 4, 9]], atol=1e-3)
        assert index.search(x[5], 1)[0].tolist() == [[1]]
        index.add([11], x[:1])  # a bulk-written index grows like any other
    assert len(ExactVectorIndex(tmp_path)) == 11


def test_half_written_bulk_index_is_not_opened_as_complete(tmp_path: Path) -> None:
    writer = ExactVectorWriter(tmp_path, 4, 10)
    writer.append(np.arange(4), unit_vectors(4, 4, 0))
    writer._close_files()  # a crash here: data files exist, the manifest does not
    assert not (tmp_path / "index.json").exists()
    with pytest.raises(ConfigError, match="no index there yet"):
        ExactVectorIndex(tmp_path)
    # even with a manifest forged for it, the short file is refused as incomplete
    meta = {"kind": "exact", "format": 1, "generation": 1, "dim": 4, "dtype": "float32"}
    (tmp_path / "index.json").write_text(json.dumps({**meta, "count": 10}))
    with pytest.raises(IndexIncompleteError):
        ExactVectorIndex(tmp_path)
    # the next bulk write starts afresh
    (tmp_path / "index.json").unlink()
    with ExactVectorWriter(tmp_path, 4, 1) as again:
        again.append([7], unit_vectors(1, 4, 1))
    assert ExactVectorIndex(tmp_path).contains([7, 0]).tolist() == [True, False]


def test_bulk_writer_refuses_short_duplicated_or_excess_writes(tmp_path: Path) -> None:
    x = unit_vectors(3, 4, 0)
    short = ExactVectorWriter(tmp_path / "short", 4, 3)
    short.append([0, 1], x[:2])
    with pytest.raises(InputError, match="2 of the announced 3"):
        short.commit()
    assert not any((tmp_path / "short").iterdir())
    twice = ExactVectorWriter(tmp_path / "twice", 4, 3)
    twice.append([1, 0, 1], x)
    with pytest.raises(InputError, match="id 1 was written twice"):
        twice.commit()
    with ExactVectorWriter(tmp_path / "excess", 4, 2) as writer:
        with pytest.raises(InputError, match="exceed the announced 2"):
            writer.append([0, 1, 2], x)
        writer.append([0, 1], x[:2])
    with pytest.raises(StoreError, match="already holds an index"):
        ExactVectorWriter(tmp_path / "excess", 4, 2)


def test_an_exception_aborts_the_bulk_write(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), ExactVectorWriter(tmp_path, 4, 2) as writer:
        writer.append([0], unit_vectors(1, 4, 0))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StoreError, match="aborted"):
        writer.append([1], unit_vectors(1, 4, 0))


def test_read_batches_streams_live_rows_then_unflushed_ones(tmp_path: Path) -> None:
    x = unit_vectors(8, 4, 5)
    with ExactVectorIndex(tmp_path, 4, dtype="float16") as index:
        index.add(np.arange(5), x[:5])
        index.flush()
        index.add([1, 9], x[5:7])  # id 1 replaced: its committed row is dead
        batches = list(index.read_batches(2))
        ids = np.concatenate([b[0] for b in batches])
        vectors = np.concatenate([b[1] for b in batches])
        assert ids.tolist() == [0, 2, 3, 4, 1, 9]
        assert vectors.dtype == np.float32 and max(len(b[0]) for b in batches) <= 2
        np.testing.assert_allclose(vectors, x[[0, 2, 3, 4, 5, 6]], atol=1e-3)


def test_a_segment_an_update_kept_keeps_its_sketch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first search of each generation a served index opens used to sketch the first
    segment again: a generation that keeps that segment's file takes the sketch made
    before; one that rewrote it makes its own. Searches find the same either way."""
    monkeypatch.setattr(vectors_module, "SKETCH_MIN_ROWS", 1)
    monkeypatch.setattr(vectors_module, "SKETCH_ROWS_PER_K", 0)
    monkeypatch.setattr(vectors_module, "_SKETCHES", Recent(vectors_module._SKETCHES.kept))
    vectors = unit_vectors(300, 8, 1)
    with ExactVectorIndex(tmp_path, 8, dtype="int8") as index:
        index.add(np.arange(300), vectors)
    first = ExactVectorIndex(tmp_path)
    first.search(vectors[:2], 5)
    made = first._sketch
    assert made is not None
    with ExactVectorIndex(tmp_path) as update:  # a new segment; the first one kept
        update.add([1000], vectors[:1])
    again = ExactVectorIndex(tmp_path)
    ids, _ = again.search(vectors[:2], 5)
    assert again._sketch is made and len(again._base.parts) == 2
    monkeypatch.setattr(vectors_module, "_SKETCHES", Recent(vectors_module._SKETCHES.kept))
    fresh = ExactVectorIndex(tmp_path)
    assert np.array_equal(fresh.search(vectors[:2], 5)[0], ids)
    assert fresh._sketch is not made
    with ExactVectorIndex(tmp_path) as merge:  # most rows dead: the segments rewritten
        merge.delete(np.arange(250))
    merged = ExactVectorIndex(tmp_path)
    merged.search(vectors[250:252], 5)
    assert merged._sketch is not made and merged._base.parts[0].generation != 1
