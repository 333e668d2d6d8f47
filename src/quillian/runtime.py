"""How a Quillian process sets up its memory allocator: the CLI's edge (every
``quillian`` command, ``quillian serve`` with it) calls :func:`keep_freed_memory` once.

An update of an index runs some dozens of numpy passes over its rows, each making
arrays of a few megabytes and freeing them again (at 100k passages, the relations'
columns are 1.4 MB each, the graph's edge columns 1-4 MB). glibc's allocator maps an
array above its mmap threshold afresh, and gives freed memory at the top of its heap
back to the system beyond its trim threshold; each such array is then faulted in a
page at a time again, and the sort of the relations' ends alone took 9.3 ms, 5.4 ms
with the memory kept (``research/allocator.py``). glibc raises its mmap threshold
itself as large blocks are freed, up to 32 MiB on a 64-bit system, with the trim
threshold at twice it; :func:`keep_freed_memory` sets them there at once and pads each
growth of the heap by as much, so that the memory an update frees serves the next.
The process's peak memory is unchanged (measured at 531-534 MB for updates of a 100k
index either way); what it keeps freed, for reuse, is at most those 64 MiB at the
heap's top.

A user's own allocator settings win: where the environment holds any of
:data:`USER_SETTINGS` (glibc reads them at start), nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Mapping

__all__ = ["MMAP_THRESHOLD", "USER_SETTINGS", "keep_freed_memory", "set_by_user"]

logger = logging.getLogger(__name__)

#: glibc's own upper bound for the mmap threshold it adjusts (64-bit systems): blocks
#: under it come from the heap, where a freed one is reused.
MMAP_THRESHOLD = 32 << 20
#: The freed memory kept at the heap's top, and the padding of each growth of the heap:
#: twice the threshold, the trim threshold glibc's own adjustment sets beside it.
_KEPT = 2 * MMAP_THRESHOLD
#: mallopt's parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
#: Environment variables by which a user sets glibc's allocator: where one is set,
#: :func:`keep_freed_memory` is not called.
USER_SETTINGS = (
    "GLIBC_TUNABLES",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
)


def set_by_user(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` sets glibc's allocator (:data:`USER_SETTINGS`)."""
    return any(name in environ for name in USER_SETTINGS)


def keep_freed_memory() -> bool:
    """Set glibc's allocator to keep the memory an update frees for the next arrays
    (see the module's doc); whether it was set (False where the C library is not glibc,
    or refused a setting)."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):  # a system that does not name its C library
        found = ""
    if not found.startswith("glibc"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    settings = (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (_M_TRIM_THRESHOLD, _KEPT),
        (_M_TOP_PAD, _KEPT),
    )
    done = all(mallopt(parameter, value) == 1 for parameter, value in settings)
    if not done:
        logger.info("memory allocator left as it was: glibc refused a setting")
    return done
