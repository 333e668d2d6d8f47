"""Chunkers: word windows with overlap (SA-RAG's default) and one passage per document."""

from __future__ import annotations

import re

from quillian.errors import ConfigError
from quillian.types import Chunk, Document

__all__ = ["PassageChunker", "WordWindowChunker"]

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

    Suits corpora of short passages (MuSiQue, 2Wiki, HotpotQA). A document of only
    whitespace has no chunks.
    """

    @property
    def name(self) -> str:
        """``passage``."""
        return "passage"

    def chunk(self, document: Document) -> list[Chunk]:
        """Return the document as a single chunk."""
        text = document.text
        stripped = text.lstrip()
        if not stripped:
            return []
        start = len(text) - len(stripped)
        end = len(text.rstrip())
        return [_make_chunk(document, 0, start, end)]


def _make_chunk(document: Document, index: int, start: int, end: int) -> Chunk:
    return Chunk(
        doc_id=document.id,
        index=index,
        text=document.text[start:end],
        start=start,
        end=end,
        title=document.title,
    )
