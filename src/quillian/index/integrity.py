"""An index's files checked against what was written: the manifest's records of the
files beside the stores, and SQLite's own check of ``store.sqlite``.

SQLite's check reads the whole database (0.3-0.4 s for the store of 100k passages, as
much for the graph stage's resolution state), so it is not repeated on a database no
one has written since a build left it: a build's end records each database's stat
stamp (device, inode, size, modification and change times) in :data:`CHECKED`, a
machine-local file at the index root, and a database whose stamp is still the one
recorded there (:func:`unchanged_since_build`) is trusted as that build left it. Any
write (by SQLite or not, a hot journal or write-ahead log left behind, a file put in
its place, ``touch``) changes the stamp, and the next build or open checks it whole.
The same record keeps the graph tables' digest with their stamp, so the next update's
check that they are the tables the resolution state follows reads them only where they
changed since (:func:`recorded_digest`).

The stores record and check their own files (a vector collection in its ``index.json``,
the graph snapshot in its ``snapshot.json``, see :mod:`quillian.stores.integrity`). The
files the build writes beside them, under :data:`RECORDED` (the graph tables, whatever
format they take, and the BM25 index), are recorded in the manifest under :data:`FILES`
when a build completes, and checked when the index opens and before a build reuses it.
A manifest without records (an index built before them) is trusted, and its next build
writes them.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from quillian.errors import IndexDamagedError
from quillian.index.artifacts import PARTIAL
from quillian.index.tables import TABLES_DB
from quillian.stores.embedded.sqlite import quick_check, wal_mode
from quillian.stores.integrity import (
    ALGORITHM,
    damaged,
    file_record,
    record_files,
    stat_stamp,
    verify_files,
    walk_files,
)

__all__ = [
    "FILES",
    "QUICK_CHECK_AT_OPEN",
    "RECORDED",
    "STORE_DB",
    "check_database",
    "check_files",
    "check_store_files",
    "check_tables_database",
    "drop_damaged_tables",
    "files_intact",
    "rebuild_command",
    "record_checked",
    "record_index_files",
    "recorded_digest",
    "unchanged_since_build",
]

logger = logging.getLogger(__name__)

#: The manifest key holding each recorded file's size and checksum, by relative path.
FILES = "files"
#: Folders of an index whose files the manifest records (those under ``graph/`` and
#: ``vectors/`` are recorded by their stores).
RECORDED = ("tables", "bm25")
#: Folders whose stores record their own files, and the names of those records.
SELF_CHECKED = ("graph", "vectors")
STORE_RECORDS = ("index.json", "snapshot.json")
#: The database of an embedded index.
STORE_DB = "store.sqlite"
#: What SQLite keeps beside a database in write-ahead-log mode.
_LOGS = ("-wal", "-shm")
#: Machine-local record of the databases a build left, by their stat stamps (see the
#: module's docstring); a PostgreSQL workspace does not send it.
CHECKED = "checked.json"
#: Databases up to this size get SQLite's ``quick_check`` when the index opens; a build
#: checks it whatever its size (either, unless it is unchanged since a build).
QUICK_CHECK_AT_OPEN = 128 << 20  # 0.1 s for a 71 MB store (1.4 ms a megabyte)


def rebuild_command(name: str) -> str:
    """The command that rebuilds the files of the index ``name`` (a directory, or a server
    location without its password): indexing its corpus again skips the documents it
    stores and, finding a file damaged, rebuilds every file from them."""
    return f"quillian index CORPUS --out {name}"


def record_index_files(directory: Path) -> dict[str, dict[str, Any]]:
    """Records of every file under ``directory``'s :data:`RECORDED` folders but the
    graph tables' database where it is patched where it is
    (:func:`~quillian.stores.embedded.sqlite.wal_mode`) and its log: SQLite checks that
    (:func:`check_tables_database`), and its digest would read it whole at every
    update."""
    names = [
        f"{folder}/{name}"
        for folder in RECORDED
        if (directory / folder).is_dir()
        for name in walk_files(directory / folder)
    ]
    if wal_mode(directory / TABLES_DB):
        left = {TABLES_DB, *(TABLES_DB + tail for tail in _LOGS)}
        names = [name for name in names if name not in left]
    return record_files(directory, names)


def check_files(
    directory: Path,
    manifest: Mapping[str, Any],
    name: str,
    *,
    hash_up_to: int | None = None,
    known: bool = False,
) -> None:
    """Check the files ``manifest`` records under ``directory`` (the index ``name``):
    every size, and the digest of each file of at most ``hash_up_to`` bytes (all when
    None; ``known``: see :func:`~quillian.stores.integrity.check_digest`); raises
    :class:`IndexDamagedError` naming the first that differs."""
    records = manifest.get(FILES)
    if not isinstance(records, dict):
        return
    try:
        verify_files(
            directory, records, rebuild=rebuild_command(name), hash_up_to=hash_up_to, known=known
        )
    except IndexDamagedError as exc:  # named within the index
        within = Path(exc.path).relative_to(directory).as_posix()
        raise IndexDamagedError(exc.path, exc.reason, rebuild=exc.rebuild, name=within) from None


def check_store_files(directory: Path, name: str) -> None:
    """Check, whole, the files the stores under ``directory``'s :data:`SELF_CHECKED`
    folders record in their own records (:data:`STORE_RECORDS`)."""
    for folder in SELF_CHECKED:
        for record in sorted((directory / folder).rglob("*.json")):
            if record.name not in STORE_RECORDS or any(
                p.startswith(".") for p in record.relative_to(directory).parts
            ):
                continue
            try:
                meta = json.loads(record.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                reason = f"unreadable: {exc}"
                raise damaged(record, reason, rebuild=rebuild_command(name)) from exc
            files = meta.get("files") if isinstance(meta, dict) else None
            if isinstance(files, dict):
                verify_files(record.parent, files, rebuild=rebuild_command(name))


def files_intact(directory: Path, manifest: Mapping[str, Any], name: str) -> bool:
    """Whether every recorded file of the index ``name`` at ``directory`` (the
    manifest's and the stores' own) is as written: a build reuses an index's files only
    then. A damaged one is logged."""
    try:
        check_files(directory, manifest, name)
        check_store_files(directory, name)
    except IndexDamagedError as exc:
        logger.warning("%s: rebuilding", exc)
        return False
    return True


def check_database(directory: Path, *, up_to: int | None = QUICK_CHECK_AT_OPEN) -> None:
    """SQLite's ``quick_check`` of an embedded index's database, when it is at most
    ``up_to`` bytes (always when None) and not unchanged since a build left it; raises
    :class:`IndexDamagedError` naming it."""
    if (db := _to_check(directory, STORE_DB, up_to)) is not None:
        quick_check(db)


def check_tables_database(directory: Path, *, up_to: int | None = QUICK_CHECK_AT_OPEN) -> None:
    """SQLite's ``quick_check`` of the graph tables' database where it is patched where
    it is (:func:`~quillian.stores.embedded.sqlite.wal_mode`; the manifest records no
    digest of it), when it is at most ``up_to`` bytes (always when None) and not
    unchanged since a build left it; raises :class:`IndexDamagedError` naming it, with
    the command that rebuilds it from the documents stored
    (:func:`drop_damaged_tables`)."""
    if not wal_mode(directory / TABLES_DB):  # else checked by its recorded digest
        return
    if (db := _to_check(directory, TABLES_DB, up_to)) is not None:
        try:
            quick_check(db)
        except IndexDamagedError as exc:
            raise damaged(db, exc.reason) from None


def _to_check(directory: Path, name: str, up_to: int | None) -> Path | None:
    """The database ``name`` under ``directory`` where SQLite's check of it is due: it
    exists, is not unchanged since a build left it, and is at most ``up_to`` bytes
    (any size when None)."""
    db = directory / name
    if not db.is_file() or unchanged_since_build(directory, name):
        return None
    return db if up_to is None or db.stat().st_size <= up_to else None


def drop_damaged_tables(directory: Path) -> bool:
    """Remove the graph tables' database of the index at ``directory`` where
    :func:`check_tables_database` finds it damaged (a warning): the build that calls
    this then writes the tables whole from its documents. Returns whether it did."""
    try:
        check_tables_database(directory, up_to=None)
    except IndexDamagedError as exc:
        logger.warning("%s: the graph tables are written again", exc)
        for tail in ("", *_LOGS):
            (directory / (TABLES_DB + tail)).unlink(missing_ok=True)
        return True
    return False


def _stamp(path: Path) -> list[int] | None:
    """The stat stamp of the database at ``path``, with the write-ahead log's beside it
    where the log holds pages (a commit may write only there, and a reader's snapshot
    may keep a patched database's pages there after its update): its device, inode,
    size and modification time, not its change time, which a reader opening it as root
    changes (SQLite gives the log the database's owner); None where it is missing."""
    try:
        stamp = list(stat_stamp(path))
    except FileNotFoundError:
        return None
    with contextlib.suppress(FileNotFoundError):
        log = stat_stamp(path.with_name(path.name + "-wal"))
        if log[2]:
            stamp += log[:4]
    return stamp


def _recorded(directory: Path, name: str) -> dict[str, Any] | None:
    """What :func:`record_checked` recorded of ``name`` under ``directory``, where the
    file's stamp is still the recorded one."""
    stamp = _stamp(directory / name)
    if stamp is None:
        return None
    try:
        recorded = json.loads((directory / CHECKED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = recorded.get(name) if isinstance(recorded, dict) else None
    return entry if isinstance(entry, dict) and entry.get("stamp") == stamp else None


def unchanged_since_build(directory: Path, name: str) -> bool:
    """Whether the database ``name`` under ``directory`` is as the last complete build
    left it (its stamp the one :func:`record_checked` recorded)."""
    return _recorded(directory, name) is not None


def recorded_digest(directory: Path, name: str) -> str | None:
    """The digest of the file ``name`` under ``directory`` as the last complete build
    recorded it, where the file is unchanged since (else None: read it)."""
    digest = (_recorded(directory, name) or {}).get(ALGORITHM)
    return digest if isinstance(digest, str) else None


def record_checked(directory: Path, databases: Iterable[str], digested: Iterable[str] = ()) -> None:
    """Record the stamps of the databases ``databases`` under ``directory``, as a
    complete build leaves them (each checked or trusted when the build began, and
    written since only by SQLite), and the stamps and digests of the files
    ``digested``. A record that cannot be written is a warning: the next build checks
    and reads them whole."""
    entries: dict[str, dict[str, Any]] = {}
    for name in databases:
        if (stamp := _stamp(directory / name)) is not None:
            entries[name] = {"stamp": stamp}
    for name in digested:
        if (path := directory / name).is_file():
            if wal_mode(path):  # patched where it is: checked by SQLite, not by a digest
                if (stamp := _stamp(path)) is not None:
                    entries[name] = {"stamp": stamp}
                continue
            entries[name] = {"stamp": list(stat_stamp(path)), **file_record(path)}
    tmp = directory / (CHECKED + PARTIAL)
    try:
        tmp.write_text(json.dumps(entries), encoding="utf-8")
        tmp.replace(directory / CHECKED)
    except OSError as exc:
        logger.warning("files' stamps not recorded at %s (%s)", directory / CHECKED, exc)
