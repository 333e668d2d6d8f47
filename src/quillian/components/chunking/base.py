"""The chunker protocol: one document in, its chunks out, in order."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from quillian.types import Chunk, Document

__all__ = ["Chunker"]


@runtime_checkable
class Chunker(Protocol):
    """Splits a document into contiguous chunks.

    Every chunk satisfies ``chunk.text == document.text[chunk.start:chunk.end]``, has
    ``doc_id == document.id``, ``title == document.title`` and ``index`` counting from 0.
    ``name`` describes the chunker and its settings (for manifests and cache keys).
    """

    @property
    def name(self) -> str: ...

    def chunk(self, document: Document) -> list[Chunk]: ...
