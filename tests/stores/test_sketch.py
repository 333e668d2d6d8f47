"""The int8 sketch of the exact vector index: its candidates always hold the exact top k,
and a sketched search returns what a full scan returns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quillian.stores.embedded import vectors as vectors_module
from quillian.stores.embedded._codec import Codec
from quillian.stores.embedded.sketch import Int8Sketch
from quillian.stores.embedded.vectors import ExactVectorIndex


def exact_top(matrix: np.ndarray, query: np.ndarray, k: int, dead: np.ndarray | None = None):
    scores = matrix.astype(np.float64) @ query.astype(np.float64)
    if dead is not None:
        scores[dead] = -np.inf
    return set(np.argsort(-scores, kind="stable")[:k].tolist()), scores


def hard_matrix(rng: np.random.Generator) -> np.ndarray:
    """Rows made to trip a loose bound: near-duplicates (one part in 10^7 apart), norms
    from 10^-3 to 10^3, zero rows, and one large coordinate among small ones."""
    base = rng.standard_normal((300, 32)).astype(np.float32)
    twins = base[:100] + rng.standard_normal((100, 32)).astype(np.float32) * 1e-7
    scaled = base[100:200] * np.logspace(-3, 3, 100, dtype=np.float32)[:, None]
    spiky = rng.standard_normal((50, 32)).astype(np.float32) * 1e-3
    spiky[:, 0] = 5.0
    return np.concatenate([base, twins, scaled, spiky, np.zeros((5, 32), np.float32)])


@pytest.mark.parametrize("k", [1, 2, 5, 17, 60])
def test_candidates_hold_the_exact_top_k(k: int) -> None:
    rng = np.random.default_rng(k)
    matrix = hard_matrix(rng)
    sketch = Int8Sketch.of(matrix)
    for _ in range(20):
        query = rng.standard_normal(32).astype(np.float32) * rng.choice([1e-2, 1.0, 1e2])
        rows = sketch.candidates(query, k)
        top, scores = exact_top(matrix, query, k)
        assert top <= set(rows.tolist())
        assert np.all(np.diff(rows) > 0)  # ascending, no repeats
        # every candidate may still reach the k-th best: none is far below it
        kth = np.sort(scores)[-k]
        assert scores[rows].min() >= kth - 2 * sketch.radius.max() * np.linalg.norm(query)


def test_candidates_skip_dead_rows_and_take_every_live_row_when_too_few() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((40, 8)).astype(np.float32)
    dead = np.ones(40, dtype=bool)
    dead[[3, 9, 30]] = False
    query = rng.standard_normal(8).astype(np.float32)
    assert Int8Sketch.of(matrix).candidates(query, 5, dead).tolist() == [3, 9, 30]
    dead[:] = False
    dead[np.argmax(matrix @ query)] = True  # the best row is dead: it never comes back
    rows = Int8Sketch.of(matrix).candidates(query, 1, dead)
    assert int(np.argmax(matrix @ query)) not in rows.tolist()
    assert exact_top(matrix, query, 1, dead)[0] <= set(rows.tolist())


def test_the_radius_bounds_each_row_reconstruction() -> None:
    rng = np.random.default_rng(1)
    matrix = hard_matrix(rng)
    sketch = Int8Sketch.of(matrix)
    rebuilt = sketch.codes.astype(np.float64) * sketch.scales[:, None]
    error = np.linalg.norm(matrix.astype(np.float64) - rebuilt, axis=1)
    assert np.all(error <= sketch.radius)
    assert sketch.codes.dtype == np.int8 and np.abs(sketch.codes).max() <= 127
    assert sketch.nbytes < matrix.nbytes  # 32 dims: codes 32 bytes against 128, plus 12


@pytest.mark.parametrize("k", [1, 5, 60])
def test_stored_int8_rows_are_sketched_over_their_own_codes(k: int) -> None:
    """An int8 index's sketch is its stored codes and scales, not quantised again: the
    candidates hold the exact top k of the rows as they read back, hard rows included."""
    rng = np.random.default_rng(10 + k)
    codec = Codec("int8", 32)
    stored = codec.encode(hard_matrix(rng))
    back = codec.decode(stored)
    sketch = codec.sketch(stored)
    np.testing.assert_array_equal(sketch.codes, stored[:, 4:])
    assert sketch.codes.flags.c_contiguous  # scanned in SIMD lanes
    np.testing.assert_array_equal(sketch.scales, codec.scales(stored))
    for _ in range(20):
        query = rng.standard_normal(32).astype(np.float32) * rng.choice([1e-2, 1.0, 1e2])
        rows = sketch.candidates(query, k)
        top, scores = exact_top(back, query, k)
        assert top <= set(rows.tolist())
        approx = (sketch.codes.astype(np.float64) @ query) * sketch.scales
        assert np.all(np.abs(approx - scores) <= sketch.radius * np.linalg.norm(query) + 1e-9)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_a_sketched_search_returns_what_a_full_scan_returns(tmp_path: Path, dtype: str) -> None:
    rng = np.random.default_rng(2)
    n, dim = 5000, 24
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with ExactVectorIndex(tmp_path / "v", dim, dtype=dtype) as index:
        index.add(np.arange(n), vectors)
    sketched = ExactVectorIndex(tmp_path / "v")
    plain = ExactVectorIndex(tmp_path / "v", sketch=False)
    extra = rng.standard_normal((50, dim)).astype(np.float32)
    for index in (sketched, plain):  # replaced rows (dead in the base) and unflushed ones
        index.add(np.arange(0, 600, 3), vectors[np.arange(0, 600, 3)] * -1.0)
        index.add(np.arange(n, n + 50), extra)
    queries = rng.standard_normal((vectors_module.SKETCH_QUERIES, dim)).astype(np.float32)
    for k in (1, 8, 50):
        ids, scores = sketched.search(queries, k)
        expected_ids, expected_scores = plain.search(queries, k)
        np.testing.assert_array_equal(ids, expected_ids)
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-6)  # float32 rounding
    assert sketched._sketch is not None and len(sketched._sketch) == n
    assert plain._sketch is None


def test_the_sketch_follows_the_first_segment(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n, dim = vectors_module.SKETCH_MIN_ROWS, 16
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    with ExactVectorIndex(tmp_path / "v", dim) as index:
        index.add(np.arange(n), vectors)
    index = ExactVectorIndex(tmp_path / "v")
    query = vectors[7]
    assert index.search(query, 1)[0][0, 0] == 7
    first = index._sketch
    index.add([7], [-query])  # row 7 now points away
    index.flush()
    assert index._sketch is first  # a new segment: the first one, and its sketch, stay
    assert index.search(query, 1)[0][0, 0] != 7
    index.add(np.arange(n, 2 * n), vectors)  # as many rows again: merged into one
    index.flush()
    assert index.segments == 1 and index._sketch is None  # sketched again on next search
    assert index.search(query, 1)[0][0, 0] == n + 7  # the copy of row 7 as it was
    assert index._sketch is not None and index._sketch is not first


def test_many_queries_or_a_large_k_scan_the_floats(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    n, dim = vectors_module.SKETCH_MIN_ROWS, 8
    with ExactVectorIndex(tmp_path / "v", dim) as index:
        index.add(np.arange(n), rng.standard_normal((n, dim)).astype(np.float32))
        index.search(rng.standard_normal(dim).astype(np.float32), 5)
        assert index._sketch is None  # only committed rows are sketched
        index.flush()
        many = rng.standard_normal((vectors_module.SKETCH_QUERIES + 1, dim)).astype(np.float32)
        index.search(many, 5)
        index.search(many[0], n // vectors_module.SKETCH_ROWS_PER_K + 1)
        assert index._sketch is None
        index.search(many[0], 5)
        assert index._sketch is not None


def test_a_query_whose_scores_could_overflow_keeps_every_live_row() -> None:
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((30, 4)).astype(np.float32) * 1e18
    sketch = Int8Sketch.of(matrix)
    query = np.full(4, 1e18, np.float32)
    assert sketch.candidates(query, 3).tolist() == list(range(30))
    dead = np.zeros(30, dtype=bool)
    dead[::2] = True
    assert sketch.candidates(query, 3, dead).tolist() == list(range(1, 30, 2))
    assert len(sketch.candidates(query / 1e18, 3)) < 30  # a usual query is shortlisted
