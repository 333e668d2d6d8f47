"""The index's file artifacts (graph tables, BM25, a method's own files) kept in the
workspace's ``files`` table and mirrored in a local cache directory.

The build stages write files into the cache directory as they do into an embedded
index; :func:`push_files` uploads what changed (one transaction), :func:`pull_files`
brings the directory up to date with the server (only files whose hash differs). The
manifest lives in ``quillian_meta``, not among the files. ``.sync.json`` records, per
file, the hash last synchronised with its size and modification time, so an unchanged
file is neither hashed nor sent again; a cached file found damaged all the same (its
checksum in the index manifest differs) is fetched again by :func:`refetch_files`.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from quillian.stores.postgres._pg import Workspace

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
#: STATE_FILE``, with its journal and the file a new one is written to), machine-local:
#: a machine without it, or with one another build left, builds it from every chunk.
_RESOLUTION_FILES = tuple(f"graph_resolution.sqlite{tail}" for tail in ("", "-journal", ".partial"))
#: Top-level names of the cache directory that are not synchronised: the graph snapshot
#: (rebuilt from the graph tables), the manifest copy, the sync record itself, the
#: entity-resolution state, the HTTP server's job state (``quillian serve`` keeps it
#: per machine) and the writer lock (its ``flock`` works only while every process
#: locks the same file: fetching the server's files must never remove it).
SKIPPED = frozenset(
    {
        "graph",
        "manifest.json",
        "server",
        _SYNC,
        ".writer.lock",
        *_RESOLUTION_FILES,
    }
)
_MANIFEST_KEY = "manifest"


def pull_files(workspace: Workspace, directory: Path) -> int:
    """Make ``directory`` hold the workspace's files; returns how many were fetched."""
    directory.mkdir(parents=True, exist_ok=True)
    with workspace.connection("list the index files") as conn:
        remote = {
            path: sha
            for path, sha in conn.execute("SELECT path, sha256 FROM files").fetchall()
            if path.split("/")[0] not in SKIPPED  # an older version sent the writer lock
        }
    record = _record(directory)
    local = _scan(directory, record)
    stale = sorted(p for p, sha in remote.items() if local.get(p, ("",))[0] != sha)
    for path in set(local) - set(remote):
        (directory / path).unlink(missing_ok=True)
        record.pop(path, None)
    if stale:
        with workspace.connection("read the index files") as conn:
            rows = conn.execute(
                "SELECT path, sha256, data FROM files WHERE path = ANY(%s)", (stale,)
            ).fetchall()
        for path, sha, data in rows:
            target = directory / path
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + _part())
            tmp.write_bytes(bytes(data))
            tmp.replace(target)
            record[path] = _entry(target, sha)
    _save_record(directory, {p: e for p, e in record.items() if p in remote})
    return len(stale)


def refetch_files(workspace: Workspace, directory: Path, paths: list[str]) -> int:
    """Fetch ``paths`` (relative to ``directory``) from the server again, whatever the
    cache's record says of them; returns how many were fetched."""
    record = _record(directory)
    for path in paths:
        (directory / path).unlink(missing_ok=True)
        record.pop(path, None)
    _save_record(directory, record)
    return pull_files(workspace, directory)


def push_files(workspace: Workspace, directory: Path) -> int:
    """Upload the files of ``directory`` that changed and forget removed ones, in one
    transaction; returns how many were sent."""
    if not directory.is_dir():
        return 0
    record = _record(directory)
    local = _scan(directory, record)
    changed = [p for p, entry in local.items() if record.get(p, [""])[0] != entry[0]]
    removed = [p for p in record if p not in local]
    if not changed and not removed:
        return 0
    with workspace.connection("store the index files") as conn:
        if removed:
            conn.execute("DELETE FROM files WHERE path = ANY(%s)", (removed,))
        for path in changed:
            conn.execute(
                "INSERT INTO files (path, sha256, data) VALUES (%s, %s, %s) ON CONFLICT (path) "
                "DO UPDATE SET sha256 = excluded.sha256, data = excluded.data",
                (path, local[path][0], (directory / path).read_bytes()),
            )
    _save_record(directory, local)
    return len(changed)


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
    """Every synchronised file under ``directory``: relative path to [sha, size, mtime];
    a file whose size and time match its record is not hashed again."""
    out: dict[str, list[Any]] = {}
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        if here == directory:
            dirs[:] = [d for d in dirs if d not in SKIPPED]
        dirs[:] = [d for d in dirs if not d.endswith(".tmp")]
        for name in files:
            path = here / name
            rel = path.relative_to(directory).as_posix()
            if rel in SKIPPED or name.endswith(".part"):
                continue
            try:
                stat = path.stat()
                known = record.get(rel)
                if known and known[1:] == [stat.st_size, stat.st_mtime_ns]:
                    out[rel] = known
                else:
                    out[rel] = _entry(path, _sha256(path))
            except FileNotFoundError:  # another reader removed it (the server has none)
                continue
    return out


def _entry(path: Path, sha: str) -> list[Any]:
    stat = path.stat()
    return [sha, stat.st_size, stat.st_mtime_ns]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
