"""Any Python string in a PostgreSQL text column: a reversible escape for NUL.

PostgreSQL's ``text`` refuses the character U+0000, which a JSON string (and so a
document, a title, an entity name) may hold. Every string the workspace stores goes
through :func:`encode` and every text it reads back through :func:`decode`, applied in
one place: the psycopg adapters of :data:`ADAPTERS`, which every connection of a
workspace is made with (the pool's and the single ones of ``_connect``), so no query
can forget it.

A value holding neither NUL nor :data:`MARK` is stored unchanged, so SQL sees plain
text as it is and workspaces written before the escape read as they did. Any other
value is stored as ``MARK`` followed by the value with each ``MARK`` written
``MARK 'E'`` and each NUL ``MARK '0'``; only values starting with ``MARK`` are
decoded. ``MARK`` is U+FDD0, a Unicode noncharacter (reserved for a program's internal
use, so not expected in documents; one that does appear round-trips all the same).
The one reading that changes is a value starting with U+FDD0 written by a Quillian
that predates the escape.

Stored values keep their meaning for equality (ids, keys: a string and its encoding
are one-to-one) but not for ordering: a key holding NUL or ``MARK`` sorts by its
encoding. No JSON is stored as ``jsonb``: document metadata is JSON text, where
``json.dumps`` already writes NUL as ``\\u0000``.
"""

from __future__ import annotations

import psycopg
from psycopg.abc import Buffer
from psycopg.types.string import (
    StrBinaryDumper,
    StrBinaryDumperVarchar,
    StrDumper,
    StrDumperUnknown,
    StrDumperVarchar,
    TextBinaryLoader,
    TextLoader,
)

__all__ = ["ADAPTERS", "MARK", "decode", "encode"]

#: The first character of an escaped value, and the escape inside it.
MARK = "\ufdd0"
_NUL = "\x00"
_MARK_ESCAPED = MARK + "E"
_NUL_ESCAPED = MARK + "0"


def encode(text: str) -> str:
    """``text`` as stored: unchanged unless it holds NUL or :data:`MARK`."""
    if _NUL not in text and MARK not in text:
        return text
    return MARK + text.replace(MARK, _MARK_ESCAPED).replace(_NUL, _NUL_ESCAPED)


def decode(stored: str) -> str:
    """The string :func:`encode` made ``stored`` from (a value not starting with
    :data:`MARK` is returned as it is)."""
    if not stored.startswith(MARK):
        return stored
    # every MARK in the body starts a pair ("0" or "E" follows it, never MARK), so the
    # NUL pairs are found first without splitting an escaped MARK
    return stored[1:].replace(_NUL_ESCAPED, _NUL).replace(_MARK_ESCAPED, MARK)


# Dumpers (Python to the server) and loaders (the server to Python) of str, the same as
# psycopg's but for the escape; registered in psycopg's order (the last is the default).
class _Text(StrDumper):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(encode(obj))


class _Varchar(StrDumperVarchar):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(encode(obj))


class _Unknown(StrDumperUnknown):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(encode(obj))


class _BinaryText(StrBinaryDumper):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(encode(obj))


class _BinaryVarchar(StrBinaryDumperVarchar):
    def dump(self, obj: str) -> Buffer | None:
        return super().dump(encode(obj))


class _Loader(TextLoader):
    def load(self, data: Buffer) -> bytes | str:
        # called once per text value read (a build reads its 100k chunks as 500k of
        # them), so the common case is inline: psycopg's own decoding, then decode only
        # a value that starts with MARK. 100k rows shaped like chunks, read whole
        # (research/pg_text_reads.py): 0.31 s, against 0.40 s through super() and
        # decode() and 0.19 s with psycopg's own loader.
        if self._encoding:
            value = str(data, self._encoding)
            return decode(value) if value.startswith(MARK) else value
        raw = super().load(data)  # SQL_ASCII: bytes, as psycopg gives them
        return decode(raw) if isinstance(raw, str) else raw


class _BinaryLoader(_Loader, TextBinaryLoader):
    """The binary format's loader: text values come the same way."""


def _adapters() -> psycopg.adapt.AdaptersMap:
    adapters = psycopg.adapt.AdaptersMap(psycopg.adapters)
    for dumper in (_BinaryVarchar, _BinaryText, _Varchar, _Text, _Unknown):
        adapters.register_dumper(str, dumper)
    for oid in ("text", "varchar"):
        adapters.register_loader(oid, _Loader)
        adapters.register_loader(oid, _BinaryLoader)
    return adapters


#: psycopg's adapters with :func:`encode` on every string sent and :func:`decode` on
#: every ``text`` or ``varchar`` value read: the ``context`` of a workspace connection.
ADAPTERS = _adapters()
