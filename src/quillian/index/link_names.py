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

    def to_bytes(self) -> bytes:
        """The record in its compact form (:data:`_COMPACT`): the protecting count, each
        document with its count, each chunk (sorted), as varints and ids
        (:func:`_put_id`): 13 bytes for a name one chunk names, where its JSON took 61
        (7 MB of the 20 MB text's index, docs/scale.md)."""
        out = bytearray(_COMPACT)
        _put_varint(out, self.protected)
        _put_varint(out, len(self.docs))
        for doc_id, count in sorted(self.docs.items()):
            _put_id(out, doc_id)
            _put_varint(out, count)
        _put_varint(out, len(self.chunks))
        for chunk_id in sorted(self.chunks):
            _put_id(out, chunk_id)
        return bytes(out)

    @classmethod
    def from_bytes(cls, raw: bytes) -> _Name:
        """A stored record: its compact form, or the JSON an earlier build wrote."""
        if raw[:1] != _COMPACT:
            data = json.loads(raw)
            return cls(dict(data["docs"]), set(data["chunks"]), int(data["protected"]))
        reader = _Reader(raw, 1)
        protected = reader.varint()
        docs = {}
        for _ in range(reader.varint()):
            doc_id = reader.id()
            docs[doc_id] = reader.varint()
        chunks = {reader.id() for _ in range(reader.varint())}
        if reader.at != len(raw):
            raise ValueError(f"{len(raw) - reader.at} bytes after a name record")
        return cls(docs, chunks, protected)


#: The first byte of a record's compact form (JSON begins with ``{``).
_COMPACT = b"\x01"
#: The heads of the ids kept as 8 bytes (:func:`~quillian.types.stable_id`'s form: a
#: head and 16 lowercase hex digits), by the tag that names them; tag 0: an id as text.
_HEADS = {1: "chunk-", 2: "doc-"}
_TAGS = {head: tag for tag, head in _HEADS.items()}
_HEX = frozenset("0123456789abcdef")


def _put_varint(out: bytearray, value: int) -> None:
    """``value`` (at least 0) as LEB128: seven bits a byte, low first."""
    if value < 0:
        raise ValueError(f"a name record's count is {value}")
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _put_id(out: bytearray, item: str) -> None:
    """A chunk or document id: a tag and 8 bytes where it is a stable id of a known
    head, else tag 0, its UTF-8 length and bytes."""
    head, _, digits = item.rpartition("-")
    tag = _TAGS.get(head + "-")
    if tag is not None and len(digits) == 16 and _HEX.issuperset(digits):
        out.append(tag)
        out += bytes.fromhex(digits)
        return
    encoded = item.encode("utf-8")
    out.append(0)
    _put_varint(out, len(encoded))
    out += encoded


class _Reader:
    """Reads :meth:`_Name.to_bytes`'s fields from ``raw`` from ``at`` on; ValueError
    where the record ends early."""

    def __init__(self, raw: bytes, at: int) -> None:
        self.raw, self.at = raw, at

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.raw):
            raise ValueError("a name record ends early")
        taken = self.raw[self.at : self.at + n]
        self.at += n
        return taken

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def id(self) -> str:
        (tag,) = self.take(1)
        if tag == 0:
            return self.take(self.varint()).decode("utf-8")
        head = _HEADS.get(tag)
        if head is None:
            raise ValueError(f"a name record names an id of tag {tag}")
        return head + self.take(8).hex()


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
        return _Name.from_bytes(raw)

    def encode(self, record: _Name) -> bytes:
        return record.to_bytes()

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
