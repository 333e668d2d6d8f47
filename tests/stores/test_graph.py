"""CSR graph store: the contract plus crash safety and memory-mapping."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from quillian.errors import IndexIncompleteError, StoreError
from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.mapped import is_mapped
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, NodeKind
from quillian.testing.contracts import (
    GraphStoreContract,
    add_five_node_graph,
    assert_five_node_graph,
)


class TestCSRGraphStore(GraphStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[CSRGraphStore]:
        with CSRGraphStore(tmp_path / "graph") as store:
            yield store

    def reopen(self, store: CSRGraphStore) -> CSRGraphStore:  # type: ignore[override]
        store.close()
        return CSRGraphStore(store.directory)


def test_snapshot_is_memory_mapped_and_loadable_directly(tmp_path: Path) -> None:
    with CSRGraphStore(tmp_path) as store:
        add_five_node_graph(store)
        snap = store.snapshot()
    assert is_mapped(snap.indices) and not isinstance(snap.indices, np.memmap)
    assert_five_node_graph(GraphSnapshot.load(tmp_path))


def test_an_earlier_snapshot_survives_a_new_one(tmp_path: Path) -> None:
    with CSRGraphStore(tmp_path) as store:
        add_five_node_graph(store)
        first = store.snapshot()
        store.add_nodes(["f"], NodeKind.ENTITY)
        store.add_edges(["f"], ["a"], EdgeKind.RELATED_TO)
        second = store.snapshot()
    assert_five_node_graph(first)
    assert (second.n_nodes, second.n_edges) == (6, 8)


def test_an_interrupted_move_is_finished_on_open(tmp_path: Path) -> None:
    with CSRGraphStore(tmp_path) as store:
        add_five_node_graph(store)
    staged = tmp_path / ".staging"
    GraphSnapshot.load(tmp_path, mmap=False).save(staged)
    (tmp_path / "snapshot.json").unlink()  # the crash came after the marker was removed
    (tmp_path / "indices.npy").unlink()
    with CSRGraphStore(tmp_path) as store:
        assert_five_node_graph(store.snapshot())
    assert not staged.exists()


def test_an_incomplete_staging_copy_is_discarded(tmp_path: Path) -> None:
    with CSRGraphStore(tmp_path) as store:
        add_five_node_graph(store)
    (tmp_path / ".staging").mkdir()
    shutil.copy(tmp_path / "indices.npy", tmp_path / ".staging" / "indices.npy")
    with CSRGraphStore(tmp_path) as store:
        assert_five_node_graph(store.snapshot())
    assert not (tmp_path / ".staging").exists()


def test_arrays_without_marker_are_reported(tmp_path: Path) -> None:
    with CSRGraphStore(tmp_path) as store:
        add_five_node_graph(store)
    (tmp_path / "snapshot.json").unlink()
    with pytest.raises(IndexIncompleteError, match=r"snapshot\.json"):
        CSRGraphStore(tmp_path)


def test_a_file_is_not_a_graph_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        CSRGraphStore(tmp_path / "file")


def test_an_empty_store_takes_a_snapshot_whole(tmp_path: Path) -> None:
    """What ``write_snapshot`` writes reads back equal, as the store's and on its own;
    a store already holding nodes refuses it."""
    snapshot = GraphSnapshot.from_edges(
        ["a", "b", "c"],
        [NodeKind.ENTITY, NodeKind.ENTITY, NodeKind.CHUNK],
        [2, 0, 1],
        [0, 1, 0],
        [EdgeKind.DESCRIBES, EdgeKind.RELATED_TO, EdgeKind.RELATED_TO],
        [0.5, 1.0, 1.0],
        [-1, 0, 0],
    )
    with CSRGraphStore(tmp_path / "g") as store:
        written = store.write_snapshot(snapshot)
        assert store.snapshot() is written
    for got in (written, GraphSnapshot.load(tmp_path / "g")):
        assert got.ids.ids_of(range(3)) == ["a", "b", "c"]
        for name in ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations"):
            np.testing.assert_array_equal(getattr(got, name), getattr(snapshot, name))
    with CSRGraphStore(tmp_path / "g") as store, pytest.raises(StoreError, match="empty"):
        store.write_snapshot(snapshot)
    with CSRGraphStore(tmp_path / "h") as store:
        store.add_nodes(["x"], NodeKind.ENTITY)
        with pytest.raises(StoreError, match="empty"):
            store.write_snapshot(snapshot)
