"""Crash-safe files for the embedded indexes: generations committed by a manifest.

An index writes each flush as a new *generation* of data files (``vectors-000003.npy``)
and then replaces its manifest (a small JSON file naming the generation) through a temp
file and :func:`os.replace`. The manifest replacement is the commit: a crash before it
leaves the previous generation in force, a crash after it the new one. Files of other
generations are removed once the manifest names a new one, or at the next open.
Existing files are never rewritten in place, so arrays memory-mapped from an older
generation stay valid. The manifest records each data file's size and checksum
(:mod:`quillian.stores.integrity`), which :meth:`Generations.verify` checks.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import re
import shutil
import stat
import sys
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from quillian.errors import IndexIncompleteError, IndexSchemaError, StoreError
from quillian.stores.integrity import FileRecord, check_digest, file_record, verify_files

__all__ = ["Generations", "fsync_path", "replace_file", "write_json_atomic"]

_GENERATION_FILE = re.compile(r"^[a-z]+-(\d{6})\.[a-z]+(\.tmp)?$")


def fsync_path(path: Path) -> None:
    """Flush a file (or a directory entry list) to disk; a no-op where unsupported."""
    flags = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if path.is_dir() else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_file(tmp: Path, target: Path) -> None:
    """Put the file ``tmp`` in ``target``'s place at once (a reader finds the old file
    or the new one, whole), where ``target`` exists by swapping the two names (Linux's
    ``renameat2`` with ``RENAME_EXCHANGE``) and removing the old file, now under
    ``tmp``'s name; else by :func:`os.replace`.

    A file renamed over another is written back to the disk at once on ext4 (its
    ``auto_da_alloc`` guard, for programs that replace a file without syncing it):
    writing 40 MB in 16 files over their last versions took 63-68 ms so, 18-19 ms by
    swapping names (``python research/replace_files.py``). The files this replaces are
    those an update rewrites (an index's arrays), which the manifest's records check
    (their sizes at open); the stores sync their own (a database's commit, the graph
    snapshot's files)."""
    exchange = _exchange()
    if exchange is not None and _regular(target) and exchange(tmp, target):
        tmp.unlink(missing_ok=True)
        return
    os.replace(tmp, target)  # also what refuses a folder in the target's place


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (a swap would put a folder there aside)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


#: ``RENAME_EXCHANGE`` of Linux's ``renameat2``: swap two names atomically.
_RENAME_EXCHANGE = 2
#: ``AT_FDCWD``: paths relative to the working directory.
_AT_FDCWD = -100


@functools.cache
def _exchange() -> Callable[[Path, Path], bool] | None:
    """Swap two existing names (True), or say it did not (False: a name missing, or a
    file system that cannot swap them); None off Linux or where C's library lacks
    ``renameat2`` (glibc before 2.28)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    renameat2.restype = ctypes.c_int

    def exchange(a: Path, b: Path) -> bool:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return True
        code = ctypes.get_errno()
        if code in (errno.ENOENT, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
            return False  # no target (a plain rename writes nothing back), or no swap here
        raise OSError(code, os.strerror(code), str(a), None, str(b))

    return exchange


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` through a synced temp file and :func:`os.replace`."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` whole or not at all: ``write`` fills a synced temp file beside it,
    which then replaces ``path``; on any error the temp file is removed."""
    tmp = path.with_name(f".{path.name}.writing-{uuid.uuid4().hex[:8]}")
    try:
        with tmp.open("wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def publish_directory(tmp: Path, out: Path) -> None:
    """Rename the finished directory ``tmp`` to ``out``, replacing what was there."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.replaced-{uuid.uuid4().hex[:8]}"
        os.rename(out, old)
    os.rename(tmp, out)
    fsync_path(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class Generations:
    """The manifest and generation files of one index directory.

    ``kind`` names the index type recorded in the manifest (``"exact"``); opening a
    directory written by another kind, or by a newer format, is refused.
    """

    MANIFEST = "index.json"

    def __init__(
        self,
        directory: Path,
        kind: str,
        format_version: int = 1,
        *,
        reads: Sequence[int] = (),
    ) -> None:
        if directory.exists() and not directory.is_dir():
            raise StoreError(f"{directory}: is not a directory")
        self.directory = directory
        self.kind = kind
        self.format_version = format_version
        self.reads = {format_version, *reads}

    @property
    def manifest_path(self) -> Path:
        return self.directory / self.MANIFEST

    def read(self) -> dict[str, Any] | None:
        """The committed manifest, or ``None`` when the directory holds no index yet."""
        path = self.manifest_path
        if not path.exists():
            return None
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IndexIncompleteError(f"{path}: unreadable index manifest: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("kind") != self.kind:
            found = meta.get("kind") if isinstance(meta, dict) else None
            raise StoreError(f"{path}: holds a {found!r} index, expected {self.kind!r}")
        if meta.get("format") not in self.reads:
            raise IndexSchemaError(
                f"{path}: index format {meta.get('format')!r}, "
                f"this Quillian reads format {' or '.join(map(str, sorted(self.reads)))}"
            )
        return meta

    def path(self, name: str, generation: int, suffix: str = ".npy") -> Path:
        """Path of data file ``name`` in ``generation``."""
        return self.directory / f"{name}-{generation:06d}{suffix}"

    def commit(
        self,
        meta: dict[str, Any],
        files: Sequence[Path],
        kept: Mapping[str, FileRecord | None] | None = None,
    ) -> dict[str, Any]:
        """Sync ``files``, make ``meta`` (with its ``generation``, and the size and
        checksum of each of ``files`` under ``"files"``) the committed state, then
        remove the files of other generations.

        ``kept``: the records of files an earlier generation wrote that this one goes on
        using (a segmented index's older segments; None for one written before records);
        they are neither hashed again nor removed, and every other generation file is.
        Returns the manifest written."""
        for path in files:
            fsync_path(path)
        records = {path.name: file_record(path) for path in files}
        written = {
            **meta,
            "files": {
                **{n: r for n, r in (kept or {}).items() if r is not None},
                **records,
            },
            "kind": self.kind,
            "format": self.format_version,
        }
        write_json_atomic(self.manifest_path, written)
        if kept is None:
            self.remove_stale(int(meta["generation"]))
        else:
            self.remove_others({*kept, *records})
        return written

    def verify(self, meta: dict[str, Any], *, hash_up_to: int | None = None) -> list[Path]:
        """Check the committed files against the records in ``meta``: every size, and
        the checksum of each file of at most ``hash_up_to`` bytes (all when None).
        Returns the files whose checksum is left to :meth:`verify_later`. A manifest
        written before the records checks nothing."""
        records = meta.get("files")
        if not isinstance(records, dict):
            return []
        left = verify_files(self.directory, records, hash_up_to=hash_up_to)
        return [self.directory / name for name in left]

    def verify_later(
        self, meta: dict[str, Any], paths: Sequence[Path], *, known: bool = False
    ) -> None:
        """Check the checksums :meth:`verify` left for later (``known``: digests this
        process remembered for the files as they are now taken, see
        :func:`~quillian.stores.integrity.check_digest`)."""
        records = meta.get("files") or {}
        for path in paths:
            check_digest(path, records.get(path.name), known=known)

    def remove_others(self, keep: Collection[str]) -> None:
        """Delete generation files not named in ``keep``, and leftover temp files."""
        if not self.directory.is_dir():
            return
        for child in self.directory.iterdir():
            match = _GENERATION_FILE.match(child.name)
            if match and (child.name not in keep or match.group(2)):
                with contextlib.suppress(OSError):  # mapped, where that forbids removal
                    child.unlink()
        (self.directory / (self.MANIFEST + ".tmp")).unlink(missing_ok=True)

    def remove_stale(self, keep: int) -> None:
        """Delete generation files other than ``keep``'s, and leftover temp files."""
        if not self.directory.is_dir():
            return
        for child in self.directory.iterdir():
            match = _GENERATION_FILE.match(child.name)
            if match and (int(match.group(1)) != keep or match.group(2)):
                with contextlib.suppress(OSError):  # mapped, where that forbids removal
                    child.unlink()
        (self.directory / (self.MANIFEST + ".tmp")).unlink(missing_ok=True)
