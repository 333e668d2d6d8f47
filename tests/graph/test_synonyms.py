"""Synonym links from name vectors, worked out by hand."""

import math

import numpy as np
import pytest

from quillian.components.graph.synonyms import nearest_pairs, synonym_edges


def at(deg: float) -> list[float]:
    """A unit vector in the plane at ``deg`` degrees: cosines are cos(angle between)."""
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


# rows 0, 1, 2 at 0, 10 and 30 degrees: cos 0-1 0.985, 1-2 0.940, 0-2 0.866; row 3 at
# 90 degrees is near none (cos 0.5 to row 2, 0.17 to row 1, 0 to row 0)
VECTORS = np.array([at(0), at(10), at(30), at(90)], dtype=np.float32)


def test_each_row_keeps_its_k_nearest_above_the_threshold():
    src, dst, sim = nearest_pairs(VECTORS, threshold=0.9, k=2)
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert np.allclose(sim, [0.985, 0.985, 0.940, 0.940], atol=1e-3)
    src, dst, _ = nearest_pairs(VECTORS, threshold=0.8, k=1)
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == [(0, 1), (1, 0), (2, 1)]
    src, _, _ = nearest_pairs(VECTORS, threshold=0.8, k=5)  # k beyond the rows is fine
    assert src.tolist() == [0, 0, 1, 1, 2, 2]


def test_groups_keep_rows_apart():
    src, dst, _ = nearest_pairs(VECTORS, threshold=0.8, k=1, groups=["a", "b", "a", "b"])
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == [(0, 2), (2, 0)]
    with pytest.raises(ValueError, match="3 group labels for 4 vectors"):
        nearest_pairs(VECTORS, groups=["a", "b", "a"])
    with pytest.raises(ValueError, match="k must be greater than 0"):
        nearest_pairs(VECTORS, k=0)
    assert all(len(x) == 0 for x in nearest_pairs(VECTORS[:1]))


def test_synonym_edges_are_undirected_and_each_pair_once():
    src, dst, w = synonym_edges(VECTORS, threshold=0.8, k=2)
    # pairs 0-1, 0-2 and 1-2 (found from both ends), each stored both ways
    weights = [round(x, 3) for x in w.tolist()]
    edges = sorted(zip(src.tolist(), dst.tolist(), weights, strict=True))
    assert edges == [
        (0, 1, 0.985),
        (0, 2, 0.866),
        (1, 0, 0.985),
        (1, 2, 0.94),
        (2, 0, 0.866),
        (2, 1, 0.94),
    ]
