"""The index's file artifacts (graph tables, BM25, a method's own files) kept in the
workspace's ``files`` table and mirrored in a local cache directory.

The build stages write files into the cache directory as they do into an embedded
index; :func:`push_files` uploads what changed (one transaction), :func:`pull_files`
brings the directory up to date with the server (only files whose hash differs). The
manifest lives in ``quillian_meta``, not among the files. ``.sync.json`` records, per
file, the hash last synchronised with its size and modification time, so an unchanged
file is neither hashed nor sent again; a cached file found damaged all the same (its
checksum in the index manifest differs) is fetched again by :func:`refetch_files`.

A file larger than one block (64 KB) travels by blocks: ``file_blocks`` holds each
distinct block once, keyed by its SHA-256, and the file's row lists its blocks. A build
that patches a few pages of ``tables/graph.sqlite`` (93 MB at 100k passages; a delete
changed 9 of its 1,426 blocks) sends the blocks it changed, not the file, and a replica
fetches only those, taking the rest from its own previous copy. The writer's record
keeps each block's XXH3 hash beside its SHA-256 too, so a changed file is read once and
only its changed blocks are hashed with SHA-256 again. Such a file is named by a hash of
its blocks' (:func:`_blocks_id`), not by a SHA-256 of its whole bytes, which a push
read and hashed whole (0.05-0.07 s of an update at 100k passages on PostgreSQL): a
replica checks each block it fetches against its SHA-256 and each block it takes from
its own copy against the XXH3 hash its record lists. Blocks no file lists
any more are deleted by the push that drops them; a reader lists and fetches in one
repeatable-read transaction, so it never misses a block a push removed meanwhile. Rows
of a workspace made before (the whole file in ``data``) are read as before and sent by
blocks once they change.

The graph tables' database is patched where it is (in SQLite's write-ahead-log mode,
its readers each holding a snapshot of it) and sent self-contained: where readers on
this machine kept its log from being copied back, the file alone lacks the build's
pages, and what is hashed and sent is the database as its readers see it, the file
with the log's pages put in (:mod:`quillian.stores.embedded.wal_image`), read where it
lies; a build used to copy the database with the log folded in for that (70 MB and
about 0.1 s of each served update at 100k passages). No file of a database's log or
shared memory (``-wal``, ``-shm``) is ever sent, fetched or removed. A fetched file
never replaces one in a folder holding such a database: SQLite finds a database's log
and shared memory by its name, so a file renamed over it would be read with the old
one's log. Such a folder is brought up to date in a copy (its other files linked, not
copied) that is swapped in whole; its readers keep what they opened (:class:`_Staged`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import xxhash

from quillian.errors import StoreError
from quillian.stores.embedded.files import replace_file
from quillian.stores.embedded.sqlite import copy_with_log, wal_bytes, wal_mode
from quillian.stores.embedded.wal_image import WalImage, wal_image
from quillian.stores.postgres._pg import FILE_BLOCKS_DDL, Workspace

__all__ = [
    "SKIPPED",
    "manifest_state",
    "pull_files",
    "push_files",
    "read_manifest",
    "refetch_files",
    "write_manifest",
]

_SYNC = ".sync.json"
#: The graph stage's entity-resolution state (``quillian.components.graph.incremental.
#: STATE_FILE``, with its journal, the file a new one is written to, and the graph's
#: integer columns kept beside it, ``quillian.index.state_tables.columns_path``),
#: machine-local: a machine without it, or with one another build left, builds it from
#: every chunk.
_RESOLUTION_FILES = tuple(
    f"graph_resolution.sqlite{tail}"
    for tail in ("", "-journal", ".partial", ".columns", ".columns.partial")
)
#: The vector keys of the graph's texts by text id and of the chunks by chunk id
#: (``quillian.index.text_keys``): caches, machine-local like the resolution state.
_TEXT_KEYS_FILES = tuple(
    f"{name}_keys_by_id.npz{tail}" for name in ("text", "chunk") for tail in ("", ".partial")
)
#: The processed chunks' catalog (``quillian.index.chunk_catalog.CATALOG_FILE``): it
#: follows a mark of the workspace's change log taken on this machine.
_CATALOG_FILES = ("chunk_catalog.npz", "chunk_catalog.npz.partial")
#: The databases' stat stamps as a build left them (``quillian.index.integrity.CHECKED``):
#: a stamp names this machine's file, nobody else's.
_CHECKED_FILES = ("checked.json", "checked.json.partial")
#: Held (``flock``) while a pull brings the cache up to date: a folder it swaps in whole
#: (:class:`_Staged`) is not swapped by two pulls at once.
_PULL_LOCK = ".pull.lock"
#: The files SQLite keeps beside a database in write-ahead-log mode: its log and its
#: shared memory, found by the database's name, never synchronised.
_LIVE_SUFFIXES = ("-wal", "-shm")
#: Top-level names of the cache directory that are not synchronised: the graph snapshot
#: (rebuilt from the graph tables), the manifest copy, the sync record itself, the
#: entity-resolution state, the texts' and chunks' vector keys, the chunk catalog and the
#: databases' stamps, the HTTP
#: server's job state (``quillian serve`` keeps it per machine) and the writer lock (its
#: ``flock`` works only while every process locks the same file: fetching the server's
#: files must never remove it).
SKIPPED = frozenset(
    {
        "graph",
        "manifest.json",
        "server",
        _SYNC,
        ".writer.lock",
        _PULL_LOCK,
        *_RESOLUTION_FILES,
        *_TEXT_KEYS_FILES,
        *_CATALOG_FILES,
        *_CHECKED_FILES,
    }
)
_MANIFEST_KEY = "manifest"
#: Bytes per block of a file sent by blocks (a file no larger is sent whole).
BLOCK = 1 << 16
#: Blocks fetched per query.
_FETCH = 256


def pull_files(workspace: Workspace, directory: Path, again: frozenset[str] = frozenset()) -> int:
    """Make ``directory`` hold the workspace's files; returns how many were fetched.
    ``again``: files fetched whatever the cache holds (none of their blocks taken from
    the cached copy)."""
    directory.mkdir(parents=True, exist_ok=True)
    with _pull_lock(directory), _Staged(directory) as staged:
        fetched = _pull(workspace, directory, again, staged)
        staged.swap()
    return fetched


def _pull(workspace: Workspace, directory: Path, again: frozenset[str], staged: _Staged) -> int:
    """:func:`pull_files`, writing each file where ``staged`` says."""
    with workspace.connection("read the index files") as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        blocked = _has_blocks(conn)
        remote = {
            path: (sha, blocks)
            for path, sha, blocks in conn.execute(
                f"SELECT path, sha256, {'blocks' if blocked else 'NULL'} FROM files"
            ).fetchall()
            if path.split("/")[0] not in SKIPPED  # an older version sent the writer lock
        }
        record = _record(directory)
        local = _scan(directory, record)
        for path in again:
            local.pop(path, None)
        stale = sorted(p for p, (sha, _) in remote.items() if local.get(p, ("",))[0] != sha)
        staged.replaced.update(directory / p for p in stale)
        for path in set(local) - set(remote):
            staged.target(path).unlink(missing_ok=True)
            record.pop(path, None)
        whole = [p for p in stale if remote[p][1] is None]
        if whole:
            rows = conn.execute(
                "SELECT path, data FROM files WHERE path = ANY(%s)", (whole,)
            ).fetchall()
            for path, data in rows:
                target = staged.target(path)
                _replace(target, [bytes(data)], remote[path][0])
                record[path] = _entry(target, remote[path][0])
        for path in stale:
            sha, blocks = remote[path]
            if blocks is not None:
                target = staged.target(path)
                quick: list[str] = []
                source = directory / path
                try:
                    parts = _assembled(conn, source, local.get(path), blocks, sha, quick)
                    _replace(target, parts, sha)
                except _Damaged:  # the cached copy's blocks were not what its record says
                    quick.clear()
                    _replace(target, _assembled(conn, source, None, blocks, sha, quick), sha)
                record[path] = [*_entry(target, sha), blocks, quick]
    _save_record(directory, {p: e for p, e in record.items() if p in remote})
    return len(stale)


@contextlib.contextmanager
def _pull_lock(directory: Path) -> Iterator[None]:
    """Hold :data:`_PULL_LOCK` of the cache ``directory`` (every pull takes it)."""
    with (directory / _PULL_LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Staged:
    """Where a pull writes each file of the cache ``directory``: where it lies (renamed
    over), or, in a folder below it that holds a database in write-ahead-log mode, in a
    copy of that folder, its files linked, swapped in whole by :meth:`swap` once every
    file is written (the old folder set aside and removed: readers of its files keep
    them open). A file a pull removes goes from the copy alike. Copies not swapped in
    are removed on exit. ``replaced``: the files the pull writes anew (by their place
    in the cache), only linked into a copy, whatever they are."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.copies: dict[Path, Path] = {}
        self.direct: set[Path] = set()
        self.replaced: set[Path] = set()

    def target(self, path: str) -> Path:
        """Where the file ``path`` (relative to the cache) is written."""
        target = self.directory / path
        folder = target.parent
        if folder == self.directory or folder in self.direct:
            return target
        if folder not in self.copies:
            if not folder.is_dir() or not any(wal_mode(db) for db in folder.glob("*.sqlite")):
                self.direct.add(folder)
                return target
            copy = folder.with_name(f"{folder.name}{_part()}.tmp")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(folder, copy, copy_function=self._linked, ignore=_not_linked)
            self.copies[folder] = copy
        return self.copies[folder] / target.relative_to(folder)

    def _linked(self, source: str, target: str) -> None:
        """A file of a folder's copy: linked, but for a database in write-ahead-log
        mode that the pull does not replace, copied with its log folded in. One
        database under two names would have a log and shared memory for each, and a
        writer through one name would copy its log back into the file under the
        readers of the other."""
        kept = Path(source) not in self.replaced
        if kept and source.endswith(".sqlite") and wal_mode(Path(source)):
            copy_with_log(Path(source), Path(target))
        else:
            os.link(source, target)

    def swap(self) -> None:
        """Swap each folder's copy in."""
        while self.copies:
            folder, copy = self.copies.popitem()
            aside = folder.with_name(f"{folder.name}{_part()}.old.tmp")
            folder.rename(aside)
            copy.rename(folder)
            shutil.rmtree(aside, ignore_errors=True)

    def __enter__(self) -> _Staged:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for copy in self.copies.values():
            shutil.rmtree(copy, ignore_errors=True)


def _not_linked(folder: str, names: list[str]) -> set[str]:
    """What a folder's copy leaves out (:class:`_Staged`): SQLite's log and shared
    memory, and temporary files."""
    return {n for n in names if n.endswith((*_LIVE_SUFFIXES, ".tmp", ".part"))}


def _assembled(
    conn: psycopg.Connection[Any],
    target: Path,
    old: list[Any] | None,
    blocks: list[str],
    sha: str,
    quick: list[str],
) -> Iterator[bytes]:
    """The blocks ``blocks`` in order: those the cached copy ``target`` (recorded as
    ``old``; a database's as its readers see it, :func:`_blocks_of`) holds read from
    it, the others fetched a batch at a time in file order;
    each block's XXH3 hash appended to ``quick``. Where the file's id ``sha`` is made of
    its blocks' (:func:`_blocks_id`), each block is checked as it comes (a fetched one
    against its SHA-256, one of the copy against the XXH3 hash its record lists):
    :class:`_Damaged` where one differs."""
    by_blocks = sha.startswith(_BLOCKS_ID)
    if by_blocks and _blocks_id(blocks) != sha:
        raise _Damaged(f"{target.name}: the server lists blocks that are not the file's")
    have: dict[str, int] = {}
    checks: list[str] = []
    with contextlib.ExitStack() as stack:
        read = None
        if old is not None and target.exists():
            try:
                read = stack.enter_context(_blocks_of(target))
                known = old[3] if len(old) > 3 else _block_hashes(target)
            except StoreError:  # not readable as its readers see it: every block fetched
                read = None
            else:
                have = {h: i for i, h in reversed(list(enumerate(known)))}
                checks = old[4] if len(old) > 4 and len(old[4]) == len(known) else []
        order = list(dict.fromkeys(h for h in blocks if h not in have))
        position = {h: i for i, h in enumerate(order)}
        repeated = {h for h, n in Counter(blocks).items() if n > 1 and h in position}
        kept: dict[str, bytes] = {}  # fetched blocks the file holds more than once
        fetched: dict[str, bytes] = {}
        for at, block in enumerate(blocks):
            if read is not None and block in have:
                data = read(have[block])
                quick.append(xxhash.xxh3_128_hexdigest(data))
                if by_blocks and (not checks or quick[-1] != checks[have[block]]):
                    if not checks and _block_sha(data) == block:
                        yield data
                        continue
                    raise _Damaged(f"{target.name}: the cached copy's block {at} is damaged")
                yield data
                continue
            if block not in kept and block not in fetched:
                want = order[position[block] : position[block] + _FETCH]
                rows = conn.cursor(binary=True).execute(
                    "SELECT sha256, data FROM file_blocks WHERE sha256 = ANY(%s)", (want,)
                )
                fetched = {h: bytes(d) for h, d in rows}
                if block not in fetched:
                    raise StoreError(f"{target.name}: block {at} ({block}) is not on the server")
                if by_blocks and any(_block_sha(d) != h for h, d in fetched.items()):
                    raise _Damaged(f"{target.name}: the copy read from the server is damaged")
            data = kept[block] if block in kept else fetched[block]
            if block in repeated:
                kept[block] = data
            quick.append(xxhash.xxh3_128_hexdigest(data))
            yield data


class _Damaged(StoreError):
    """A file assembled from the server's blocks (and the cache's) is not the file."""


def _replace(target: Path, parts: Iterable[bytes], sha: str) -> None:
    """Write ``parts`` to ``target`` through a temporary file, checked against ``sha``
    (a whole file's SHA-256; an id made of the blocks' hashes is checked block by block
    by :func:`_assembled` as the parts come)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + _part())
    whole = not sha.startswith(_BLOCKS_ID)
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as handle:
            for part in parts:
                if whole:
                    digest.update(part)
                handle.write(part)
        if whole and digest.hexdigest() != sha:
            raise _Damaged(f"{target.name}: the copy read from the server is damaged")
        replace_file(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def refetch_files(workspace: Workspace, directory: Path, paths: list[str]) -> int:
    """Fetch ``paths`` (relative to ``directory``) from the server again, whatever the
    cache's record says of them; returns how many were fetched."""
    record = _record(directory)
    for path in paths:
        record.pop(path, None)
    _save_record(directory, record)
    return pull_files(workspace, directory, frozenset(paths))


def push_files(workspace: Workspace, directory: Path) -> int:
    """Upload the files of ``directory`` that changed (by the blocks the server lacks)
    and forget removed ones, in one transaction; returns how many were sent."""
    if not directory.is_dir():
        return 0
    record = _record(directory)
    local = _scan(directory, record)
    changed = [p for p, entry in local.items() if record.get(p, [""])[0] != entry[0]]
    removed = [p for p in record if p not in local]
    if not changed and not removed:
        return 0
    with workspace.connection("store the index files") as conn:
        if not _has_blocks(conn):
            for statement in FILE_BLOCKS_DDL:
                conn.execute(statement)
        if removed:
            conn.execute("DELETE FROM files WHERE path = ANY(%s)", (removed,))
        for path in changed:
            sha = local[path][0]
            if len(local[path]) <= 3:  # hashed whole (:func:`_hashed`)
                with _blocks_of(directory / path) as read:
                    data, blocks = read(0, None), None
            else:
                data, blocks = b"", _send_blocks(conn, directory / path, local[path])
            conn.execute(
                "INSERT INTO files (path, sha256, data, blocks) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256,"
                " data = excluded.data, blocks = excluded.blocks",
                (path, sha, data, blocks),
            )
        conn.execute(
            "DELETE FROM file_blocks WHERE sha256 NOT IN"
            " (SELECT unnest(blocks) FROM files WHERE blocks IS NOT NULL)"
        )
    _save_record(directory, local)
    return len(changed)


def _send_blocks(conn: psycopg.Connection[Any], path: Path, entry: list[Any]) -> list[str]:
    """The blocks of ``path`` (as its scan ``entry`` lists them, else hashed now), those
    the server lacks sent; returns their hashes."""
    blocks: list[str] = entry[3]
    present = {
        row[0]
        for row in conn.execute(
            "SELECT sha256 FROM file_blocks WHERE sha256 = ANY(%s)", (sorted(set(blocks)),)
        )
    }
    sent = set(present)
    with (
        _blocks_of(path) as read,
        conn.cursor().copy("COPY file_blocks (sha256, data) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["text", "bytea"])
        for at, block in enumerate(blocks):
            if block not in sent:
                copy.write_row((block, read(at)))
                sent.add(block)
    return blocks


@contextlib.contextmanager
def _blocks_of(path: Path, image: WalImage | None = None) -> Iterator[Callable[..., bytes]]:
    """A reader of the bytes ``path`` stands for, ``read(index)`` its ``index``-th
    :data:`BLOCK` (``read(0, None)``: all of them): the file's, or for a database whose
    write-ahead log holds pages the file lacks, the database as its readers see it
    (:func:`_image`, or ``image`` where it was found already)."""
    image = image or _image(path)
    if image is not None:
        with image.reading() as block:
            yield lambda index, size=BLOCK: block(index, size or image.size)
        return
    with path.open("rb") as handle:

        def read(index: int, size: int | None = BLOCK) -> bytes:
            handle.seek(index * (size or 0))
            return handle.read(size or -1)

        yield read


def _image(path: Path) -> WalImage | None:
    """Where ``path`` is a database in write-ahead-log mode whose log holds pages the
    file lacks (a reader of the writer's own held a snapshot, so SQLite could not copy
    them back), the database its readers see (:func:`~quillian.stores.embedded.
    wal_image.wal_image`): what is hashed and sent, so that the file on the server holds
    every page of the build, and no copy of the database is made to fold the log in."""
    if not path.name.endswith(".sqlite") or not wal_bytes(path):
        return None
    return wal_image(path)


def _block_hashes(path: Path) -> list[str]:
    """The SHA-256 of each :data:`BLOCK` of what ``path`` stands for (:func:`_blocks_of`)."""
    hashes: list[str] = []
    with _blocks_of(path) as read:
        while block := read(len(hashes)):
            hashes.append(_block_sha(block))
    return hashes


def _stamp(path: Path) -> list[Any]:
    """What tells that ``path`` is as its record's entry saw it: its size and time, and
    for a database whose write-ahead log holds bytes (what it stands for is the file
    with the log's pages, :func:`_image`), the log's size and time with its time."""
    stat = path.stat()
    if path.name.endswith(".sqlite") and (log := wal_bytes(path)):
        wal = path.with_name(path.name + "-wal").stat()
        return [stat.st_size, [stat.st_mtime_ns, log, wal.st_mtime_ns]]
    return [stat.st_size, stat.st_mtime_ns]


def _block_sha(block: bytes) -> str:
    """A block's key in ``file_blocks``."""
    return hashlib.sha256(block).hexdigest()


def _has_blocks(conn: psycopg.Connection[Any]) -> bool:
    """Whether the workspace sends files by blocks (made, or first pushed to, since)."""
    return conn.execute("SELECT to_regclass('file_blocks') IS NOT NULL").fetchone() == (True,)


def read_manifest(workspace: Workspace) -> dict[str, Any] | None:
    """The workspace's manifest, or ``None`` when it has none."""
    raw = workspace.meta(_MANIFEST_KEY)
    return None if raw is None else dict(json.loads(raw))


def manifest_state(workspace: Workspace) -> tuple[int, str] | None:
    """The stored manifest's generation and state (``building`` or ``complete``), or
    ``None`` when there is none: one indexed read of two fields, cheap enough for every
    replica to poll twice a second (the manifest itself lists every file)."""
    with workspace.connection("read the manifest's generation", transaction=False) as conn:
        row = conn.execute(
            "SELECT coalesce((value::jsonb ->> 'generation')::bigint, 0), "
            "coalesce(value::jsonb ->> 'state', '') FROM quillian_meta WHERE key = %s",
            (_MANIFEST_KEY,),
        ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def write_manifest(workspace: Workspace, manifest: dict[str, Any]) -> None:
    """Replace the workspace's manifest (one statement, so atomically)."""
    workspace.set_meta(_MANIFEST_KEY, json.dumps(manifest, sort_keys=True))


def _scan(directory: Path, record: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Every synchronised file under ``directory``: relative path to [sha, size, mtime]
    (and the block hashes its record has); a file whose size and time match its record
    is not hashed again."""
    out: dict[str, list[Any]] = {}
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        if here == directory:
            dirs[:] = [d for d in dirs if d not in SKIPPED]
        dirs[:] = [d for d in dirs if not d.endswith(".tmp")]
        for name in files:
            path = here / name
            rel = path.relative_to(directory).as_posix()
            if rel in SKIPPED or name.endswith((".part", *_LIVE_SUFFIXES)):
                continue
            try:
                known = record.get(rel)
                if known and known[1:3] == _stamp(path):
                    out[rel] = known
                else:
                    out[rel] = _hashed(path, known)
            except FileNotFoundError:  # another reader removed it (the server has none)
                continue
    return out


def _entry(path: Path, sha: str) -> list[Any]:
    return [sha, *_stamp(path)]


def _hashed(path: Path, known: list[Any] | None) -> list[Any]:
    """The record entry of ``path`` as it is now: its id and stamp (:func:`_stamp`), and
    for a file larger than a block its blocks' SHA-256 and XXH3-128 hashes, the file read
    once (a database whose log holds pages the file lacks: as its readers see it,
    :func:`_blocks_of`). A block whose XXH3 hash the file's entry before (``known``)
    lists takes the SHA-256 listed with it rather than hashing it again: a patch of the
    graph tables changes a few of their 1,426 blocks at 100k passages, and XXH3 hashes
    18 times faster than SHA-256 here (research/file_hashes.py). Such a file's id is its
    blocks' (:func:`_blocks_id`); a file of one block is named by its SHA-256."""
    image = _image(path)  # its passive checkpoint first: it may write the file
    entry = _entry(path, "")  # stamped before it is read: a change meanwhile is seen next
    size = image.size if image is not None else path.stat().st_size
    if size <= BLOCK:
        with _blocks_of(path, image) as read:
            return [hashlib.sha256(read(0, None)).hexdigest(), *entry[1:]]
    blocks: list[str] = []
    quick: list[str] = []
    before: dict[str, str] = {}
    if known and len(known) > 4 and len(known[3]) == len(known[4]):  # else: hash every block
        before = dict(zip(known[4], known[3], strict=True))
    with _blocks_of(path, image) as read:
        for index in range(-(-size // BLOCK)):
            block = read(index)
            quick.append(xxhash.xxh3_128_hexdigest(block))
            found = before.get(quick[-1])
            blocks.append(found if found else _block_sha(block))
    return [_blocks_id(blocks), *entry[1:], blocks, quick]


def _blocks_id(blocks: list[str]) -> str:
    """The id of a file whose blocks have the SHA-256 ``blocks``, in order: a SHA-256 of
    those (equal blocks in the same order are the same bytes), marked apart from a whole
    file's SHA-256."""
    return _BLOCKS_ID + hashlib.sha256("\n".join(blocks).encode("ascii")).hexdigest()


#: What begins a file id made of its blocks' hashes (:func:`_blocks_id`).
_BLOCKS_ID = "blocks:"


def _record(directory: Path) -> dict[str, list[Any]]:
    try:
        return dict(json.loads((directory / _SYNC).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _part() -> str:
    """A temporary file's suffix of this thread's own: readers in two threads may bring
    one cache up to date at once."""
    return f".{os.getpid()}-{threading.get_ident()}.part"


def _save_record(directory: Path, record: dict[str, list[Any]]) -> None:
    tmp = directory / (_SYNC + _part())
    tmp.write_text(json.dumps(record, sort_keys=True), encoding="utf-8")
    tmp.replace(directory / _SYNC)
