"""Chunkers: word windows with overlap (SA-RAG's default) and one passage per document."""

from __future__ import annotations

import re

from quillian.components.extraction.text import split_long
from quillian.errors import ConfigError
from quillian.types import Chunk, Document

__all__ = ["PASSAGE_MAX_CHARS", "PassageChunker", "WordWindowChunker"]

#: The longest passage :class:`PassageChunker` keeps whole. Longer than any passage of the
#: bench corpora (2Wiki's longest is 6,434 characters; MuSiQue's 1,909; HotpotQA's 3,502),
#: so their passages stay as they are, and a book or a 20 MB text file becomes passages
#: of at most about 1,300 words instead of one chunk the size of the file.
PASSAGE_MAX_CHARS = 8_000

_WORD = re.compile(r"\S+")


class WordWindowChunker:
    """Windows of ``size`` words, each starting ``size - overlap`` words after the last.

    A word is a run of non-whitespace characters. A chunk runs from the start of its
    first word to the end of its last, so its text keeps the document's own spacing and
    equals ``document.text[start:end]``. The last window ends at the last word; no
    window lies wholly inside the previous one. A document without words has no chunks.
    SA-RAG's defaults: 500-word windows with a 200-word overlap.
    """

    def __init__(self, size: int = 500, overlap: int = 200) -> None:
        if size <= 0:
            raise ConfigError(f"size must be greater than 0, got {size}")
        if not 0 <= overlap < size:
            raise ConfigError(f"overlap must be >= 0 and smaller than size ({size}), got {overlap}")
        self.size = size
        self.overlap = overlap

    @property
    def name(self) -> str:
        """``word-window-<size>-<overlap>``."""
        return f"word-window-{self.size}-{self.overlap}"

    def chunk(self, document: Document) -> list[Chunk]:
        """Split ``document`` into overlapping word windows."""
        spans = [m.span() for m in _WORD.finditer(document.text)]
        chunks: list[Chunk] = []
        for first in range(0, len(spans), self.size - self.overlap):
            last = min(first + self.size, len(spans)) - 1
            chunks.append(_make_chunk(document, len(chunks), spans[first][0], spans[last][1]))
            if last == len(spans) - 1:
                break
        return chunks


class PassageChunker:
    """One chunk per document: its whole text, without leading or trailing whitespace.

    Suits corpora of short passages (MuSiQue, 2Wiki, HotpotQA). A document longer than
    ``max_chars`` is cut into consecutive passages of at most ``max_chars`` characters,
    each cut after the last paragraph break in the second half of a passage, else after
    its last sentence end, else after its last whitespace
    (:func:`~quillian.components.extraction.text.split_long`). A document of only
    whitespace has no chunks.
    """

    def __init__(self, max_chars: int = PASSAGE_MAX_CHARS) -> None:
        if max_chars < 1:
            raise ConfigError(f"max_chars must be at least 1, got {max_chars}")
        self.max_chars = max_chars

    @property
    def name(self) -> str:
        """``passage`` (``passage-<max_chars>`` for another bound than the default)."""
        return "passage" if self.max_chars == PASSAGE_MAX_CHARS else f"passage-{self.max_chars}"

    def chunk(self, document: Document) -> list[Chunk]:
        """The document as one chunk, or as consecutive passages when it is long."""
        text = document.text
        chunks: list[Chunk] = []
        for start, end in split_long(text, self.max_chars):
            piece = text[start:end]
            if piece.strip():
                first = start + len(piece) - len(piece.lstrip())
                last = start + len(piece.rstrip())
                chunks.append(_make_chunk(document, len(chunks), first, last))
        return chunks


def _make_chunk(document: Document, index: int, start: int, end: int) -> Chunk:
    return Chunk(
        doc_id=document.id,
        index=index,
        text=document.text[start:end],
        start=start,
        end=end,
        title=document.title,
    )
