"""A file an update rewrites takes its last version's place at once, by a swap of the
two names where the system has one (so ext4 does not write it back to the disk in the
call): the new bytes under the name, the old file gone, nothing left beside it, and a
reader that opened the old file keeping it whole; with no file to replace, or on a file
system that cannot swap names, by a rename; a folder in its place refused as a rename
refuses it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from quillian.stores.embedded import files
from quillian.stores.embedded.files import replace_file


def test_a_file_takes_its_last_versions_place(tmp_path: Path) -> None:
    target, tmp = tmp_path / "a.npy", tmp_path / "a.npy.tmp"
    target.write_bytes(b"old" * 1000)
    with target.open("rb") as reader:
        tmp.write_bytes(b"new")
        replace_file(tmp, target)
        assert reader.read() == b"old" * 1000  # the reader's file whole
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]


def test_with_no_file_to_replace_it_is_renamed(tmp_path: Path) -> None:
    target, tmp = tmp_path / "a.npy", tmp_path / "a.npy.tmp"
    tmp.write_bytes(b"new")
    replace_file(tmp, target)
    assert target.read_bytes() == b"new" and not tmp.exists()
    with pytest.raises(FileNotFoundError):
        replace_file(tmp, target)  # nothing to put in its place


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_linux_swaps_the_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exchange = files._exchange()
    assert exchange is not None
    swapped: list[bool] = []

    def watched(a: Path, b: Path) -> bool:
        swapped.append(exchange(a, b))
        return swapped[-1]

    monkeypatch.setattr(files, "_exchange", lambda: watched)
    target, tmp = tmp_path / "a.npy", tmp_path / "a.npy.tmp"
    target.write_bytes(b"old")
    tmp.write_bytes(b"new")
    replace_file(tmp, target)
    assert swapped == [True] and target.read_bytes() == b"new" and not tmp.exists()


def test_a_file_system_that_cannot_swap_names_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "_exchange", lambda: lambda a, b: False)
    target, tmp = tmp_path / "a.npy", tmp_path / "a.npy.tmp"
    target.write_bytes(b"old")
    tmp.write_bytes(b"new")
    replace_file(tmp, target)
    assert target.read_bytes() == b"new" and not tmp.exists()


def test_a_folder_in_the_files_place_is_refused(tmp_path: Path) -> None:
    target, tmp = tmp_path / "a.npy", tmp_path / "a.npy.tmp"
    target.mkdir()
    tmp.write_bytes(b"new")
    with pytest.raises(IsADirectoryError):
        replace_file(tmp, target)
    assert target.is_dir() and tmp.read_bytes() == b"new"
