"""Memory-mapped arrays without ``numpy.memmap``'s cost per index.

``np.load(path, mmap_mode="r")`` returns an ``np.memmap``, whose ``__getitem__`` is
Python: every index or slice of it costs a few microseconds more than a plain array's.
The retrievers index the graph snapshot's and the vector indexes' arrays tens of times a
query (on 2Wiki's 6,119-passage index about 60 times, 0.2 ms of `fused`'s 9). A plain
``ndarray`` view of the same mapping reads the same pages, with no copy.

A file that is not a whole ``.npy`` array (truncated, its header scribbled over) raises
:class:`~quillian.errors.IndexDamagedError` naming it, not numpy's error.
:func:`narrowed` gives an integer array the narrowest of a few widths before it is
saved: an index's arrays of rows, positions and counts mostly fit 32 bits or fewer.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import numpy as np

from quillian.stores.integrity import damaged

__all__ = ["is_mapped", "load_mapped", "narrowed"]


def load_mapped(path: str | Path, mmap_file: bool = True) -> np.ndarray[Any, Any]:
    """The ``.npy`` array at ``path``, memory-mapped read-only as a plain ndarray view
    (read into memory whole when ``mmap_file`` is False)."""
    try:
        return np.asarray(np.load(path, mmap_mode="r" if mmap_file else None))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError) as exc:  # numpy's words for a cut or bad header
        raise damaged(Path(path), f"not a readable array: {exc}") from exc


def is_mapped(array: object) -> bool:
    """Whether ``array``'s memory comes from a file mapping (through any views)."""
    base = array
    while base is not None:
        if isinstance(base, np.memmap | mmap.mmap):
            return True
        base = getattr(base, "base", None)
    return False


def narrowed(values: np.ndarray[Any, Any], *widths: type[np.integer[Any]]) -> np.ndarray[Any, Any]:
    """``values`` in the first of ``widths`` that holds every one of them (else as they
    are); readers index and count with any width."""
    low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    for width in widths:
        info = np.iinfo(width)
        if info.min <= low and high <= info.max:
            return values.astype(width)
    return values
