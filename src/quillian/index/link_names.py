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
from dataclasses import dataclass, field

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.filters import name_use
from quillian.index.record_book import RecordBook
from quillian.stores.protocols import KeyValueStore

__all__ = ["NameBook", "NamesDamaged", "names_of"]


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


class NameBook(RecordBook[_Name]):
    """The name records of ``namespace`` that a build reads, changes and writes back."""

    damaged = NamesDamaged

    def __init__(self, kv: KeyValueStore, namespace: str, max_docs: int) -> None:
        super().__init__(kv, namespace)
        self.max_docs = max_docs
        #: whether each name read was ambiguous when read
        self.before: dict[str, bool] = {}

    def new(self) -> _Name:
        return _Name()

    def decode(self, raw: bytes) -> _Name:
        return _Name.from_json(raw)

    def encode(self, record: _Name) -> bytes:
        return record.to_json()

    def is_empty(self, record: _Name) -> bool:
        return not (record.docs or record.chunks or record.protected)

    def loaded(self, key: str) -> None:
        self.before[key] = self.dropped(key)

    def count(self, extraction: Extraction, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) what ``extraction`` gives the names (their
        records loaded first, where stored ones exist)."""
        use = name_use(extraction)
        for key in use.counted:
            docs = self.record(key).docs
            docs[extraction.doc_id] = docs.get(extraction.doc_id, 0) + sign
            if docs[extraction.doc_id] == 0:
                del docs[extraction.doc_id]
            elif docs[extraction.doc_id] < 0:
                raise NamesDamaged(f"{self.namespace} {key!r}: counts below zero")
        for key in use.protected:
            self.record(key).protected += sign
            if self.records[key].protected < 0:
                raise NamesDamaged(f"{self.namespace} {key!r}: counts below zero")
        for key in use.named:
            chunks = self.record(key).chunks
            if sign > 0:
                chunks.add(extraction.chunk_id)
            else:
                chunks.discard(extraction.chunk_id)

    def dropped(self, key: str) -> bool:
        """Whether the name ``key`` (loaded) is ambiguous now."""
        name = self.records[key]
        return self.max_docs > 0 and len(name.docs) > self.max_docs and name.protected == 0

    def flipped(self) -> set[str]:
        """The chunks naming a name that became, or stopped being, ambiguous since it
        was loaded."""
        return {
            i
            for k, n in self.records.items()
            if self.dropped(k) != self.before.get(k, False)
            for i in n.chunks
        }

    def drop(self) -> frozenset[str]:
        """The loaded names that are ambiguous now."""
        return frozenset(k for k in self.records if self.dropped(k))
