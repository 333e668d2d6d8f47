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
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.keyed import vector_keys
from quillian.index.artifacts import load_arrays, save_arrays, settle, write_aside
from quillian.stores.integrity import ALGORITHM, HASHES, digest_matches
from quillian.stores.snapshot import distinct_order

__all__ = ["CHUNK_KEYS_FILE", "KEYS_FILE", "chunk_keys", "text_keys"]

logger = logging.getLogger(__name__)

#: The file, at the index root.
KEYS_FILE = "text_keys_by_id.npz"
_VERSION = "text-keys-1"
#: The chunks' keys, at the index root.
CHUNK_KEYS_FILE = "chunk_keys_by_id.npz"
_CHUNK_VERSION = "chunk-keys-1"

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


def chunk_keys(
    directory: Path,
    model_id: str,
    rows: Ids,
    names: Callable[[Ids], list[str]],
    *,
    tag: str,
    since: str | None,
    retitled: Ids,
) -> Ids:
    """The vector key under ``model_id`` of each chunk of ``rows`` (their
    :func:`~quillian.types.key64`, distinct); ``names`` gives the keyed names (id and
    text) of chunks at positions of ``rows``, asked only for those not kept. Kept keys
    serve where the file's tag is ``since`` (the build the linking delta follows), but
    not for the chunks ``retitled`` since (their rows). Keeps the keys of ``rows``,
    tagged ``tag`` (none kept where it is empty)."""
    path = directory / CHUNK_KEYS_FILE
    kept_ids, kept_keys = _load(path, model_id, _CHUNK_VERSION, since) if since else _NONE
    if len(retitled) and len(kept_ids):
        stale = np.isin(kept_ids, retitled)
        kept_ids, kept_keys = kept_ids[~stale], kept_keys[~stale]
    keys, missing = _kept(rows, kept_ids, kept_keys)
    if len(missing):
        keys[missing] = vector_keys(model_id, names(missing))
    if tag:
        write_aside(path, lambda: _save(path, model_id, rows, keys, _CHUNK_VERSION, tag))
    else:
        settle(path)
        path.unlink(missing_ok=True)
    return keys


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


def _load(path: Path, model_id: str, version: str = _VERSION, tag: str = "") -> tuple[Ids, Ids]:
    """The kept ids (sorted) and their keys under ``model_id``; none where the file is
    absent, of another model or tag, or does not read as written."""
    what = _what(version)

    def read(kept: Any) -> tuple[str, Ids, Ids] | None:
        meta = [str(v) for v in kept["meta"]]
        if meta[:2] != [version, model_id] or meta[3:] != ([tag] if tag else []):
            return None
        ids = kept["ids"].astype(np.int64, copy=False)
        return meta[2], ids, kept["keys"].astype(np.int64, copy=False)

    found = load_arrays(path, read, f"{what} keys", f"keying every {what}")
    if found is None:
        return _NONE
    digest, ids, keys = found
    if len(ids) != len(keys) or not digest_matches(
        digest, lambda algorithm: _digest(model_id, ids, keys, version, tag, algorithm)
    ):
        logger.warning("%s keys kept in %s fail their checksum: keying every %s", what, path, what)
        return _NONE
    return ids, keys


def _save(
    path: Path, model_id: str, ids: Ids, keys: Ids, version: str = _VERSION, tag: str = ""
) -> None:
    order = distinct_order(ids)
    ids, keys = ids[order], keys[order]
    meta = [version, model_id, _digest(model_id, ids, keys, version, tag)] + ([tag] if tag else [])
    try:
        save_arrays(path, {"meta": np.array(meta), "ids": ids, "keys": keys})
    except OSError as exc:
        what = _what(version)
        logger.warning(
            "%s keys not kept in %s (%s): the next build keys every %s", what, path, exc, what
        )
