"""The bytes of an SQLite database in write-ahead-log mode as its readers see them: the
file with the pages its log holds put in, read without copying the database.

A PostgreSQL workspace keeps the graph tables' database as a file whose blocks a build
sends and a replica fetches (:mod:`quillian.stores.postgres.files`). The writer patches
its copy where it is, in write-ahead-log mode, and where a reader of its own (a served
index) holds a snapshot, SQLite cannot copy the log back into the file: the file alone
lacks the build's pages. A build used to copy the database with its log folded in and
swap the copy in (70 MB at 100k passages, about 0.1 s of each served update there).
:func:`wal_image` reads instead which pages the log holds, from the log's frame headers
(the format SQLite documents, https://www.sqlite.org/fileformat2.html#walformat), and
:meth:`WalImage.reading` reads the file's blocks with those pages put in: the database a
checkpoint would leave, which is what is sent.

How many frames the log holds is SQLite's own answer (``PRAGMA wal_checkpoint``, whose
passive checkpoint copies back what no reader's snapshot needs): only those frames are
read, so frames of an earlier log left past its end are never taken. A log whose frames
do not read as that answer says (another log's salt, no commit at its end, shorter than
it) is read through SQLite instead (:meth:`sqlite3.Connection.serialize`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sqlite3
import struct
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from quillian.errors import StoreError

__all__ = ["WalImage", "wal_image"]

#: The log's header and each frame's header, in bytes.
_HEADER, _FRAME = 32, 24
#: The log header's first word (its low bit: the checksums' byte order).
_MAGIC = (0x377F0682, 0x377F0683)


@dataclass(frozen=True)
class WalImage:
    """A database ``path`` as its last commit left it: ``pages`` pages of
    ``page_size`` bytes, those in ``frames`` (page number to the offset of its latest
    copy in the log) read from the log ``log``, the others from the file. ``data``: the
    whole image, where it was read through SQLite instead."""

    path: Path
    log: Path
    page_size: int
    pages: int
    frames: dict[int, int] = field(default_factory=dict)
    data: bytes | None = None

    @property
    def size(self) -> int:
        """The image's length in bytes."""
        return self.pages * self.page_size

    @contextlib.contextmanager
    def reading(self) -> Iterator[Callable[[int, int], bytes]]:
        """A reader of the image's blocks, its files open while it is:
        ``read(index, block)`` is the ``index``-th block of ``block`` bytes (the last one
        shorter, empty past the image's end)."""
        if self.data is not None:
            data = self.data
            yield lambda index, block: data[index * block : (index + 1) * block]
            return
        with self.path.open("rb") as db, self.log.open("rb") as log:
            yield lambda index, block: self._read(db, log, index * block, block)

    def _read(self, db: BinaryIO, log: BinaryIO, at: int, length: int) -> bytes:
        """``length`` bytes of the image from byte ``at`` (fewer at its end): the
        file's, then each page the log holds in that range put in."""
        length = max(0, min(length, self.size - at))
        if not length:
            return b""
        db.seek(at)
        out = bytearray(db.read(length))
        out.extend(bytes(length - len(out)))  # pages past the file's end: from the log
        size = self.page_size
        first, last = at // size + 1, (at + length - 1) // size + 1
        for page in range(first, last + 1):
            offset = self.frames.get(page)
            if offset is not None:
                log.seek(offset)
                start = (page - 1) * size - at
                out[start : start + size] = log.read(size)
        return bytes(out)


def wal_image(path: Path) -> WalImage | None:
    """The image of the database ``path`` where its write-ahead log holds pages the file
    lacks; None where the file alone is what its readers read (no log, an empty one,
    every frame copied back, or a database not in write-ahead-log mode). Runs a passive
    checkpoint (it copies back what no reader needs, as the writer's own did) to learn
    how many frames the log holds. :class:`~quillian.errors.StoreError` where SQLite
    cannot open the database to do so (a folder it may not write)."""
    log = path.with_name(path.name + "-wal")
    try:
        if not log.stat().st_size:
            return None
    except FileNotFoundError:
        return None
    try:
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            _, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if frames <= 0 or frames == copied:  # not in this mode, empty, or copied back
                return None
            found = _frames(path, log, frames)
            if found is not None:
                return found
            page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            data = conn.serialize()
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot read the database with its log: {exc}") from exc
    return WalImage(path, log, page_size, len(data) // page_size, data=data)


def _frames(path: Path, log: Path, count: int) -> WalImage | None:
    """The image of ``path`` from the first ``count`` frames of ``log`` (each page's
    latest); None where they do not read as a log's committed frames. The frames'
    headers are read as one strided array, not frame by frame: a log a served index
    kept growing holds thousands."""
    with log.open("rb") as handle:
        header = handle.read(_HEADER)
        if len(header) < _HEADER:
            return None
        magic, _, page_size, _, salt1, salt2 = struct.unpack(">6I", header[:24])
        if magic not in _MAGIC or page_size < 512 or page_size & (page_size - 1):
            return None
        stride = _FRAME + page_size
        if os.fstat(handle.fileno()).st_size < _HEADER + count * stride:
            return None
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            body = np.frombuffer(mapped, np.uint8, count * stride, _HEADER)
            heads = body.reshape(count, stride)[:, :16].copy().view(">u4")
            del body  # the map closes with no view of it left
    pages, committed = heads[:, 0].astype(np.int64), heads[:, 1]
    if (heads[:, 2] != salt1).any() or (heads[:, 3] != salt2).any() or not pages.all():
        return None
    if not committed[-1]:  # the count SQLite gives ends at a commit
        return None
    offsets = _HEADER + np.arange(count, dtype=np.int64) * stride + _FRAME
    frames = dict(zip(pages.tolist(), offsets.tolist(), strict=True))  # the latest wins
    return WalImage(path, log, page_size, int(committed[-1]), frames)
