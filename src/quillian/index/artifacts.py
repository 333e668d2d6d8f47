"""The index's file artifacts beside its stores (the graph tables, see
:mod:`quillian.index.tables`, the BM25 index, the arrays a build keeps for the next),
each written whole next to its place and swapped in."""

from __future__ import annotations

import logging
import shutil
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["PARTIAL", "load_arrays", "replace_dir", "save_arrays"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The suffix of the file an artifact is written to before it is renamed into place.
PARTIAL = ".partial"


def replace_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Write a directory artifact next to ``target`` and swap it in."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def save_arrays(path: Path, arrays: Mapping[str, npt.NDArray[Any]]) -> None:
    """Write ``arrays`` as an uncompressed npz next to ``path`` (:data:`PARTIAL`) and
    rename it into place, so a reader finds the old file or the new one whole."""
    partial = path.with_name(path.name + PARTIAL)
    with partial.open("wb") as out:
        np.savez(out, **arrays)  # type: ignore[arg-type]  # names, not allow_pickle
    partial.replace(path)


def load_arrays(path: Path, read: Callable[[Any], T | None], what: str, then: str) -> T | None:
    """What ``read`` makes of the npz :func:`save_arrays` wrote at ``path``, opened
    without pickles (``read`` gets it open, its arrays by name; it returns None for a
    file it does not take). None where there is no file, or, with a warning naming
    ``what`` and what happens ``then``, where it does not read: damaged, cut short, or
    without an array ``read`` asks for."""
    try:
        with np.load(path, allow_pickle=False) as kept:
            return read(kept)
    except FileNotFoundError:
        return None
    except (KeyError, IndexError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        logger.warning("%s: %s does not read (%s): %s", what, path, exc, then)
        return None
