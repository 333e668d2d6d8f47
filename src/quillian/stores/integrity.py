"""Checksums of stored files, recorded when a file is written and verified when read.

Every array and table an index stores is recorded here as ``{"size": N, "xxh3_128": HEX}``
by whoever commits it (a vector store's ``index.json``, the graph snapshot's
``snapshot.json``, the index manifest for the files beside the stores), and checked on
the way back in: the size at once (a truncated file never reaches numpy's parser), the
digest when the file is opened, or on its first read where it is large and
memory-mapped. A file that differs raises :class:`~quillian.errors.IndexDamagedError`
naming it; a file with no record (an index written before the records) is trusted as
before.

XXH3's 128-bit hash (the ``xxhash`` package) is the hash: 33 GB/s on 64 MiB in memory on
the development machine, against 0.95 GB/s for BLAKE2b, the records' hash before it (1.8
for SHA-256, 4.2 for zlib's CRC-32; ``research/file_hashes.py``). Each update hashes the
files it rewrites, and the graph tables of a 100k-passage index are 93 MB: 0.01 s
against 0.11. The records guard against damage, not against a forged file: 128 bits
leave no practical chance of a damaged file passing, where CRC-32's 32 would. A record
made before (``"blake2b"``) is checked with BLAKE2b, as it was written.

A record is made of a file its writer has just hashed (the graph tables' database, whose
digest the resolution state keeps) without reading it again: each digest this process
computes is remembered by the file's stat stamp (:func:`stat_stamp`), and
:func:`file_record` takes a remembered one while the file's stamp is unchanged. An
array written by ``np.save`` is hashed from memory as it is written
(:func:`remember_saved`: nothing read back), so an update's records
cost a pass over the bytes it wrote, not a read of them. A check (:func:`check_digest`,
:func:`verify_files`) reads the file, unless told ``known``: an update checking the
files it goes on from (BM25's, at each update) takes the digest this process
remembered for a file whose stamp has not changed since, where reading it again would
read the page cache's copy of what it wrote (every file of the index, at each update);
so does the opening of an index (a served engine opens the build its update wrote).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import xxhash
from numpy.lib import format as npy_format

from quillian.errors import IndexDamagedError
from quillian.stores.recent import Recent

__all__ = [
    "ALGORITHM",
    "HASHES",
    "FileRecord",
    "check_digest",
    "check_size",
    "copy_with_digest",
    "damaged",
    "digest_matches",
    "file_digest",
    "file_record",
    "record_files",
    "remember_saved",
    "save_recorded",
    "stat_stamp",
    "verify_files",
    "walk_files",
]

#: The hash every record made now carries (the record's key for the digest).
ALGORITHM = "xxh3_128"


class _Hash(Protocol):
    def update(self, data: bytes | memoryview, /) -> None: ...
    def hexdigest(self) -> str: ...


#: Each hash a record may name, by its key: the current one first, then those of records
#: made before it, each still checked as written.
HASHES: dict[str, Callable[[], _Hash]] = {
    ALGORITHM: xxhash.xxh3_128,
    "blake2b": lambda: hashlib.blake2b(digest_size=16),
}


def digest_matches(digest: str, compute: Callable[[str], str]) -> bool:
    """Whether ``digest`` is what ``compute`` gives under one of :data:`HASHES` (the
    current one first): what a checksum kept inside a file is checked with, a file kept
    before the current hash carrying one of another."""
    return any(digest == compute(algorithm) for algorithm in HASHES)


#: The file that marks an index's directory (the index layer's manifest): a damaged
#: file's message names the command that rebuilds the index it lies in.
INDEX_MARKER = "manifest.json"
#: Bytes read per step while hashing.
_BLOCK = 1 << 20

FileRecord = dict[str, Any]


#: Digests this process computed, by the stat stamp of the file they were read from; at
#: most 1,024 (the least recently used go first): the files of several updates of an
#: index (each writes about 40 and checks BM25's), which a check told ``known`` then
#: takes without reading.
_KNOWN: Recent[tuple[int, ...], str] = Recent(1024)


def stat_stamp(path: Path) -> tuple[int, ...]:
    """``path``'s device, inode, size and modification and change times (ns): a write to
    the file, a ``touch``, or another file put at its path changes it; renaming the
    folder that holds it does not."""
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(path: Path, algorithm: str = ALGORITHM) -> str:
    """The digest of ``path``'s bytes that file records carry (:data:`ALGORITHM`, or
    another of :data:`HASHES`), read whole; remembered for :func:`file_record` where the
    file did not change meanwhile."""
    before = stat_stamp(path)
    digest = HASHES[algorithm]()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    found = digest.hexdigest()
    if algorithm == ALGORITHM and stat_stamp(path) == before:
        _remember(before, found)
    return found


def _remember(stamp: tuple[int, ...], digest: str) -> None:
    _KNOWN.put(stamp, digest)


def remember_saved(path: Path, array: npt.NDArray[Any]) -> None:
    """Remember the digest of the ``.npy`` file ``path`` that ``np.save`` has just
    written from ``array``, for :func:`file_record`: its header made again as numpy
    makes it (format 1.0, which numpy writes for every header under 64 KiB), its data
    hashed from ``array`` itself, nothing read back. Nothing is remembered of an array
    numpy writes otherwise than its bytes as they lie (not contiguous in C order, or of
    objects), or of a file whose size is not that header's and the data's."""
    if array.dtype.hasobject or not array.flags.c_contiguous:
        return
    made = io.BytesIO()
    npy_format.write_array_header_1_0(made, npy_format.header_data_from_array_1_0(array))
    head = made.getvalue()
    try:
        before = stat_stamp(path)
    except OSError:
        return
    if before[2] != len(head) + array.nbytes:
        return
    digest = HASHES[ALGORITHM]()
    digest.update(head)
    digest.update(array.reshape(-1).view(np.uint8).data)
    _remember(before, digest.hexdigest())


def save_recorded(path: Path, array: npt.NDArray[Any]) -> None:
    """``np.save(path, array)``, its digest remembered (:func:`remember_saved`)."""
    np.save(path, array)
    remember_saved(path, array)


def _known(stamp: tuple[int, ...]) -> str | None:
    """The digest remembered for a file of ``stamp``, kept as the most recently used."""
    return _KNOWN.get(stamp)


def copy_with_digest(source: Path, target: Path) -> str | None:
    """Copy ``source`` to ``target`` and return the :func:`file_digest` of what was
    copied, read once (None, and no ``target``, where there is no ``source``)."""
    digest = HASHES[ALGORITHM]()
    try:
        with source.open("rb") as src, target.open("wb") as out:
            while block := src.read(_BLOCK):
                digest.update(block)
                out.write(block)
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        return None
    return digest.hexdigest()


def file_record(path: Path) -> FileRecord:
    """The record of the file at ``path`` as it is now: its size and digest (one this
    process computed of the file as it is now, else read)."""
    stamp = stat_stamp(path)  # one stat: the size is its third field
    return {"size": stamp[2], ALGORITHM: _known(stamp) or file_digest(path)}


def record_files(directory: Path, names: Iterable[str]) -> dict[str, FileRecord]:
    """Records of the files ``names`` (paths relative to ``directory``)."""
    return {name: file_record(directory / name) for name in names}


def damaged(path: Path, reason: str, *, rebuild: str = "") -> IndexDamagedError:
    """The error for the damaged file ``path``: named within the index holding it (the
    nearest folder above it with an index manifest), whose rebuild command it gives
    unless ``rebuild`` says another."""
    root = next((p for p in path.parents if (p / INDEX_MARKER).is_file()), None)
    if root is None:
        return IndexDamagedError(str(path), reason, rebuild=rebuild)
    hint = rebuild or f"quillian index CORPUS --out {root}"
    name = path.relative_to(root).as_posix()
    return IndexDamagedError(str(path), reason, rebuild=hint, name=name)


def check_size(path: Path, record: Mapping[str, Any] | None, *, rebuild: str = "") -> None:
    """Raise :class:`IndexDamagedError` when ``path`` is missing or its size is not the
    recorded one (nothing to check without a record). ``rebuild`` is the command the
    message names (by default, that of the index holding ``path``)."""
    if not record:
        return
    try:
        found = path.stat().st_size
    except OSError:
        raise damaged(path, "missing", rebuild=rebuild) from None
    expected = int(record.get("size", -1))
    if found != expected:
        what = "truncated" if found < expected else "grown"
        reason = f"{what}: expected {expected} bytes, found {found}"
        raise damaged(path, reason, rebuild=rebuild)


def check_digest(
    path: Path, record: Mapping[str, Any] | None, *, rebuild: str = "", known: bool = False
) -> None:
    """Raise :class:`IndexDamagedError` when ``path`` differs from ``record`` in size or
    digest, by each hash of :data:`HASHES` the record names (a record naming none checks
    the size only); ``known``: a digest this process remembered for the file as it is
    now is taken (see the module's docstring), not read again."""
    check_size(path, record, rebuild=rebuild)
    for algorithm in HASHES:
        want = (record or {}).get(algorithm)
        if not want:
            continue
        if known and algorithm == ALGORITHM:  # the remembered digest, else read
            found = file_record(path)[ALGORITHM]
        else:
            found = file_digest(path, algorithm)
        if found != want:
            raise damaged(path, "checksum mismatch", rebuild=rebuild)


def verify_files(
    directory: Path,
    records: Mapping[str, Mapping[str, Any]],
    *,
    rebuild: str = "",
    hash_up_to: int | None = None,
    known: bool = False,
) -> list[str]:
    """Check the files ``records`` names under ``directory``: every size, and the digest
    of each file of at most ``hash_up_to`` bytes (every file when None; ``known``: see
    :func:`check_digest`). Returns the names whose digest was left for a later check."""
    left = []
    for name, record in sorted(records.items()):
        path = directory / name
        if hash_up_to is not None and int(record.get("size", 0)) > hash_up_to:
            check_size(path, record, rebuild=rebuild)
            left.append(name)
        else:
            check_digest(path, record, rebuild=rebuild, known=known)
    return left


def walk_files(directory: Path, skip: Iterable[str] = ()) -> list[str]:
    """Every regular file under ``directory`` as a relative POSIX path, leaving out the
    top-level names in ``skip``, hidden files and folders, and temporary ones (``.tmp``,
    ``.part``)."""
    skipped = set(skip)
    found = []
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        top = here == directory
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and not d.endswith(".tmp") and not (top and d in skipped)
        )
        for name in sorted(files):
            if name.startswith(".") or name.endswith((".tmp", ".part")):
                continue
            if top and name in skipped:
                continue
            found.append((here / name).relative_to(directory).as_posix())
    return found
