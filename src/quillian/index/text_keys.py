"""The vector keys of the graph's texts, kept between builds by text id.

A text's vector key (:func:`~quillian.components.retrieval.keyed.vector_keys`) hashes
the embedding model's id with the text; its id in the tables
(:func:`~quillian.types.key64`) hashes the text alone. Every build keys every distinct
description and relation text of the graph (about 200,000 at 100k passages), and
without this file each would be read from the tables and hashed again. The file holds
the key of each text id under one model, so a build reads and hashes only the texts it
has not keyed before.

It caches a pure function: an entry is right whichever build wrote it, so it is tied to
no tables. A file of another model, or one that does not read or whose checksum fails,
is ignored (every text keyed again) and written anew; one that cannot be written is a
warning. It is machine-local like the resolution state: a PostgreSQL workspace never
synchronises it (:data:`quillian.stores.postgres.files.SKIPPED`).
"""

from __future__ import annotations

import hashlib
import logging
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.keyed import vector_keys
from quillian.index.artifacts import save_arrays

__all__ = ["KEYS_FILE", "text_keys"]

logger = logging.getLogger(__name__)

#: The file, at the index root.
KEYS_FILE = "text_keys_by_id.npz"
_VERSION = "text-keys-1"

Ids = npt.NDArray[np.int64]


def text_keys(directory: Path, model_id: str, ids: Ids, read: Callable[[Ids], list[str]]) -> Ids:
    """The vector key under ``model_id`` of each text of ``ids`` (distinct text ids);
    ``read`` gives the texts at positions of ``ids``, and is asked only for those whose
    key is not kept. Keeps exactly the keys of ``ids`` for the next build."""
    path = directory / KEYS_FILE
    kept_ids, kept_keys = _load(path, model_id)
    keys = np.empty(len(ids), dtype=np.int64)
    hit = np.zeros(len(ids), dtype=bool)
    if len(kept_ids):
        at = np.minimum(np.searchsorted(kept_ids, ids), len(kept_ids) - 1)
        hit = kept_ids[at] == ids
        keys[hit] = kept_keys[at[hit]]
    missing = np.flatnonzero(~hit)
    if len(missing):
        keys[missing] = vector_keys(model_id, read(missing))
    if len(missing) or len(kept_ids) != len(ids):  # else the same ids: the file holds them
        _save(path, model_id, ids, keys)
    return keys


def _digest(model_id: str, ids: Ids, keys: Ids) -> str:
    h = hashlib.blake2b(f"{_VERSION} {model_id}".encode(), digest_size=16)
    h.update(np.ascontiguousarray(ids, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(keys, dtype="<i8").tobytes())
    return h.hexdigest()


def _load(path: Path, model_id: str) -> tuple[Ids, Ids]:
    """The kept ids (sorted) and their keys under ``model_id``; none where the file is
    absent, of another model, or does not read as written."""
    none = np.empty(0, dtype=np.int64)
    try:
        with np.load(path, allow_pickle=False) as kept:
            version, model, digest = (str(v) for v in kept["meta"])
            if (version, model) != (_VERSION, model_id):
                return none, none
            ids = kept["ids"].astype(np.int64, copy=False)
            keys = kept["keys"].astype(np.int64, copy=False)
    except FileNotFoundError:
        return none, none
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        logger.warning("text keys kept in %s do not read (%s): keying every text", path, exc)
        return none, none
    if len(ids) != len(keys) or digest != _digest(model_id, ids, keys):
        logger.warning("text keys kept in %s fail their checksum: keying every text", path)
        return none, none
    return ids, keys


def _save(path: Path, model_id: str, ids: Ids, keys: Ids) -> None:
    order = np.argsort(ids, kind="stable")
    ids, keys = ids[order], keys[order]
    meta = np.array([_VERSION, model_id, _digest(model_id, ids, keys)])
    try:
        save_arrays(path, {"meta": meta, "ids": ids, "keys": keys})
    except OSError as exc:
        logger.warning("text keys not kept in %s (%s): the next build keys every text", path, exc)
