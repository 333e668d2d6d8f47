"""The index files mirrored between the workspace and local cache directories, and the
graph snapshot cache stamped with the table version (a real server; marked ``postgres``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quillian.stores.snapshot import NodeKind
from quillian.testing.postgres import PostgresServer

pytest.importorskip("psycopg")
from quillian.stores.postgres import (
    PgGraphStore,
    PgKeyValueStore,
    PgVectorIndex,
    Workspace,
    pull_files,
    push_files,
)

pytestmark = pytest.mark.postgres


def test_files_travel_between_cache_directories(postgres_url: str, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    (one / "tables").mkdir(parents=True)
    (one / "tables" / "a.jsonl").write_text("a\n")
    (one / "bm25.bin").write_bytes(b"\x00\x01")
    (one / "graph").mkdir()
    (one / "graph" / "x.npy").write_bytes(b"local only")
    (one / "server").mkdir()
    (one / "server" / "jobs.sqlite").write_bytes(b"per machine")
    with Workspace(postgres_url) as workspace:
        assert push_files(workspace, one) == 2
        assert push_files(workspace, one) == 0  # nothing changed: nothing sent
        assert pull_files(workspace, two) == 2
        assert (two / "tables" / "a.jsonl").read_text() == "a\n"
        assert not (two / "graph").exists() and not (two / "server").exists()
        (one / "tables" / "a.jsonl").write_text("changed\n")
        (one / "bm25.bin").unlink()
        assert push_files(workspace, one) == 1
        (two / "stray.txt").write_text("not on the server")
        assert pull_files(workspace, two) == 1
        assert (two / "tables" / "a.jsonl").read_text() == "changed\n"
        assert not (two / "bm25.bin").exists() and not (two / "stray.txt").exists()
        assert (one / "server" / "jobs.sqlite").read_bytes() == b"per machine"


def test_snapshot_cache_follows_the_table_version(postgres_url: str, tmp_path: Path) -> None:
    with Workspace(postgres_url) as workspace:
        writer = PgGraphStore(workspace, tmp_path / "writer")
        reader = PgGraphStore(workspace, tmp_path / "reader")
        writer.add_nodes(["a", "b"], NodeKind.ENTITY)
        first = reader.snapshot()
        assert first.n_nodes == 2 and reader.snapshot().n_nodes == 2  # the cached one
        assert len(list((tmp_path / "reader").iterdir())) == 1
        writer.add_nodes(["c"], NodeKind.ENTITY)
        writer.add_edges(["a"], ["c"], 2)
        second = reader.snapshot()
        assert (second.n_nodes, second.n_edges) == (3, 1)
        stamps = [p.name for p in (tmp_path / "reader").iterdir()]
        assert stamps == [f"{workspace.id}-{writer.version()}"]
        assert first.n_nodes == 2  # a snapshot taken earlier stays readable


def test_workspaces_are_isolated(postgres_server: PostgresServer, tmp_path: Path) -> None:
    urls = [postgres_server.url(f"iso_{i}", tmp_path / str(i)) for i in (1, 2)]
    try:
        with PgKeyValueStore(urls[0]) as one, PgKeyValueStore(urls[1]) as two:
            one.put_many("ns", {"k": b"1"})
            two.put_many("ns", {"k": b"2"})
            assert one.get_many("ns", ["k"]) == [b"1"] and two.get_many("ns", ["k"]) == [b"2"]
        with PgVectorIndex(urls[0], "chunks", 4) as vectors:
            vectors.add([1], [[1.0, 0.0, 0.0, 0.0]])
        with PgVectorIndex(urls[1], "chunks", 8) as other:  # its own collection, own dim
            assert len(other) == 0 and other.dim == 8
    finally:
        for i in (1, 2):
            postgres_server.execute(f"DROP SCHEMA IF EXISTS iso_{i} CASCADE")
