"""Chunkers: the protocol, word windows with overlap, and one passage per document."""

from quillian.components.chunking.base import Chunker
from quillian.components.chunking.chunkers import PassageChunker, WordWindowChunker

__all__ = ["Chunker", "PassageChunker", "WordWindowChunker"]
