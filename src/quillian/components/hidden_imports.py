"""Importing a library with one of its optional dependencies reported absent, where the
library would import it without needing it here: thinc imports torch (1.2 s) though
spaCy's CNN pipelines never use it; bm25s imports jax and runs a jax operation as it is
imported, which raises where jax cannot start its backend (a CUDA plugin with no usable
device), though the incremental BM25 index never calls bm25s and its top-k selection
falls back to numpy."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Iterator, Sequence

__all__ = ["hidden"]


class _Hide(importlib.abc.MetaPathFinder):
    """Reports the packages ``names`` as absent to the imports of one thread; other
    threads are not affected."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.thread = threading.get_ident()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in self.names and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


@contextlib.contextmanager
def hidden(*names: str) -> Iterator[None]:
    """While held, this thread's imports find the top-level packages ``names`` absent,
    unless one is imported already (then it is found as usual: this changes nothing for
    it). Later imports, and those of other threads meanwhile, find them as usual."""
    missing = frozenset(n for n in names if n not in sys.modules)
    if not missing:
        yield
        return
    finder = _Hide(missing)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
