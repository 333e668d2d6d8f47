"""Long texts kept compressed in SQLite columns.

SQLite stores a text as it is given, where PostgreSQL compresses any value over about
2 KB on its own (TOAST, so its store is given texts as they are). A long document and
an index's chunks are each the corpus's text again, so
:class:`~quillian.stores.embedded.sqlite.SqliteDocumentStore` (documents, and chunks that
are not their document's span) and an index's graph tables (:mod:`quillian.index.tables`,
the chunks' texts) write a text of at least
:data:`MIN_PACKED` bytes as a zlib stream (a ``BLOB``: SQLite keeps a blob as it is in
any column) where that is shorter, one of at least :data:`XZ_FROM` bytes as an xz
stream (:mod:`lzma`) where that is shorter still, and read every form: a string is a
text stored as it is, bytes a packed one, told apart by their first bytes. So a store
written before keeps its rows, read as they are.
"""

from __future__ import annotations

import lzma
import threading
import zlib
from collections import OrderedDict

__all__ = ["MIN_PACKED", "XZ_FROM", "UnpackedTexts", "pack_text", "unpack_text"]

#: The shortest text, in UTF-8 bytes, stored compressed: below it zlib saves little and
#: a row's text is read with no decompression.
MIN_PACKED = 256
#: zlib's default level: the chunks of the 20 MB text of docs/scale.md take 0.50x
#: their bytes (0.52x at level 1), 0.9 s to write and 0.2 s to read back, the whole
#: text (``research/store_bytes.py``).
LEVEL = 6
#: The shortest text, in UTF-8 bytes, tried in xz (LZMA at its default preset, 6): xz's
#: window holds megabytes where zlib's holds 32 KB, so on a long document it finds the
#: names and phrases repeated far apart. The 20 MB text of docs/scale.md as one
#: document takes 0.68x zlib's bytes in xz (8.9 -> 6.0 MB), at 12 times zlib's seconds
#: to write (12 s, where spaCy took over 1,000 s to extract it) and 3 times its seconds
#: to read (0.25 s); its 8 KB passages gain nothing (``research/store_bytes.py``). The
#: bound is past any default passage (8,000 characters at most), not a tuned value.
XZ_FROM = 1 << 16
#: How an xz stream begins (zlib's begins with ``x``).
_XZ_MAGIC = b"\xfd7zXZ\x00"


def pack_text(text: str) -> str | bytes:
    """``text`` as stored: compressed where it is long and that is shorter (in xz where
    it is longer still and that is shorter again), else as it is."""
    raw = text.encode()
    if len(raw) < MIN_PACKED:
        return text
    packed = zlib.compress(raw, LEVEL)
    if len(raw) >= XZ_FROM and len(xz := lzma.compress(raw)) < len(packed):
        packed = xz
    return packed if len(packed) < len(raw) else text


def unpack_text(stored: str | bytes) -> str:
    """A stored text read back (any of :func:`pack_text`'s forms)."""
    if isinstance(stored, str):
        return stored
    if stored[:6] == _XZ_MAGIC:
        return lzma.decompress(stored).decode()
    return zlib.decompress(stored).decode()


class UnpackedTexts:
    """Stored texts read back by a key of the caller's (a chunk's row), the last
    ``kept`` kept: the rows that read a chunk's text (its relations' sentences, a
    whole write's check of them) come together, and each would decompress it again."""

    def __init__(self, kept: int = 256) -> None:
        self.kept = kept
        self._texts: OrderedDict[int, str] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, key: int, stored: str | bytes) -> str:
        with self._lock:
            found = self._texts.get(key)
            if found is not None:
                self._texts.move_to_end(key)
                return found
        text = unpack_text(stored)
        with self._lock:
            self._texts[key] = text
            if len(self._texts) > self.kept:
                self._texts.popitem(last=False)
        return text
