"""The graph's positions carried by a patch: the row splice they are merged with."""

from __future__ import annotations

import random

import numpy as np
import pytest

from quillian.index import graph_positions


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("splices", [512, 0])  # runs copied, or numpy's two passes
def test_a_splice_deletes_and_inserts_rows_as_numpy_does(
    monkeypatch: pytest.MonkeyPatch, seed: int, splices: int
) -> None:
    """Rows gone and rows put in before kept rows (or at the end), several before one
    row: what deleting then inserting gives, byte strings widened, not cut."""
    monkeypatch.setattr(graph_positions, "_SPLICES", splices)
    rng = random.Random(seed)
    n = rng.randrange(0, 30)
    old = np.arange(n * 3, dtype=np.int64).reshape(n, 3)
    gone = np.array(sorted(rng.sample(range(n), rng.randrange(0, n + 1))), np.intp)
    kept = np.setdiff1d(np.arange(n), gone)
    at = sorted(rng.choice([*kept.tolist(), n]) for _ in range(rng.randrange(0, 6)))
    before = np.array(at, np.intp)
    new = -np.arange(1, 3 * len(at) + 1, dtype=np.int64).reshape(len(at), 3)
    want = np.insert(np.delete(old, gone, axis=0), np.searchsorted(kept, before), new, axis=0)
    got = graph_positions._spliced(old, gone, before, new)
    np.testing.assert_array_equal(got, want)
    ids = np.array([b"ent-%d" % i for i in range(n)])
    wider = np.array([b"description-%d" % i for i in range(len(at))], dtype=np.bytes_)
    spliced = graph_positions._spliced(ids, gone, before, wider)
    assert (
        spliced.tolist()
        == np.insert(
            np.delete(ids, gone).astype(spliced.dtype), np.searchsorted(kept, before), wider
        ).tolist()
    )
    assert set(wider.tolist()) <= set(spliced.tolist())


@pytest.mark.parametrize("seed", range(6))
def test_chunk_positions_scanned_or_sorted_give_each_keys_position(seed: int) -> None:
    """A chunk key's position among the build's chunks (-1: none), in runs of equal
    keys: a few keys found by scans, many by the sorted keys, the same answers."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    rows = rng.choice(1 << 62, size=n, replace=False).astype(np.int64)
    where = {int(r): i for i, r in enumerate(rows.tolist())}
    for asked in (2, n.bit_length() + 3):  # under the scans' bound, then over it
        keys = np.concatenate([rng.choice(rows, size=asked), [-7, 1 << 62]]).astype(np.int64)
        runs = np.repeat(keys, rng.integers(1, 4, size=len(keys)))
        got = graph_positions._ChunkPositions(rows)(runs)
        assert got.tolist() == [where.get(int(k), -1) for k in runs.tolist()]
    empty = graph_positions._ChunkPositions(np.zeros(0, np.int64))
    assert empty(np.array([3, 3], np.int64)).tolist() == [-1, -1]
    assert empty(np.zeros(0, np.int64)).tolist() == []


@pytest.mark.parametrize("seed", range(12))
def test_rows_merged_by_chunk_and_number_as_a_sort_orders_them(seed: int) -> None:
    """Kept rows (in chunk and number order) and written rows merged: each in the
    place a stable sort of every row by (chunk, number) gives it, a written row before
    a kept row of the same chunk and number, and each old row's new position."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    chunk = np.sort(rng.integers(0, 8, size=n))
    number = np.zeros(n, np.int64)
    for c in np.unique(chunk):  # numbers rising within each chunk, some equal
        at = np.flatnonzero(chunk == c)
        number[at] = np.sort(rng.integers(0, 6, size=len(at)))
    old = np.stack([np.arange(n), number, chunk], axis=1).astype(np.int64)
    keep = rng.random(n) < 0.7
    k = int(rng.integers(0, 6))
    new_chunk = rng.integers(0, 9, size=k)
    new = np.stack([1000 + np.arange(k), rng.integers(0, 6, size=k), new_chunk], axis=1)
    merged = graph_positions._merged(old, chunk, keep, new.astype(np.int64), new_chunk, 1)
    assert merged is not None
    rows = [(int(c), int(s), 0, int(i)) for i, s, c in old[keep]]
    rows += [(int(c), int(s), -1, int(i)) for i, s, c in new]  # written first on a tie
    want = [i for *_, i in sorted(rows, key=lambda r: r[:3])]
    assert merged.rows[:, 0].tolist() == want
    where = {i: p for p, i in enumerate(want)}
    assert merged.moved.tolist() == [where[i] if keep[i] else -1 for i in range(n)]
    assert merged.chunk.tolist() == [int(c) for c, *_ in sorted(rows, key=lambda r: r[:3])]
    assert sorted(merged.added.tolist()) == sorted(where[int(i)] for i in new[:, 0])
