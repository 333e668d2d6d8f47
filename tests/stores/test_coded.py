"""A snapshot's coded edge columns read as the arrays they code, edge by edge or whole."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from quillian.errors import IndexDamagedError
from quillian.stores.coded import (
    CodedColumn,
    coded_relations,
    coded_weights,
    relation_bits,
    weight_codes,
)
from quillian.stores.mapped import is_mapped
from quillian.stores.snapshot import GraphSnapshot


def _relations(n: int, share: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < share, rng.integers(0, 2**31 - 1, n), -1).astype(np.int32)


def _keys(n: int) -> list[object]:
    rng = np.random.default_rng(n)
    picks = rng.integers(-n, n, 40)
    return [
        0,
        n - 1,
        -1,
        -n,
        slice(None),
        slice(3, None, 7),
        slice(None, None, -1),
        slice(n, n + 5),
        picks,
        picks.astype(np.uint32) % n,
        picks.reshape(5, 8),
        rng.random(n) < 0.5,
        [],
        np.array([], np.int64),
    ]


@pytest.mark.parametrize(("n", "share"), [(130, 0.85), (63, 0.3), (64, 0.0), (1000, 0.4)])
def test_coded_relations_read_as_the_array_at_any_positions(n: int, share: float) -> None:
    relations = _relations(n, share, n)
    coded = relation_bits(relations)
    assert coded is not None
    column = coded_relations(*coded, n)
    assert len(column) == n and column.shape == (n,) and column.dtype == np.int32
    for key in _keys(n):
        got, want = column[key], relations[key]
        assert np.shape(got) == np.shape(want) and np.array_equal(got, want), key
    assert column._decoded is None  # every read above took only its edges
    assert np.array_equal(np.asarray(column), relations)
    assert column.tolist() == relations.tolist() and (column >= 0).sum() == (relations >= 0).sum()
    assert type(column[0]) is type(relations[0])


def test_relations_on_most_edges_are_kept_as_they_are() -> None:
    assert relation_bits(_relations(1000, 0.99, 1)) is None
    assert relation_bits(np.zeros(0, np.int32)) is None


def test_coded_weights_read_back_every_bit() -> None:
    rng = np.random.default_rng(5)
    values = np.array([0.5, 1.0, -0.0, 0.0, np.float32(1e-30)], np.float32)
    weights = rng.choice(values, 777)
    coded = weight_codes(weights)
    assert coded is not None and coded[0].dtype == np.uint8 and len(coded[1]) == 5
    column = coded_weights(*coded)
    for key in _keys(777):
        got = np.asarray(column[key], np.float32)
        assert np.array_equal(got.view(np.uint32), np.asarray(weights[key]).view(np.uint32)), key
    assert weight_codes(np.arange(17, dtype=np.float32)) is None  # more than MAX_WEIGHTS


def test_a_column_refuses_what_an_array_refuses() -> None:
    relations = _relations(100, 0.4, 2)
    column = coded_relations(*relation_bits(relations), 100)  # type: ignore[misc]
    for key in (100, -101, [5, 100], np.array([0.5]), np.ones(99, bool)):
        with pytest.raises(IndexError):
            column[key]
    words, values = relation_bits(relations)  # type: ignore[misc]
    with pytest.raises(ValueError, match="relation bits set"):
        coded_relations(words, values[1:], 100)
    with pytest.raises(ValueError, match="words of relation bits"):
        coded_relations(words, values, 200)


def test_a_loaded_snapshot_reads_its_coded_columns_from_the_files(tmp_path: Path) -> None:
    """Loading decodes nothing: the codes stay memory-mapped, and a node's neighbours
    read only its edges."""
    rng = np.random.default_rng(9)
    n, m = 300, 5000
    ids = [f"ent-{i:016x}" for i in range(n)]
    weights = rng.choice(np.array([0.5, 1.0], np.float32), m)
    relations = _relations(m, 0.4, 9)
    graph = GraphSnapshot.from_edges(
        ids, [0] * n, rng.integers(0, n, m), rng.integers(0, n, m), 2, weights, relations
    )
    graph.save(tmp_path / "g")
    loaded = GraphSnapshot.load(tmp_path / "g")
    assert isinstance(loaded.weights, CodedColumn) and isinstance(
        loaded.edge_relations, CodedColumn
    )
    for node in range(n):
        got, want = loaded.neighbors(node), graph.neighbors(node)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert loaded.weights._decoded is None and loaded.edge_relations._decoded is None
    assert is_mapped(np.asarray(loaded.indices))
    assert np.array_equal(np.asarray(loaded.edge_relations), graph.edge_relations)
    assert np.array_equal(np.asarray(loaded.weights), graph.weights)
    mask = tmp_path / "g" / "relation_mask.npy"
    np.save(mask, np.load(mask)[:-1])
    with pytest.raises(IndexDamagedError, match=re.escape(f"{mask} is damaged")):
        GraphSnapshot.load(tmp_path / "g", verify=False)
