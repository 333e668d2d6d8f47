"""A four-document corpus for two-hop questions, and a tiny index over it, for tests.

"Where was the collaborator of Ada Lovelace born?" needs Ada Lovelace's passage (her
collaborator) and Charles Babbage's (his birthplace). The index uses the title-link
extractor and the keyword embedder, so it builds in milliseconds with no model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.base import Embedder
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.retrieval.context import RetrievalContext
from quillian.index import build_index, open_index
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document, Progress

__all__ = ["LOVELACE", "build_tiny", "tiny_index"]

LOVELACE: dict[str, str] = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a proposed mechanical computer.",
    "London": "London is the capital of England.",
}


def build_tiny(
    location: str | Path,
    corpus: Mapping[str, str] = LOVELACE,
    on_progress: Progress | None = None,
    embedder: Embedder | None = None,
    titles: Sequence[str] | None = None,
) -> None:
    """Index ``corpus`` (title to text) into ``location`` (a directory or a server
    location), with no model: passages, title links and keyword vectors (``embedder``:
    another, for a test of the embedding stage). ``titles``: only those documents of
    ``corpus``, linked over all of its titles (an index grown or updated in steps)."""
    build_index(
        [Document(corpus[t], t) for t in (corpus if titles is None else titles)],
        location,
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(dict(corpus)),
        embedder=KeywordEmbedder() if embedder is None else embedder,
        on_progress=on_progress,
    )


def tiny_index(path: Path, corpus: Mapping[str, str] = LOVELACE) -> RetrievalContext:
    """Index ``corpus`` (title to text) into ``path`` and open it."""
    build_tiny(path, corpus)
    return open_index(path, KeywordEmbedder()).context
