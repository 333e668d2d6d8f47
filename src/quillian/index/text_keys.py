"""The vector keys of the graph's texts and of the chunks, kept between builds by id.

A text's vector key (:func:`~quillian.components.retrieval.keyed.vector_keys`) hashes
the embedding model's id with the text; its id in the tables
(:func:`~quillian.types.key64`) hashes the text alone. Every build keys every distinct
description and relation text of the graph (about 200,000 at 100k passages), and
without this file each would be read from the tables and hashed again. The file holds
the key of each text id under one model, so a build reads and hashes only the texts it
has not keyed before.

Both files cache a pure function. A text key is right whichever build wrote it, so the
texts' file is tied to no tables. A chunk's vector key hashes its id, title and text;
its id names its text but not its title (a document given its own id may change
title). So the chunks' file (:data:`CHUNK_KEYS_FILE`, by :func:`~quillian.types.key64`
of the chunk id), which spares an update reading every chunk's text to key it, is
tagged with the build whose linking state it follows
(:class:`~quillian.index.linking.ExtractionDelta`) and serves only the build whose
delta follows that one, which names the chunks retitled since: those, and every chunk
of a build with another delta, are keyed from their texts.

A file of another model, or one that does not read or whose checksum fails, is ignored
(every text or chunk keyed again) and written anew; one that cannot be written is a
warning. They are machine-local like the resolution state: a PostgreSQL workspace never
synchronises them (:data:`quillian.stores.postgres.files.SKIPPED`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.keyed import vector_keys
from quillian.index.artifacts import (
    load_arrays,
    recall,
    remember,
    save_arrays,
    settle,
    write_aside,
    write_later,
)
from quillian.index.chunk_table import ChunkMoves
from quillian.stores.integrity import ALGORITHM, HASHES, digest_matches
from quillian.stores.snapshot import distinct_order

__all__ = [
    "CHUNK_KEYS_FILE",
    "KEYS_FILE",
    "ChunkKeys",
    "carried_text_keys",
    "chunk_keys",
    "text_keys",
]

logger = logging.getLogger(__name__)

#: The file, at the index root.
KEYS_FILE = "text_keys_by_id.npz"
_VERSION = "text-keys-1"
#: The chunks' keys, at the index root.
CHUNK_KEYS_FILE = "chunk_keys_by_id.npz"
_CHUNK_VERSION = "chunk-keys-2"
_CHUNK_VERSION_1 = "chunk-keys-1"
#: Between the build and the chunk table a chunk keys file is tagged with.
_SEP = "\t"

Ids = npt.NDArray[np.int64]


def text_keys(directory: Path, model_id: str, ids: Ids, read: Callable[[Ids], list[str]]) -> Ids:
    """The vector key under ``model_id`` of each text of ``ids`` (distinct text ids);
    ``read`` gives the texts at positions of ``ids``, and is asked only for those whose
    key is not kept. Keeps exactly the keys of ``ids`` for the next build."""
    path = directory / KEYS_FILE
    kept_ids, kept_keys = _load(path, model_id)
    keys, missing = _kept(ids, kept_ids, kept_keys)
    if len(missing):
        keys[missing] = vector_keys(model_id, read(missing))
    if len(missing) or len(kept_ids) != len(ids):  # else the same ids: the file holds them
        write_aside(path, lambda: _save(path, model_id, ids, keys))
    return keys


def carried_text_keys(
    directory: Path,
    model_id: str,
    texts: tuple[Ids, Ids],
    kept: Ids,
    moved: Ids,
    added: Ids,
    read: Callable[[Ids], list[str]],
) -> Ids:
    """The vector keys under ``model_id`` of distinct texts carried from a build's
    (:mod:`~quillian.index.distinct_texts`): each kept text's key (``kept``, by old
    rank) moved to its new rank (``moved``, -1: gone), the texts at the ranks ``added``
    read and keyed. ``texts``: the texts' ids, and their ranks in the order of the ids.
    Keeps them for the next build as :func:`text_keys` does."""
    ids, by_id = texts
    keys = np.empty(len(ids), dtype=np.int64)
    live = moved >= 0
    keys[moved[live]] = kept[live]
    if len(added):
        keys[added] = vector_keys(model_id, read(added))
    if len(added) or not live.all():  # else the same texts: the file holds them
        _keep_later(directory / KEYS_FILE, model_id, ids[by_id], keys[by_id])
    return keys


@dataclass(frozen=True)
class ChunkKeys:
    """The chunks' vector keys by position (:func:`chunk_keys`); where they were carried
    through the chunk catalog's moves, the keys they were carried from (``base``, by the
    last table's position), the positions whose keys were made (``added``) and the keys
    of the rows gone (``gone``), which is all that changed."""

    keys: Ids
    base: Ids | None = None
    added: Ids | None = None
    gone: Ids | None = None


def chunk_keys(
    directory: Path,
    model_id: str,
    rows: Ids,
    names: Callable[[Ids], list[str]],
    *,
    tag: str,
    since: str | None,
    retitled: Ids,
    table: str | None = None,
    follows: str | None = None,
    moves: ChunkMoves | None = None,
) -> ChunkKeys:
    """The vector key under ``model_id`` of each chunk of ``rows`` (their
    :func:`~quillian.types.key64`, distinct); ``names`` gives the keyed names (id and
    text) of chunks at positions of ``rows``, asked only for those not kept.

    Where the keys kept are those of the chunk table ``follows`` (the one the catalog
    patched into this one, ``table``) and ``moves`` says where its rows went, they are
    carried through it: only the rows added are keyed, and no chunk is looked up by id.
    Else kept keys serve by chunk id where the file's tag is ``since`` (the build the
    linking delta follows), but not for the chunks ``retitled`` since (their rows).
    Keeps the keys of ``rows`` by position, tagged ``tag`` and ``table`` (none kept
    where ``tag`` is empty)."""
    path = directory / CHUNK_KEYS_FILE
    kept = _load_chunks(path, model_id) if since or follows else None
    carried = None
    if kept is not None and moves is not None and follows is not None and kept.table == follows:
        carried = _carried(kept, moves, rows)
    if carried is not None:
        keys, added, gone = carried
        if len(added):
            keys[added] = vector_keys(model_id, names(added))
        found = ChunkKeys(keys, kept.keys if kept is not None else None, added, gone)
    else:
        kept_ids, kept_keys = (kept.ids, kept.keys) if kept and kept.tag == since else _NONE
        if len(retitled) and len(kept_ids):
            stale = np.isin(kept_ids, retitled)
            kept_ids, kept_keys = kept_ids[~stale], kept_keys[~stale]
        order = distinct_order(kept_ids)
        keys, missing = _kept(rows, kept_ids[order], kept_keys[order])
        if len(missing):
            keys[missing] = vector_keys(model_id, names(missing))
        found = ChunkKeys(keys)
    if tag:
        marks = f"{tag}{_SEP}{table or ''}"
        if carried is not None:  # an update in a process that keeps them: written later
            _keep_later(path, model_id, rows, keys, _CHUNK_VERSION, marks)
        else:
            write_aside(path, lambda: _save(path, model_id, rows, keys, _CHUNK_VERSION, marks))
    else:
        settle(path)
        path.unlink(missing_ok=True)
    return found


@dataclass(frozen=True)
class _KeptChunks:
    ids: Ids
    keys: Ids
    tag: str
    table: str


def _carried(kept: _KeptChunks, moves: ChunkMoves, rows: Ids) -> tuple[Ids, Ids, Ids] | None:
    """The kept keys carried through ``moves``, the positions of the rows added (left
    to key) and the keys of the rows gone, where the kept ids carried the same way are
    ``rows`` where they were kept; else None (logged)."""
    if len(kept.ids) != moves.before or len(rows) != moves.after:
        return None
    added = moves.added()
    if not np.array_equal(moves.carry(kept.ids, rows[added]), rows):
        logger.warning("chunk keys kept do not follow the chunk catalog's table: keyed by id")
        return None
    keys = moves.carry(kept.keys, np.zeros(len(added), np.int64)).astype(np.int64, copy=False)
    return keys, added, kept.keys[moves.gone()]


def _load_chunks(path: Path, model_id: str) -> _KeptChunks | None:
    """The chunks' keys kept by position, with the build and table they are tagged
    with; None where there are none under ``model_id`` that read as written."""
    found = _load(path, model_id, _CHUNK_VERSION, None) or _load(
        path, model_id, _CHUNK_VERSION_1, None
    )  # a file of the first version (keys by id, tagged with a build): served by id
    if found is None:
        return None
    ids, keys, marks = found
    tag, _, table = marks.partition(_SEP)
    return _KeptChunks(ids, keys, tag, table)


def _kept(ids: Ids, kept_ids: Ids, kept_keys: Ids) -> tuple[Ids, Ids]:
    """The kept key of each of ``ids`` (kept ones sorted), and the positions of those
    with none kept (their keys left to fill)."""
    keys = np.empty(len(ids), dtype=np.int64)
    hit = np.zeros(len(ids), dtype=bool)
    if len(kept_ids):
        at = np.minimum(np.searchsorted(kept_ids, ids), len(kept_ids) - 1)
        hit = kept_ids[at] == ids
        keys[hit] = kept_keys[at[hit]]
    return keys, np.flatnonzero(~hit)


def _digest(
    model_id: str,
    ids: Ids,
    keys: Ids,
    version: str = _VERSION,
    tag: str = "",
    algorithm: str = ALGORITHM,
) -> str:
    """The kept keys' checksum: XXH3-128 (keys kept before were hashed with BLAKE2b,
    and are checked with it)."""
    head = f"{version} {model_id}" + (f" {tag}" if tag else "")
    h = HASHES[algorithm]()
    h.update(head.encode())
    h.update(np.ascontiguousarray(ids, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(keys, dtype="<i8").tobytes())
    return h.hexdigest()


_NONE = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


def _what(version: str) -> str:
    """What a file of ``version`` keys, for its warnings."""
    return "text" if version == _VERSION else "chunk"


@overload
def _load(path: Path, model_id: str) -> tuple[Ids, Ids]: ...
@overload
def _load(path: Path, model_id: str, version: str, tag: None) -> tuple[Ids, Ids, str] | None: ...
def _load(
    path: Path, model_id: str, version: str = _VERSION, tag: str | None = ""
) -> tuple[Ids, Ids] | tuple[Ids, Ids, str] | None:
    """The kept ids and their keys under ``model_id`` (the texts': ids sorted); none
    where the file is absent, of another model or tag, or does not read as written.
    ``tag`` None: any tag, given with them (None where there are none)."""
    what = _what(version)

    def read(meta: list[str], ids: Ids, keys: Ids) -> tuple[str, Ids, Ids, str] | None:
        if meta[:2] != [version, model_id]:
            return None
        marks = "".join(meta[3:4])
        if tag is not None and meta[3:] != ([tag] if tag else []):
            return None
        return meta[2], ids, keys, marks

    known = recall(path)
    if isinstance(known, _Kept):  # written or read by this process, the file as it left it
        found = read(known.meta, known.ids, known.keys)
    else:
        found = load_arrays(
            path,
            lambda kept: read(
                [str(v) for v in kept["meta"]],
                kept["ids"].astype(np.int64, copy=False),
                kept["keys"].astype(np.int64, copy=False),
            ),
            f"{what} keys",
            f"keying every {what}",
        )
        if found is not None:
            digest, ids, keys, marks = found
            if len(ids) != len(keys) or not digest_matches(
                digest, lambda algorithm: _digest(model_id, ids, keys, version, marks, algorithm)
            ):
                logger.warning(
                    "%s keys kept in %s fail their checksum: keying every %s", what, path, what
                )
                found = None
            else:
                meta = _meta(version, model_id, digest, marks)
                remember(path, _Kept(meta, ids, keys), [ids, keys])
    if tag is None:
        return None if found is None else (found[1], found[2], found[3])
    return _NONE if found is None else (found[1], found[2])


def _meta(version: str, model_id: str, digest: str, tag: str) -> list[str]:
    """A keys file's record: its version, model, checksum and tag (where it has one)."""
    return [version, model_id, digest] + ([tag] if tag else [])


def _keep_later(
    path: Path, model_id: str, ids: Ids, keys: Ids, version: str = _VERSION, tag: str = ""
) -> None:
    """Keep ``keys`` of ``ids`` (the texts' sorted by id) in this process at once and in
    the file later (:func:`~quillian.index.artifacts.write_later`: once updates pause,
    1.9 and 1.6 MB an update at 100k passages, docs/scale.md): what an update that
    carried them keeps. A process killed first leaves the file of an earlier build,
    whose keys are still right: the texts' are tied to no build, and the chunks' tag
    names the build they follow (one that does not is read by id, past the chunks
    retitled since, or keyed again)."""
    meta = _meta(version, model_id, _digest(model_id, ids, keys, version, tag), tag)
    write_later(
        path,
        lambda: _save(path, model_id, ids, keys, version, tag, ordered=True, meta=meta),
        _Kept(meta, ids, keys),
        [ids, keys],
    )


def _save(
    path: Path,
    model_id: str,
    ids: Ids,
    keys: Ids,
    version: str = _VERSION,
    tag: str = "",
    *,
    ordered: bool = False,
    meta: list[str] | None = None,
) -> None:
    """Keep ``keys`` of ``ids``: the texts' sorted by id (``ordered``: they are), the
    chunks' by position. ``meta``: the file's record of them, where made already."""
    if version == _VERSION and not ordered:
        order = distinct_order(ids)
        ids, keys = ids[order], keys[order]
    if meta is None:
        meta = _meta(version, model_id, _digest(model_id, ids, keys, version, tag), tag)
    try:
        save_arrays(path, {"meta": np.array(meta), "ids": ids, "keys": keys})
    except OSError as exc:
        what = _what(version)
        logger.warning(
            "%s keys not kept in %s (%s): the next build keys every %s", what, path, exc, what
        )
        return
    remember(path, _Kept(meta, ids, keys), [ids, keys])


@dataclass(frozen=True)
class _Kept:
    """A keys file as this process wrote or read it (:func:`remember`)."""

    meta: list[str]
    ids: Ids
    keys: Ids
