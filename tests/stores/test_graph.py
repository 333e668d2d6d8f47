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
