"""What a build keeps for the next, remembered in the process that wrote or read it:
recalled only while the file is the one it was then."""

import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from quillian.index import artifacts
from quillian.index.artifacts import recall, remember, save_arrays


def test_a_value_is_recalled_while_its_file_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(3)})
    value = {"a": np.arange(3)}
    remember(path, value)
    assert recall(path) is value
    assert recall(tmp_path / "other.npz") is None


def test_a_file_written_again_is_not_recalled(tmp_path: Path) -> None:
    """The same bytes written again (another process's build, a copy put in its
    place): its stat stamp differs, so the value is read from the file again."""
    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(3)})
    remember(path, "value")
    save_arrays(path, {"a": np.arange(3)})
    assert recall(path) is None
    remember(path, "value")
    path.unlink()
    assert recall(path) is None


def test_remembered_arrays_are_read_only(tmp_path: Path) -> None:
    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(3)})
    array = np.arange(3)
    remember(path, (array,), [array])
    with pytest.raises(ValueError, match="read-only"):
        array[0] = 7


def test_the_least_recently_used_are_forgotten(tmp_path: Path) -> None:
    paths = [tmp_path / f"kept{i}.npz" for i in range(artifacts._REMEMBERED_MAX + 1)]
    for i, path in enumerate(paths):
        save_arrays(path, {"a": np.arange(i)})
        remember(path, i)
        if i == 1:
            assert recall(paths[0]) == 0  # used again: the second is the oldest now
    assert recall(paths[0]) == 0
    assert recall(paths[1]) is None
    assert recall(paths[-1]) == len(paths) - 1


def test_a_write_aside_is_waited_for_by_its_readers(tmp_path: Path) -> None:
    """Writes aside of one file run in the order started; a read of it (load_arrays,
    recall) waits for them, and settle for all."""
    path = tmp_path / "kept.npz"
    gate = threading.Event()
    order: list[int] = []

    def write(n: int) -> None:
        if n == 1:
            gate.wait(5)
        save_arrays(path, {"a": np.arange(n)})
        order.append(n)

    artifacts.write_aside(path, lambda: write(1))
    artifacts.write_aside(path, lambda: write(2))  # after the first, though it waits
    assert order == []
    gate.set()
    read = artifacts.load_arrays(path, lambda kept: kept["a"].tolist(), "kept", "none")
    assert read == [0, 1] and order == [1, 2]
    other = tmp_path / "other.npz"
    artifacts.write_aside(other, lambda: save_arrays(other, {"a": np.arange(3)}))
    artifacts.settle()
    assert other.exists() and not artifacts._PENDING


def test_a_directory_replaced_is_renamed_aside_then_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """replace_dir swaps the new directory in by two renames: the old one is moved
    aside before its files are deleted (in a thread of its own, which settle waits
    for), so the target is there at every point of the deletion. One left aside by a
    process that stopped is removed by the next replace."""
    target = tmp_path / "tables"
    artifacts.replace_dir(target, lambda path: (path / "a").write_text("1"))
    aside = tmp_path / "tables.old.tmp"
    aside.mkdir()
    (aside / "left").write_text("by a process that stopped")
    seen: list[str] = []
    real = artifacts.shutil.rmtree

    def rmtree(path: Path, *args: object, **kwargs: object) -> None:
        if Path(path) == aside:  # the new one in place while the old one is deleted
            seen.append((target / "a").read_text() if target.exists() else "")
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(artifacts.shutil, "rmtree", rmtree)
    artifacts.replace_dir(target, lambda path: (path / "a").write_text("2"))
    artifacts.settle()
    assert (target / "a").read_text() == "2" and seen[-1] == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tables"]
    artifacts.remove_aside(tmp_path / "missing")  # nothing there: nothing to do
    artifacts.remove_aside(target)
    artifacts.settle()
    assert not list(tmp_path.iterdir())


def _arrays_in(path: Path) -> list[int]:
    with np.load(path) as kept:
        return [int(v) for v in kept["a"]]


def test_a_write_kept_for_later_runs_once_updates_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that is there is written once no write of it was asked for a while (the
    last one asked), or at once where the process asks (at its exit) or reads it; one
    that is not there yet is written at once."""
    monkeypatch.setattr(artifacts, "LATER_S", 0.3)
    path = tmp_path / "kept.npz"
    artifacts.write_later(path, lambda: save_arrays(path, {"a": np.arange(1)}), 1)
    artifacts.settle(path)
    assert _arrays_in(path) == [0]  # none there: written at once
    for n in (2, 3, 4):
        artifacts.write_later(path, lambda n=n: save_arrays(path, {"a": np.arange(n)}), n)
    assert _arrays_in(path) == [0]  # not yet
    deadline = time.monotonic() + 10
    while _arrays_in(path) == [0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _arrays_in(path) == [0, 1, 2, 3]  # the last asked, once
    artifacts.write_later(path, lambda: save_arrays(path, {"a": np.arange(5)}), 5)
    artifacts.write_kept()  # as the process exits
    assert _arrays_in(path) == [0, 1, 2, 3, 4]
    artifacts.write_later(path, lambda: save_arrays(path, {"a": np.arange(6)}), 6)
    read = artifacts.load_arrays(path, lambda kept: kept["a"].tolist(), "kept", "then")
    assert read == list(range(6))  # a read of it runs it first


def test_a_value_kept_while_the_last_write_runs_is_the_one_found_and_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update that keeps its value while the write the last one kept is running
    waits for that write: its own value is then the one this process finds and the one
    the file gets (the running write would otherwise land over it)."""
    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(1)})
    running, release = threading.Event(), threading.Event()

    def slow(n: int) -> None:
        running.set()
        release.wait(10)
        save_arrays(path, {"a": np.arange(n)})
        artifacts.remember(path, n)

    monkeypatch.setattr(artifacts, "LATER_S", 0.0)
    artifacts.write_later(path, lambda: slow(2), 2)
    assert running.wait(10)  # its write taken by the thread, held
    monkeypatch.setattr(artifacts, "LATER_S", 3600.0)

    def save(n: int) -> None:
        save_arrays(path, {"a": np.arange(n)})
        artifacts.remember(path, n)

    keeping = threading.Thread(target=artifacts.write_later, args=(path, lambda: save(3), 3))
    keeping.start()
    time.sleep(0.1)
    release.set()
    keeping.join(10)
    assert artifacts.recall(path) == 3
    artifacts.write_kept()
    assert _arrays_in(path) == [0, 1, 2]


def test_a_value_recalled_while_its_write_runs_is_the_one_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that recalls a file while the thread is between writing it and
    remembering what it wrote waits for the write: it recalls the new value, not None
    (the file's stamp was then neither the old one's nor the new one's, and a served
    update read its chunk table whole). A write of another file does not hold it."""
    path, other = tmp_path / "kept.npz", tmp_path / "other.npz"
    save_arrays(path, {"a": np.arange(1)})
    artifacts.remember(path, 1)
    written, release = threading.Event(), threading.Event()

    def slow(n: int) -> None:
        save_arrays(path, {"a": np.arange(n)})
        written.set()
        release.wait(10)
        artifacts.remember(path, n)

    monkeypatch.setattr(artifacts, "LATER_S", 0.0)
    artifacts.write_later(path, lambda: slow(2), 2)
    assert written.wait(10)  # the file replaced, not yet remembered
    save_arrays(other, {"a": np.arange(1)})
    artifacts.remember(other, 1)
    assert artifacts.recall(other) == 1  # another file's recall does not wait
    found: list[object] = []
    recalling = threading.Thread(target=lambda: found.append(artifacts.recall(path)))
    recalling.start()
    recalling.join(0.2)
    assert recalling.is_alive() and found == []
    release.set()
    recalling.join(10)
    assert found == [2]


def test_a_write_kept_for_later_skips_a_folder_made_anew(tmp_path: Path) -> None:
    """The index removed and built again in its place meanwhile: the write of the old
    one's file is not run into the new one."""
    folder = tmp_path / "index"
    folder.mkdir()
    path = folder / "kept.npz"
    save_arrays(path, {"a": np.arange(1)})
    artifacts.write_later(path, lambda: save_arrays(path, {"a": np.arange(9)}), 9)
    shutil.rmtree(folder)
    folder.mkdir()
    save_arrays(path, {"a": np.arange(2)})
    artifacts.write_kept()
    assert _arrays_in(path) == [0, 1]


def test_a_forked_child_keeps_none_of_its_parents_writes(tmp_path: Path) -> None:
    """The parent runs them; the child would otherwise write them again at its exit, or
    wait on a lock the parent's thread held when it forked."""
    import os

    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(1)})
    artifacts.write_later(path, lambda: save_arrays(path, {"a": np.arange(2)}), 2)
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's own exit code says)
        os._exit(0 if not artifacts._LATER.due and not artifacts._LATER.running else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _arrays_in(path) == [0]
    artifacts.write_kept()
    assert _arrays_in(path) == [0, 1]


def test_a_process_that_exits_runs_its_kept_writes(tmp_path: Path) -> None:
    """A process ends (here within the pause) having written what it kept."""
    import subprocess
    import sys

    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(1)})
    script = (
        "import sys, numpy as np; from pathlib import Path;"
        " from quillian.index import artifacts; path = Path(sys.argv[1]);"
        " artifacts.write_later(path, lambda: artifacts.save_arrays(path, {'a': np.arange(3)}), 3)"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=120)
    assert _arrays_in(path) == [0, 1, 2]


def test_no_kept_write_starts_while_a_build_runs_nor_just_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write kept comes due while a build runs: it waits for the build, and then for
    the pause after it (served updates one after another had the write run inside the
    next one, which waited for it)."""
    monkeypatch.setattr(artifacts, "LATER_S", 0.2)
    path = tmp_path / "kept.npz"
    save_arrays(path, {"a": np.arange(1)})
    with artifacts.building():
        artifacts.write_later(path, lambda: save_arrays(path, {"a": np.arange(2)}), 2)
        time.sleep(0.5)  # due, but a build runs
        assert _arrays_in(path) == [0]
    ended = time.monotonic()
    deadline = ended + 10
    while _arrays_in(path) == [0] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _arrays_in(path) == [0, 1]
    assert time.monotonic() - ended >= 0.2


def test_a_build_removes_the_partial_files_a_killed_process_left(tmp_path: Path) -> None:
    """A ``.partial`` file no write of this process runs (a killed process's) goes; the
    files beside it, and a partial whose write runs now in this process, stay."""
    kept = tmp_path / "chunk_keys_by_id.npz"
    save_arrays(kept, {"ids": np.arange(3)})
    stale = tmp_path / ("text_keys_by_id.npz" + artifacts.PARTIAL)
    stale.write_bytes(b"cut short")
    running = tmp_path / ("chunk_catalog.npz" + artifacts.PARTIAL)
    running.write_bytes(b"being written")
    target = (tmp_path / "chunk_catalog.npz").absolute()
    with artifacts._LATER.changed:
        artifacts._LATER.running.add(target)
    try:
        artifacts.drop_partials(tmp_path)
    finally:
        with artifacts._LATER.changed:
            artifacts._LATER.running.discard(target)
    assert not stale.exists() and running.exists() and kept.is_file()
