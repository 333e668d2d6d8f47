"""The index's file artifacts beside its stores (the graph tables, see
:mod:`quillian.index.tables`, the BM25 index, the arrays a build keeps for the next),
each written whole next to its place and swapped in."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["PARTIAL", "replace_dir", "save_arrays"]

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
