"""A deterministic extractor for tests: links the titles of a known corpus.

Each titled chunk yields its title as the topic entity (described by the chunk text),
every other known title found in its text as a mention, and a ``related_to`` triple
from the topic to each mention whose source sentence is the sentence holding the mention.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.types import Chunk, Provenance, Triple

__all__ = ["TitleLinkExtractor"]

_SENTENCE = re.compile(r"[^.!?]+[.!?]?")


class TitleLinkExtractor:
    """Extracts entities by exact title match; ``fail_on`` titles raise, for error tests."""

    name = "title-link"

    def __init__(self, titles: Iterable[str], fail_on: Iterable[str] = ()) -> None:
        self.titles = sorted(set(titles), key=len, reverse=True)
        self.fail_on = set(fail_on)
        self.calls = 0

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        self.calls += 1
        return [self._one(c) for c in chunks]

    def _one(self, chunk: Chunk) -> Extraction:
        if chunk.title in self.fail_on:
            raise RuntimeError(f"extraction failed for {chunk.title!r}")
        entities = (
            [ExtractedEntity(chunk.title, "TITLE", description=chunk.text, is_topic=True)]
            if chunk.title
            else []
        )
        triples = []
        for match in _SENTENCE.finditer(chunk.text):
            sentence = match.group().strip()
            for title in self.titles:
                if title != chunk.title and title in sentence:
                    entities.append(ExtractedEntity(title, "TITLE"))
                    if chunk.title:
                        prov = Provenance(
                            chunk.doc_id, chunk.id, match.start(), match.end(), sentence
                        )
                        triples.append(Triple(chunk.title, "related_to", title, sentence, prov))
        return Extraction(chunk.id, chunk.doc_id, tuple(entities), tuple(triples))
