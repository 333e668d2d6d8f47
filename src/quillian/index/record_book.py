"""Records of one key-value namespace that a build reads by key, changes and writes
back: the linking state's per-name (:mod:`.link_names`) and per-title
(:mod:`.link_titles`) records. A build reads only the records of what it changes, so an
update's cost follows its change, not the corpus."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from quillian.stores.protocols import KeyValueStore, iter_batches

__all__ = ["RecordBook"]

_BATCH = 512

R = TypeVar("R")


class RecordBook(Generic[R]):
    """The records of ``namespace`` a build has read (:attr:`records`, by key) and
    those it changed (:attr:`changed`): :meth:`load` reads the ones not read yet,
    :meth:`write` stores the changed ones (deleting those left empty), :meth:`clear`
    empties the namespace. A subclass says how a record is made empty, read, written
    and found empty, and which exception names a stored record that does not read."""

    damaged: type[Exception] = ValueError

    def __init__(self, kv: KeyValueStore, namespace: str) -> None:
        self.kv, self.namespace = kv, namespace
        self.records: dict[str, R] = {}
        self.changed: set[str] = set()

    def new(self) -> R:
        """A record of nothing (what an absent key reads as)."""
        raise NotImplementedError

    def decode(self, raw: bytes) -> R:
        """A stored record (ValueError, KeyError or TypeError where it does not read)."""
        raise NotImplementedError

    def encode(self, record: R) -> bytes:
        raise NotImplementedError

    def is_empty(self, record: R) -> bool:
        """Whether ``record`` holds nothing (it is deleted, not stored)."""
        raise NotImplementedError

    def loaded(self, key: str) -> None:
        """Called once a record is read (for what a subclass notes of it then)."""

    def load(self, keys: Iterable[str]) -> None:
        """Read the records of ``keys`` not read yet (an absent one is :meth:`new`);
        :attr:`damaged` where one does not read."""
        wanted = sorted(set(keys) - self.records.keys())
        for batch in iter_batches(wanted, _BATCH):
            for key, raw in zip(batch, self.kv.get_many(self.namespace, batch), strict=True):
                try:
                    self.records[key] = self.new() if raw is None else self.decode(raw)
                except (ValueError, KeyError, TypeError) as exc:
                    raise self.damaged(f"{self.namespace} {key!r}: {exc}") from exc
                self.loaded(key)

    def record(self, key: str) -> R:
        """The record of ``key`` to change (loaded, or new where it was not), marked
        changed."""
        self.changed.add(key)
        return self.records.setdefault(key, self.new())

    def write(self) -> None:
        """Store the changed records; delete those left empty."""
        gone = sorted(k for k in self.changed if self.is_empty(self.records[k]))
        kept = sorted(k for k in self.changed if not self.is_empty(self.records[k]))
        for batch in iter_batches(gone, _BATCH):
            self.kv.delete_many(self.namespace, batch)
        for batch in iter_batches(kept, _BATCH):
            self.kv.put_many(self.namespace, {k: self.encode(self.records[k]) for k in batch})
        self.changed = set()

    def clear(self) -> None:
        """Delete every record of the namespace, stored or read."""
        for batch in iter_batches(list(self.kv.keys(self.namespace)), _BATCH):
            self.kv.delete_many(self.namespace, batch)
        self.records, self.changed = {}, set()
