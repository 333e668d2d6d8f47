"""The index's file artifacts beside its stores (the graph tables, see
:mod:`quillian.index.tables`, the BM25 index, the arrays a build keeps for the next),
each written whole next to its place and swapped in.

What a build keeps for the next (the graph's columns, the chunk catalog) is also kept
in this process (:func:`remember`, :func:`recall`): a long-running process (``quillian
serve``) that updates an index again finds it without reading and decoding the file,
as long as the file's stat stamp says nothing else wrote it meanwhile. At 100k
passages reading both back took about 0.06 s of each update. Such a file may also be
written aside (:func:`write_aside`), in a thread of its own while the build goes on; a
reader of it waits for the write, and a build waits for all before it ends
(:func:`settle`). One this process keeps may be written later instead
(:func:`write_later`): once updates pause, or when the process exits, so that a burst
of updates writes it once."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import threading
import time
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from quillian.stores.embedded.files import replace_file
from quillian.stores.integrity import remember_saved, stat_stamp

__all__ = [
    "PARTIAL",
    "KeptInProcess",
    "drop_partials",
    "load_arrays",
    "recall",
    "remember",
    "remove_aside",
    "replace_dir",
    "save_arrays",
    "save_npy",
    "settle",
    "write_aside",
    "write_kept",
    "write_later",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The suffix of the file an artifact is written to before it is renamed into place.
PARTIAL = ".partial"


def replace_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Write a directory artifact next to ``target`` and swap it in: the old one is
    renamed aside first and deleted after (:func:`remove_aside`), so ``target`` is
    missing only between two renames, not while its files are deleted."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    old = _set_aside(target)
    tmp.rename(target)
    if old is not None:
        _delete_aside(old)


def remove_aside(target: Path) -> None:
    """Remove the directory ``target`` (where there is one): renamed to a temporary name
    (``.tmp``, which no file sync or check reads), then deleted in a thread of its own
    (:func:`write_aside`) while the build goes on. Deleting the files of the tables and
    the snapshot an update replaces took about 0.04 s of an add at 100k passages
    (unlinking a file frees its blocks; docs/scale.md)."""
    old = _set_aside(target)
    if old is not None:
        _delete_aside(old)


def _set_aside(target: Path) -> Path | None:
    """Rename the directory ``target`` aside (after any deletion of one set aside before,
    and removing one a process that stopped left); where it went, None where there was
    none."""
    old = target.with_name(target.name + ".old.tmp")
    settle(old)
    shutil.rmtree(old, ignore_errors=True)
    try:
        target.rename(old)
    except FileNotFoundError:
        return None
    return old


def _delete_aside(old: Path) -> None:
    write_aside(old, lambda: shutil.rmtree(old, ignore_errors=True))


#: Writes running in a thread of their own, by the absolute path they write.
_PENDING: dict[Path, threading.Thread] = {}
_PENDING_LOCK = threading.Lock()


def write_aside(path: Path, write: Callable[[], None]) -> None:
    """Run ``write`` (which writes the file at ``path``, and logs what fails) in a thread
    of its own, after any earlier one of ``path``: for what a build keeps only to make
    the next one cheaper, so the build's later stages need not wait for it.
    :func:`settle` waits for it; :func:`load_arrays` and :func:`recall` of ``path`` do."""
    key = path.absolute()
    with _PENDING_LOCK:
        before = _PENDING.get(key)

        def run() -> None:
            if before is not None:
                before.join()
            write()

        thread = threading.Thread(target=run, name=f"write {path.name}")
        _PENDING[key] = thread
        thread.start()


def settle(path: Path | None = None) -> None:
    """Wait for the writes :func:`write_aside` started (of ``path`` only, where given):
    a build waits for all of its own before it lets another writer in."""
    with _PENDING_LOCK:
        if path is None:
            threads = list(_PENDING.values())
        else:
            threads = [t] if (t := _PENDING.get(path.absolute())) is not None else []
    for thread in threads:
        thread.join()
    with _PENDING_LOCK:
        for key, thread in list(_PENDING.items()):
            if not thread.is_alive():
                del _PENDING[key]


#: Seconds without a new :func:`write_later` of a file, and without a build in this
#: process, after which it is written.
LATER_S = 0.5


class _Later:
    """The writes :func:`write_later` keeps, by absolute path (the last asked for each,
    with the stat stamp of the file it replaces and when it is due), the paths whose
    write runs now, and the one thread that runs them when due."""

    def __init__(self) -> None:
        self.due: OrderedDict[Path, tuple[Callable[[], None], tuple[int, ...], float]] = (
            OrderedDict()
        )
        self.changed = threading.Condition()
        #: The paths whose kept write runs now (in the thread, or in a caller of
        #: :meth:`run`): another write of one waits, and so do :meth:`drop` and
        #: :meth:`wait`; a write of another path does not.
        self.running: set[Path] = set()
        #: Builds running in this process (:func:`building`), and when the last ended.
        self.builds = 0
        self.quiet_from = 0.0
        self.thread: threading.Thread | None = None

    @contextmanager
    def building(self) -> Iterator[None]:
        with self.changed:
            self.builds += 1
        try:
            yield
        finally:
            with self.changed:
                self.builds -= 1
                self.quiet_from = time.monotonic()
                self.changed.notify_all()

    def keep(self, path: Path, write: Callable[[], None], stamp: tuple[int, ...]) -> None:
        with self.changed:
            self.due.pop(path, None)
            self.due[path] = (write, stamp, time.monotonic() + LATER_S)
            oldest = []
            while len(self.due) > _REMEMBERED_MAX:  # as many as are remembered
                oldest.append(self._take(next(iter(self.due))))
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="write later", daemon=True)
                self.thread.start()
                _at_exit_and_fork()
            self.changed.notify_all()
        for taken in oldest:  # more than are remembered: the oldest now
            if taken is not None:
                self._run(*taken)

    def drop(self, path: Path) -> None:
        """Forget the write of ``path`` kept, and wait for one running."""
        with self.changed:
            self.due.pop(path, None)
            self._idle(path)

    def wait(self, path: Path) -> None:
        """Wait for the write of ``path`` running, if one is: until it has remembered
        what it wrote, the file's stamp is neither the old one's nor the new one's."""
        with self.changed:
            self._idle(path)

    def _idle(self, path: Path) -> None:
        while path in self.running:
            self.changed.wait()

    def _take(self, path: Path) -> tuple[Path, Callable[[], None], tuple[int, ...]] | None:
        """The write kept of ``path``, taken out and marked running (under the lock, so
        that no :meth:`drop` finds it in neither place), once no write of it runs; None
        where none is kept by then."""
        self._idle(path)
        if path not in self.due:
            return None
        write, stamp, _ = self.due.pop(path)
        self.running.add(path)
        return path, write, stamp

    def _run(self, path: Path, write: Callable[[], None], stamp: tuple[int, ...]) -> None:
        try:
            _run_kept(path, write, stamp)
        finally:
            with self.changed:
                self.running.discard(path)
                self.changed.notify_all()

    def _loop(self) -> None:
        while True:
            with self.changed:
                if self.builds:
                    self.changed.wait()
                    continue
                now, quiet = time.monotonic(), self.quiet_from + LATER_S
                ready = next(
                    (k for k, (_, _, due) in self.due.items() if max(due, quiet) <= now), None
                )
                if ready is None:
                    wait = min((due for _, _, due in self.due.values()), default=now + 3600)
                    self.changed.wait(max(wait, quiet) - now)
                    continue
                taken = self._take(ready)
            if taken is not None:
                self._run(*taken)

    def run(self, path: Path | None = None) -> None:
        """Run now, in this thread, the writes kept (of ``path`` only, where given), each
        after the one of its path the thread may be running."""
        with self.changed:
            keys = [path] if path is not None else list(self.due)
        for key in keys:
            with self.changed:
                taken = self._take(key)
            if taken is not None:
                self._run(*taken)


_LATER = _Later()


def _run_kept(path: Path, write: Callable[[], None], stamp: tuple[int, ...]) -> None:
    """``write`` of ``path``, unless the file there is no longer the one it was to
    replace (``stamp``): another process wrote it meanwhile, or the index was removed, or
    built anew in its place."""
    settle(path)  # after any write of it started aside
    try:
        if stat_stamp(path) != stamp:
            return
    except OSError:
        return
    write()


def write_later(
    path: Path, write: Callable[[], None], value: Any, arrays: Iterable[npt.NDArray[Any]] = ()
) -> None:
    """Keep ``value`` in this process as what the file at ``path`` holds
    (:func:`remember`, with its ``arrays``) and run ``write`` (which writes that file,
    logs what fails, and remembers what it wrote) later, for a file a build keeps only
    to make the next one cheaper: once no build has asked to write it, and none has
    run in this process (:func:`building`), for :data:`LATER_S` seconds, before this
    process reads it (:func:`load_arrays`), or
    when this process exits (:func:`write_kept`). A burst of updates writes it once, not
    once each: at 100k passages the graph's columns and the chunk catalog were 19.6 of
    the 56 MB each update wrote (docs/scale.md). A process that is killed leaves the
    file of an earlier build, which the next build finds does not follow (each such
    file keeps the mark it follows) and reads past. Where there is no file at ``path``
    yet, written now (:func:`write_aside`), and nothing remembered before it is: a value
    remembered stands for a file that is there, and one that cannot be written says so
    now.

    A write of ``path`` kept before and not yet run is dropped (this value supersedes
    it), and one running ends first: its file, and what it remembers, would otherwise
    land over this value, which the next build would not find (an update that began
    while the last one's write ran read its table whole, 2.7-4.1 s at 100k passages)."""
    key = path.absolute()
    settle(key)  # a write of it started aside first: the file it leaves is replaced
    _LATER.drop(key)
    try:
        stamp = stat_stamp(key) if key.is_file() else None
    except OSError:
        stamp = None
    if stamp is None:  # none there (or no file): at once
        write_aside(path, write)
        return
    remember(path, value, arrays)
    _LATER.keep(key, write, stamp)


def drop_partials(directory: Path) -> None:
    """Remove the files :func:`save_arrays` was writing in ``directory`` (``.partial``)
    that no write of this process runs now: those of a process killed while it wrote
    one, which no later build would otherwise remove where it writes that file no more.
    For a build, under the index's writer lock. A kept write of another process that
    loses its partial here fails and says so (what it keeps is a cache its next build
    checks)."""
    for partial in directory.glob("*" + PARTIAL):
        target = partial.with_name(partial.name[: -len(PARTIAL)]).absolute()
        settle(target)  # a write of it aside in this process ends first (it renames it)
        with _LATER.changed:
            if target in _LATER.running:
                continue
        partial.unlink(missing_ok=True)


def building() -> AbstractContextManager[None]:
    """Held while a build or a delete runs in this process: no write :func:`write_later`
    kept starts meanwhile, and none until :data:`LATER_S` seconds after the last one
    ends. A write that began while the process was quiet is waited for by the next
    update that keeps a value of its file (or recalls it), and took 10-30 ms of served
    updates at 100k passages whose writes came due between them (docs/scale.md)."""
    return _LATER.building()


def write_kept(path: Path | None = None) -> None:
    """Run now the writes :func:`write_later` keeps (of ``path`` only, where given): at
    this process's exit, and wherever the file must hold what this process keeps (a
    test standing for another process)."""
    _LATER.run(None if path is None else path.absolute())


def _forget_kept() -> None:
    """In a child this process forked: none of the parent's kept writes (the parent
    runs them), and no lock the parent's thread may have held."""
    global _LATER
    _LATER = _Later()


@functools.cache
def _at_exit_and_fork() -> None:
    """Once a write is first kept (not on import): the kept writes run at this process's
    exit, and a child it forks keeps none of them (a child inherits both)."""
    atexit.register(write_kept)
    os.register_at_fork(after_in_child=_forget_kept)


def save_npy(path: Path, array: npt.NDArray[Any]) -> None:
    """Write ``array`` as the ``.npy`` file ``path``, next to it first (``.tmp``, which
    no file sync or check reads) and renamed into place: a reader that mapped the file
    before keeps the old one whole, and one that opens it after finds the new one."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as out:
        np.save(out, array)
    replace_file(tmp, path)
    remember_saved(path, array)  # the manifest's record hashes it from memory


def save_arrays(path: Path, arrays: Mapping[str, npt.NDArray[Any]]) -> None:
    """Write ``arrays`` as an uncompressed npz next to ``path`` (:data:`PARTIAL`) and
    rename it into place, so a reader finds the old file or the new one whole."""
    partial = path.with_name(path.name + PARTIAL)
    with partial.open("wb") as out:
        np.savez(out, **arrays)  # type: ignore[arg-type]  # names, not allow_pickle
    replace_file(partial, path)


def load_arrays(path: Path, read: Callable[[Any], T | None], what: str, then: str) -> T | None:
    """What ``read`` makes of the npz :func:`save_arrays` wrote at ``path``, opened
    without pickles (``read`` gets it open, its arrays by name; it returns None for a
    file it does not take). None where there is no file, or, with a warning naming
    ``what`` and what happens ``then``, where it does not read: damaged, cut short, or
    without an array ``read`` asks for."""
    write_kept(path)
    settle(path)
    try:
        with np.load(path, allow_pickle=False) as kept:
            return read(kept)
    except FileNotFoundError:
        return None
    except (KeyError, IndexError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        logger.warning("%s: %s does not read (%s): %s", what, path, exc, then)
        return None


#: What :func:`remember` keeps, by absolute path: the file's stat stamp and the value.
_REMEMBERED: OrderedDict[Path, tuple[tuple[int, ...], Any]] = OrderedDict()
_REMEMBERED_LOCK = threading.Lock()
#: The files remembered at most, the least recently used forgotten first (a server with
#: many indexes keeps the values of the few it updated last).
_REMEMBERED_MAX = 8


def remember(path: Path, value: Any, arrays: Iterable[npt.NDArray[Any]] = ()) -> None:
    """Keep ``value`` as what the file at ``path`` holds (just written or read), for
    :func:`recall` while the file's stat stamp stays as it is now. ``value`` is shared
    with every caller that recalls it: its ``arrays`` are made read-only here, so a
    caller that would change one in place fails instead of changing what the next one
    finds."""
    for array in arrays:
        array.flags.writeable = False
    key = path.absolute()
    try:
        stamp = stat_stamp(path)
    except OSError:
        stamp = None
    with _REMEMBERED_LOCK:
        _REMEMBERED.pop(key, None)
        if stamp is not None:
            _REMEMBERED[key] = (stamp, value)
            while len(_REMEMBERED) > _REMEMBERED_MAX:
                _REMEMBERED.popitem(last=False)


def recall(path: Path) -> Any | None:
    """What :func:`remember` kept for ``path``, where the file is still the one it was
    then (same device, inode, size and times); else None. A kept write of ``path``
    running ends first: between its file and its remembering, neither stamp holds (a
    served update that began then read its chunk table whole, 0.2 s at 100k passages)."""
    settle(path)
    key = path.absolute()
    _LATER.wait(key)
    with _REMEMBERED_LOCK:
        entry = _REMEMBERED.get(key)
        if entry is not None:
            _REMEMBERED.move_to_end(key)
    if entry is None:
        return None
    try:
        same = stat_stamp(path) == entry[0]
    except OSError:
        same = False
    return entry[1] if same else None


class KeptInProcess(Generic[T]):
    """What a build keeps in this process for the next build of the same index, by a
    path (the index's, its resolution state's) and what that build must match to use
    it (``tag``: the digest of the tables it belongs to, a model): the last kept for a
    path. Unlike :func:`remember`, tied to no file: a new process keeps nothing."""

    def __init__(self) -> None:
        self._kept: dict[Path, tuple[Hashable, T]] = {}
        self._lock = threading.Lock()

    def keep(self, path: Path, tag: Hashable, value: T) -> None:
        with self._lock:
            self._kept[path.absolute()] = (tag, value)

    def get(self, path: Path, tag: Hashable) -> T | None:
        """What :meth:`keep` kept for ``path`` under ``tag``; None where it kept nothing
        there, or under another tag."""
        with self._lock:
            found = self._kept.get(path.absolute())
        return found[1] if found is not None and found[0] == tag else None

    def clear(self) -> None:
        """Keep nothing any more (as a new process keeps nothing)."""
        with self._lock:
            self._kept.clear()
