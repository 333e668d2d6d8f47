"""The index's file artifacts beside its stores (the graph tables, see
:mod:`quillian.index.tables`, and the BM25 index), each written whole next to its place
and swapped in."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_dir"]


def replace_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Write a directory artifact next to ``target`` and swap it in."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
