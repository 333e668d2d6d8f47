"""A graph written whole to a PostgreSQL workspace is kept as its snapshot's arrays
(``graph_arrays``), read back equal by another process with its own cache, checked on
the way, and written in one transaction: readers keep the previous graph until it
commits; a workspace keeping its graph in the node and edge tables is still read (a
real server; marked ``postgres``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quillian.errors import IndexDamagedError, InputError
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, NodeKind
from quillian.testing.contracts import add_five_node_graph, assert_five_node_graph

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgGraphStore, Workspace
from quillian.stores.postgres import graph as pg_graph

pytestmark = pytest.mark.postgres


def chain(n: int) -> GraphSnapshot:
    """Entities ``e0 .. e{n-1}``, each related to the next."""
    return GraphSnapshot.from_edges(
        [f"e{i}" for i in range(n)],
        np.full(n, NodeKind.ENTITY),
        np.arange(n - 1),
        np.arange(1, n),
        np.full(n - 1, EdgeKind.RELATED_TO),
        np.linspace(0.5, 1.5, n - 1),
        np.arange(n - 1),
    )


def same(a: GraphSnapshot, b: GraphSnapshot) -> bool:
    arrays = ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations")
    return a.ids.ids_of(range(a.n_nodes)) == b.ids.ids_of(range(b.n_nodes)) and all(
        np.array_equal(getattr(a, name), getattr(b, name)) for name in arrays
    )


def rows(workspace: Workspace, table: str) -> int:
    with workspace.connection(f"count {table}") as conn:
        (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(count)


def test_a_graph_taken_whole_is_kept_as_arrays_in_parts(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_graph, "_PART", 64)  # bytes: every array in several parts
    graph = chain(50)
    with Workspace(postgres_url) as workspace:
        with PgGraphStore(workspace, tmp_path / "writer", fresh=True) as store:
            assert same(store.write_snapshot(graph), graph)
        assert rows(workspace, "graph_nodes") == 0  # no row per node or edge
        assert rows(workspace, "graph_arrays") > len(list((tmp_path / "writer").rglob("*")))
        with PgGraphStore(workspace, tmp_path / "reader") as reader:
            assert same(reader.snapshot(), graph)


def test_arrays_damaged_in_the_workspace_are_named_not_served(
    postgres_url: str, tmp_path: Path
) -> None:
    with Workspace(postgres_url) as workspace:
        with PgGraphStore(workspace, tmp_path / "writer", fresh=True) as store:
            store.write_snapshot(chain(20))
        with workspace.connection("damage an array") as conn:
            conn.execute(
                "UPDATE graph_arrays SET data = overlay(data PLACING '\\xff'::bytea"
                " FROM length(data)) WHERE name = 'weights.npy'"
            )
        with (
            PgGraphStore(workspace, tmp_path / "reader") as reader,
            pytest.raises(IndexDamagedError, match="weights"),
        ):
            reader.snapshot()


def test_a_fresh_store_changes_nothing_until_its_first_write_commits(
    postgres_url: str, tmp_path: Path
) -> None:
    """A build's store (fresh) empties the graph in the transaction of its first write:
    a reader meanwhile reads the previous graph, and a rejected first batch leaves it."""
    with Workspace(postgres_url) as workspace:
        with PgGraphStore(workspace, tmp_path / "first", fresh=True) as store:
            store.write_snapshot(chain(5))
        reader = PgGraphStore(workspace, tmp_path / "reader")
        build = PgGraphStore(workspace, tmp_path / "build", fresh=True)
        assert same(reader.snapshot(), chain(5))
        with pytest.raises(InputError, match="unknown node"):  # e0 is not in a fresh graph
            build.add_edges(["e0"], ["ghost"], EdgeKind.RELATED_TO)
        assert same(reader.snapshot(), chain(5))
        build.write_snapshot(chain(8))
        assert same(reader.snapshot(), chain(8))
        build.close()
        assert same(reader.snapshot(), chain(8))  # closing wrote nothing more
        reader.close()


def test_a_graph_kept_in_tables_is_read_then_replaced(postgres_url: str, tmp_path: Path) -> None:
    """A workspace made before ``graph_arrays`` keeps its graph in the node and edge
    tables: it is read from them, and the next build writes it as arrays."""
    with Workspace(postgres_url) as workspace:
        with workspace.connection("drop the arrays' table") as conn:
            conn.execute("DROP TABLE graph_arrays")
        with PgGraphStore(workspace, tmp_path / "old") as store:
            add_five_node_graph(store)
        with PgGraphStore(workspace, tmp_path / "reader") as reader:
            assert_five_node_graph(reader.snapshot())
            with PgGraphStore(workspace, tmp_path / "build", fresh=True) as build:
                build.write_snapshot(chain(3))
            assert same(reader.snapshot(), chain(3))
        assert rows(workspace, "graph_nodes") == 0
