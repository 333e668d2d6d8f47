"""Index files larger than a block travel between the workspace and the caches by
blocks: a push sends the blocks the server lacks, a pull fetches only the blocks its
copy lacks, blocks no file lists are dropped, a damaged block is named, and a workspace
keeping its files whole is still read (a real server; marked ``postgres``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from quillian.errors import StoreError

pytest.importorskip("psycopg")
from quillian.stores.postgres import Workspace, pull_files, push_files
from quillian.stores.postgres import files as pg_files

pytestmark = pytest.mark.postgres

BLOCK = 64  # bytes, so that small files span many blocks


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_files, "BLOCK", BLOCK)


def blocks_on_server(workspace: Workspace) -> set[str]:
    with workspace.connection("list the blocks") as conn:
        return {row[0] for row in conn.execute("SELECT sha256 FROM file_blocks")}


def test_a_pull_fetches_only_the_blocks_its_copy_lacks(postgres_url: str, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    (one / "tables").mkdir(parents=True)
    data = bytearray(os.urandom(BLOCK * 10 + 5))  # ten blocks and a short last one
    (one / "tables" / "graph.sqlite").write_bytes(bytes(data))
    with Workspace(postgres_url) as workspace:
        assert push_files(workspace, one) == 1
        assert len(blocks_on_server(workspace)) == 11
        assert pull_files(workspace, two) == 1
        data[BLOCK * 4 + 3] ^= 0xFF  # one page patched in place
        (one / "tables" / "graph.sqlite").write_bytes(bytes(data))
        before = blocks_on_server(workspace)
        assert push_files(workspace, one) == 1
        after = blocks_on_server(workspace)
        assert len(after - before) == 1 and len(before - after) == 1  # sent one, dropped one
        with workspace.connection("drop the blocks every copy has") as conn:
            conn.execute("DELETE FROM file_blocks WHERE sha256 <> ALL(%s)", (list(after - before),))
        assert pull_files(workspace, two) == 1  # the other ten taken from its own copy
        assert (two / "tables" / "graph.sqlite").read_bytes() == bytes(data)
        with pytest.raises(StoreError, match="not on the server"):
            pull_files(workspace, tmp_path / "three")  # a copy of nothing lacks them all


def test_repeated_and_short_files_travel_whole(postgres_url: str, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    zeros = bytes(BLOCK * 600) + b"end"  # one block 600 times (more than a fetch batch)
    (one / "zeros.npy").write_bytes(zeros)
    (one / "small.json").write_bytes(b"{}")
    with Workspace(postgres_url) as workspace:
        assert push_files(workspace, one) == 2
        assert len(blocks_on_server(workspace)) == 2
        assert pull_files(workspace, two) == 2
        assert (two / "zeros.npy").read_bytes() == zeros
        assert (two / "small.json").read_bytes() == b"{}"
        (one / "zeros.npy").unlink()
        assert push_files(workspace, one) == 0
        assert blocks_on_server(workspace) == set()  # no file lists them


def test_a_damaged_block_is_named_and_the_copy_kept(postgres_url: str, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    (one / "a.npy").write_bytes(os.urandom(BLOCK * 3))
    with Workspace(postgres_url) as workspace:
        push_files(workspace, one)
        pull_files(workspace, two)
        kept = (two / "a.npy").read_bytes()
        (one / "a.npy").write_bytes(os.urandom(BLOCK * 3))
        push_files(workspace, one)
        with workspace.connection("damage the blocks") as conn:
            conn.execute("UPDATE file_blocks SET data = overlay(data PLACING '\\x00' FROM 1)")
        with pytest.raises(StoreError, match=r"a\.npy: the copy read from the server is damaged"):
            pull_files(workspace, two)
        assert (two / "a.npy").read_bytes() == kept
        assert [p.name for p in two.iterdir() if p.name.endswith(".part")] == []


def test_files_kept_whole_are_read_and_then_sent_by_blocks(
    postgres_url: str, tmp_path: Path
) -> None:
    """A workspace made before the blocks keeps each file whole in its row: it is read
    as it is, and its next push adds the blocks and sends changed files by them."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    payload = os.urandom(BLOCK * 4)
    with Workspace(postgres_url) as workspace:
        with workspace.connection("make the layout before the blocks") as conn:
            conn.execute("DROP TABLE file_blocks")
            conn.execute("ALTER TABLE files DROP COLUMN blocks")
            conn.execute(
                "INSERT INTO files (path, sha256, data) VALUES ('a.npy', %s, %s)",
                (pg_files.hashlib.sha256(payload).hexdigest(), payload),
            )
        assert pull_files(workspace, two) == 1
        assert (two / "a.npy").read_bytes() == payload
        (one / "a.npy").write_bytes(payload[::-1])
        assert push_files(workspace, one) == 1
        assert len(blocks_on_server(workspace)) == 4
        assert pull_files(workspace, two) == 1
        assert (two / "a.npy").read_bytes() == payload[::-1]


def test_a_cached_copy_damaged_under_its_record_is_fetched_whole(
    postgres_url: str, tmp_path: Path
) -> None:
    """A cached file changed keeping its size and time (its record still matches) gives
    wrong blocks: the file is assembled again from the server's blocks alone."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    data = bytearray(os.urandom(BLOCK * 6))
    (one / "a.npy").write_bytes(bytes(data))
    with Workspace(postgres_url) as workspace:
        push_files(workspace, one)
        pull_files(workspace, two)
        cached = two / "a.npy"
        stat = cached.stat()
        cached.write_bytes(bytes(BLOCK * 6))
        os.utime(cached, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        data[0] ^= 1
        (one / "a.npy").write_bytes(bytes(data))
        push_files(workspace, one)
        assert pull_files(workspace, two) == 1
        assert cached.read_bytes() == bytes(data)


def test_a_file_sent_by_blocks_is_not_hashed_again_while_unchanged(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of several blocks whose size and time match its record is not read again
    by a later push or pull (its record keeps its blocks: it was read at every scan)."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    (one / "a.npy").write_bytes(os.urandom(BLOCK * 6))
    hashed: list[str] = []
    real = pg_files._hashed

    def counted(path: Path, known: list[Any] | None) -> list[Any]:
        hashed.append(path.name)
        return real(path, known)

    monkeypatch.setattr(pg_files, "_hashed", counted)
    with Workspace(postgres_url) as workspace:
        assert push_files(workspace, one) == 1 and hashed == ["a.npy"]
        assert pull_files(workspace, two) == 1
        hashed.clear()
        assert push_files(workspace, one) == 0
        assert pull_files(workspace, two) == 0
        assert pull_files(workspace, one) == 0
        assert hashed == []


def test_a_changed_file_hashes_again_only_its_changed_blocks(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push of a changed file of several blocks hashes with SHA-256, of its blocks,
    only those whose XXH3 hash its record does not list; a replica assembles the file
    the server then lists."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    data = bytearray(os.urandom(BLOCK * 6))
    (one / "a.npy").write_bytes(bytes(data))
    real = pg_files._block_sha
    hashed: list[bytes] = []

    def counted(block: bytes) -> str:
        hashed.append(block)
        return real(block)

    monkeypatch.setattr(pg_files, "_block_sha", counted)
    with Workspace(postgres_url) as workspace:
        assert push_files(workspace, one) == 1 and len(hashed) == 6
        assert pull_files(workspace, two) == 1
        hashed.clear()
        data[BLOCK * 4 + 7] ^= 1
        (one / "a.npy").write_bytes(bytes(data))
        assert push_files(workspace, one) == 1
        assert hashed == [bytes(data[BLOCK * 4 : BLOCK * 5])]  # the changed block alone
        assert pull_files(workspace, two) == 1
        assert (two / "a.npy").read_bytes() == bytes(data)
