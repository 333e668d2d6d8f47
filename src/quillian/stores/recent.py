"""What a process keeps of the files it read or wrote last, by a key that names them: a
bounded map shared by threads, the least recently used going first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["Recent"]

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``kept`` values by key, the least recently used going first; each call
    under a lock of its own (a server's builds and questions run in threads). A value
    is shared with every caller that gets it: keep only what nobody changes."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (None: none), now the most recently used."""
        with self._lock:
            found = self._values.get(key)
            if found is not None:
                self._values.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key``, dropping the least recently used past
        :attr:`kept`."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.kept:
                self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)
