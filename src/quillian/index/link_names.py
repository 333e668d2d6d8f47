"""The ambiguity filter's state, per normalised one-word name, kept between builds.

:func:`~quillian.components.extraction.filters.drop_ambiguous_names` drops a name that
more than ``max_docs`` documents count and no topic protects. :class:`NameBook` keeps,
per name, the chunks of each document counting it, the topics protecting it and the
chunks naming it (whose filtered extraction changes when the name's fate does), in a
key-value namespace, one record per name: a build reads and writes only the names of
the chunks it changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.filters import name_use
from quillian.stores.protocols import KeyValueStore, iter_batches

__all__ = ["NameBook", "NamesDamaged", "names_of"]

_BATCH = 512


class NamesDamaged(Exception):
    """A stored name record does not read, or its counts went below zero."""


@dataclass
class _Name:
    docs: dict[str, int] = field(default_factory=dict)
    chunks: set[str] = field(default_factory=set)
    protected: int = 0

    def to_json(self) -> bytes:
        data = {"docs": self.docs, "chunks": sorted(self.chunks), "protected": self.protected}
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> _Name:
        data = json.loads(raw)
        return cls(dict(data["docs"]), set(data["chunks"]), int(data["protected"]))


def names_of(extraction: Extraction) -> set[str]:
    """Every name whose record ``extraction`` adds to or takes from."""
    use = name_use(extraction)
    return {*use.counted, *use.protected, *use.named}


class NameBook:
    """The name records of ``namespace`` that a build reads, changes and writes back."""

    def __init__(self, kv: KeyValueStore, namespace: str, max_docs: int) -> None:
        self.kv, self.namespace, self.max_docs = kv, namespace, max_docs
        self.names: dict[str, _Name] = {}
        self.before: dict[str, bool] = {}

    def load(self, keys: Iterable[str]) -> None:
        """Read the records of ``keys`` not read yet (an absent one is empty)."""
        wanted = sorted(set(keys) - self.names.keys())
        for batch in iter_batches(wanted, _BATCH):
            for key, raw in zip(batch, self.kv.get_many(self.namespace, batch), strict=True):
                try:
                    self.names[key] = _Name() if raw is None else _Name.from_json(raw)
                except (ValueError, KeyError, TypeError) as exc:
                    raise NamesDamaged(f"{self.namespace} {key!r}: {exc}") from exc
                self.before[key] = self.dropped(key)

    def count(self, extraction: Extraction, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) what ``extraction`` gives the names (their
        records loaded first, where stored ones exist)."""
        use = name_use(extraction)
        for key in use.counted:
            docs = self.names.setdefault(key, _Name()).docs
            docs[extraction.doc_id] = docs.get(extraction.doc_id, 0) + sign
            if docs[extraction.doc_id] == 0:
                del docs[extraction.doc_id]
            elif docs[extraction.doc_id] < 0:
                raise NamesDamaged(f"{self.namespace} {key!r}: counts below zero")
        for key in use.protected:
            self.names.setdefault(key, _Name()).protected += sign
            if self.names[key].protected < 0:
                raise NamesDamaged(f"{self.namespace} {key!r}: counts below zero")
        for key in use.named:
            chunks = self.names.setdefault(key, _Name()).chunks
            if sign > 0:
                chunks.add(extraction.chunk_id)
            else:
                chunks.discard(extraction.chunk_id)

    def dropped(self, key: str) -> bool:
        """Whether the name ``key`` (loaded) is ambiguous now."""
        name = self.names[key]
        return self.max_docs > 0 and len(name.docs) > self.max_docs and name.protected == 0

    def flipped(self) -> set[str]:
        """The chunks naming a name that became, or stopped being, ambiguous since it
        was loaded."""
        return {
            i
            for k, n in self.names.items()
            if self.dropped(k) != self.before.get(k, False)
            for i in n.chunks
        }

    def drop(self) -> frozenset[str]:
        """The loaded names that are ambiguous now."""
        return frozenset(k for k in self.names if self.dropped(k))

    def write(self) -> None:
        """Store the loaded records (an empty one is deleted)."""
        empty = [k for k, n in self.names.items() if not (n.docs or n.chunks or n.protected)]
        gone = set(empty)
        kept = [k for k in self.names if k not in gone]
        for batch in iter_batches(kept, _BATCH):
            self.kv.put_many(self.namespace, {k: self.names[k].to_json() for k in batch})
        for batch in iter_batches(empty, _BATCH):
            self.kv.delete_many(self.namespace, batch)
