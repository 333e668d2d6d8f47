"""The escape that lets a PostgreSQL text column hold any string: it reverses exactly,
leaves text without NUL or its marker unchanged, and never stores a NUL (issue 51)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

pytest.importorskip("psycopg")
from quillian.stores.postgres.textcodec import MARK, decode, encode

#: Any string (lone surrogates too: the codec is not where they are refused), rich in
#: NUL, the marker and the letters of its escapes.
TEXT = st.text(st.one_of(st.characters(), st.sampled_from(["\x00", MARK, "0", "E"])))
#: Text without NUL or the marker: what every workspace held before the escape.
PLAIN = st.text(st.characters(exclude_characters=["\x00", MARK]))


@given(TEXT)
@example(MARK + "0")
@example(MARK + "E")
@example("\x00" + MARK)
@example(MARK + MARK + "0")
def test_decode_reverses_encode(text: str) -> None:
    stored = encode(text)
    assert decode(stored) == text
    assert "\x00" not in stored


@given(PLAIN)
def test_plain_text_is_stored_and_read_unchanged(text: str) -> None:
    assert encode(text) == text
    assert decode(text) == text


@given(TEXT)
def test_only_text_with_nul_or_the_marker_is_escaped(text: str) -> None:
    escaped = "\x00" in text or MARK in text
    assert encode(text).startswith(MARK) == escaped
    assert (encode(text) != text) == escaped
