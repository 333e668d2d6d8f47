"""An exact vector index flushes what changed: a new segment and a dead list, merged and
compacted by its rules, never rewriting a file another reader may have mapped."""

import json
from pathlib import Path

import numpy as np
import pytest

from quillian.errors import IndexSchemaError
from quillian.stores.embedded import vectors
from quillian.stores.embedded._segments import MAX_SEGMENTS, merge_start
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.stores.protocols import ids_summary
from quillian.stores.recent import Recent
from quillian.testing.contracts import unit_vectors

DIM = 8


def files(directory: Path) -> dict[str, int]:
    """Each data file's inode: a file rewritten or replaced gets another."""
    return {p.name: p.stat().st_ino for p in directory.iterdir() if p.suffix == ".npy"}


def manifest(directory: Path) -> dict:
    return json.loads((directory / "index.json").read_text())


def test_a_small_flush_writes_a_segment_and_keeps_the_others(tmp_path: Path) -> None:
    x = unit_vectors(1010, DIM, 0)
    with ExactVectorIndex(tmp_path, DIM) as index:
        index.add(np.arange(1000), x[:1000])
        index.flush()
        before = files(tmp_path)
        index.add([1000, 1001], x[1000:1002])
        index.delete([5, 6])
        index.flush()
        after = files(tmp_path)
        assert index.segments == 2 and len(index) == 1000
    assert {n: before[n] for n in before} == {n: after[n] for n in before}  # untouched
    assert set(after) - set(before) == {"vectors-000002.npy", "ids-000002.npy", "dead-000002.npy"}
    meta = manifest(tmp_path)
    assert meta["segments"] == [[1, 1000], [2, 2]] and meta["dead"] == 2
    assert set(meta["files"]) == set(after)
    with ExactVectorIndex(tmp_path) as again:
        assert len(again) == 1000 and not again.contains([5, 6]).any()
        np.testing.assert_allclose(again.get([1001, 7]), x[[1001, 7]], atol=1e-6)


def test_trailing_segments_merge_and_many_deletes_compact(tmp_path: Path) -> None:
    x = unit_vectors(1100, DIM, 1)
    with ExactVectorIndex(tmp_path, DIM) as index:
        index.add(np.arange(1000), x[:1000])
        index.flush()
        for i in range(1000, 1008):  # one at a time: a binary counter of segments
            index.add([i], x[i])
            index.flush()
            assert index.segments <= 4
        assert manifest(tmp_path)["segments"][0] == [1, 1000]  # the large one stays
        index.delete(np.arange(300))  # dead rows past a quarter: rewritten as one
        index.flush()
        assert index.segments == 1 and "dead" not in "".join(files(tmp_path))
        assert len(index) == 708
        truth = np.arange(300, 1008)[np.argsort(-(x[300:1008] @ x[500]))[:5]]
        np.testing.assert_array_equal(index.search(x[500], 5)[0][0], truth)


def test_merge_start_follows_its_rules() -> None:
    assert merge_start([1000, 1], 0, 1001) == 1  # the new segment alone
    assert merge_start([1000, 1, 1], 0, 1002) == 1  # two small ones merge
    assert merge_start([1000, 400, 700], 0, 2100) == 0  # the tail outgrows the rest
    assert merge_start([1000, 10], 400, 1410) == 0  # a quarter dead: compaction
    many = [2**i for i in range(MAX_SEGMENTS + 1, 0, -1)] + [1]
    assert merge_start(many, 0, sum(many)) == 0


def test_an_open_reader_keeps_its_generation_through_merges(tmp_path: Path) -> None:
    x = unit_vectors(600, DIM, 2)
    with ExactVectorIndex(tmp_path, DIM) as writer:
        writer.add(np.arange(300), x[:300])
    reader = ExactVectorIndex(tmp_path)
    before = reader.search(x[:3], 4)
    with ExactVectorIndex(tmp_path) as writer:
        writer.delete(np.arange(100))
        writer.add(np.arange(300, 600), x[300:])
        writer.flush()  # compacted: the reader's files are gone from the directory
        assert writer.segments == 1 and "vectors-000001.npy" not in files(tmp_path)
    for got, want in zip(reader.search(x[:3], 4), before, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(reader.get([0, 299]), x[[0, 299]], atol=1e-6)
    reader.close()


def test_a_format_1_index_opens_and_its_next_flush_converts_it(tmp_path: Path) -> None:
    x = unit_vectors(20, DIM, 3)
    with ExactVectorIndex(tmp_path, DIM) as index:
        index.add(np.arange(20), x)
    meta = manifest(tmp_path)  # as the format-1 writer left it: no segments, no dead
    for key in ("segments", "dead"):
        del meta[key]
    (tmp_path / "index.json").write_text(json.dumps({**meta, "format": 1}))
    with ExactVectorIndex(tmp_path) as old:
        assert len(old) == 20 and old.search(x[4], 1)[0][0, 0] == 4
        old.delete([4])
    meta = manifest(tmp_path)
    assert meta["format"] == 2 and meta["dead"] == 1 and len(ExactVectorIndex(tmp_path)) == 19
    (tmp_path / "index.json").write_text(json.dumps({**meta, "format": 3}))
    with pytest.raises(IndexSchemaError, match="format 3, this Quillian reads format 1 or 2"):
        ExactVectorIndex(tmp_path)


def test_a_lookup_kept_for_a_generation_is_the_one_made_from_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random adds (new ids and replaced ones), deletes and flushes, each flush's
    generation opened again: the row lookup kept for it (a copy, changed apart) finds
    every id where one made from the generation's files does, and the index summed up
    sums its ids."""
    rng = np.random.default_rng(3)
    x = unit_vectors(400, DIM, 2)
    pool = np.arange(400)
    index = ExactVectorIndex(tmp_path, DIM)
    try:
        for step in range(30):
            chosen = np.unique(rng.choice(pool, size=int(rng.integers(1, 60))))
            if rng.random() < 0.65:
                index.add(chosen, x[chosen])
            else:
                index.delete(chosen)
            index.flush()
            kept = vectors._recalled(tmp_path, manifest(tmp_path))
            assert kept is not None, step
            monkeypatch.setattr(vectors, "_LOOKUPS", Recent(vectors._LOOKUPS.kept))
            with ExactVectorIndex(tmp_path) as made:  # from the files: nothing kept
                assert np.array_equal(kept.rows_of(pool), made._lookup.rows_of(pool)), step
                assert made.ids_summary() == ids_summary(made.ids())
            with ExactVectorIndex(tmp_path) as again:  # the one just made, kept
                assert again._lookup is not made._lookup
                live = again.ids()
                np.testing.assert_allclose(again.get(live), x[live], atol=1e-6)
    finally:
        index.close()
