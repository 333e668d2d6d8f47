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
