"""The ambiguity filter's name records: kept in a compact form, read back as written;
a record an earlier build wrote as JSON reads as it did; one that does not read is
named damaged."""

import json

import pytest

from quillian.index.link_names import NameBook, NamesDamaged, _Name
from quillian.testing.memory import MemoryKeyValueStore


def test_a_record_reads_back_as_written_in_fewer_bytes() -> None:
    """Stable chunk and document ids take 8 bytes each; any other id is kept as text;
    counts past one byte's varint read back."""
    one = _Name({}, {"chunk-15ca187937cc8e48"})
    assert len(one.to_bytes()) == 13
    assert len(json.dumps(vars(one) | {"chunks": sorted(one.chunks)})) > 60
    many = _Name(
        {"doc-00000000000000ff": 300, "wiki/Ada Lovelace": 1, "doc-ABCDEF0123456789": 2},
        {"chunk-0123456789abcdef", "chunk-x", "notes-é", "chunk-0123456789abcdeg"},
        protected=129,
    )
    for record in (one, many, _Name()):
        assert _Name.from_bytes(record.to_bytes()) == record


def test_a_record_written_as_json_reads_as_before() -> None:
    raw = b'{"docs":{"d1":2},"chunks":["chunk-15ca187937cc8e48","c2"],"protected":1}'
    assert _Name.from_bytes(raw) == _Name({"d1": 2}, {"chunk-15ca187937cc8e48", "c2"}, 1)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x01\x00\x00\x01\x01\x15\xca",  # an id cut short
        b"\x01\x00\x00\x01\x07" + bytes(8),  # an id of no known tag
        b"\x01\x00\x00\x00\x00",  # a byte after the record
        b"\x01\x80",  # a varint cut short
        b"not json",
    ],
)
def test_a_record_that_does_not_read_is_named_damaged(raw: bytes) -> None:
    kv = MemoryKeyValueStore()
    kv.put_many("linknames:x", {"ada": raw})
    book = NameBook(kv, "linknames:x", max_docs=5)
    with pytest.raises(NamesDamaged, match="'ada'"):
        book.load(["ada"])


def test_records_are_written_compact_and_read_back_by_a_book() -> None:
    kv = MemoryKeyValueStore()
    book = NameBook(kv, "linknames:x", max_docs=1)
    book.record("ada").chunks.add("chunk-15ca187937cc8e48")
    book.record("ada").docs.update({"doc-0000000000000001": 1, "doc-0000000000000002": 1})
    book.write()
    (raw,) = kv.get_many("linknames:x", ["ada"])
    assert raw is not None and raw[:1] == b"\x01"
    again = NameBook(kv, "linknames:x", max_docs=1)
    again.load(["ada"])
    assert again.records["ada"] == book.records["ada"] and again.dropped("ada")
