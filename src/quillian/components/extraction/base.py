"""What every knowledge-graph extractor produces: per-chunk entities and triples.

Extractors (spaCy NER, precomputed LLM extractions, LLM extraction later) all emit
:class:`Extraction` objects; :mod:`quillian.components.graph.builder` merges them into
one heterogeneous graph, so graph construction never depends on where triples came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from quillian.types import Chunk, Triple

__all__ = ["ExtractedEntity", "Extraction", "Extractor"]


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    """An entity mention found in one chunk.

    ``description`` is what the chunk says about the entity (SA-RAG's entity-description
    node); ``is_topic`` marks the entity a titled document is about (its title).
    ``start``/``end`` locate one mention in the chunk text (-1 when unknown).
    """

    name: str
    type: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    is_topic: bool = False
    start: int = -1
    end: int = -1


@dataclass(frozen=True, slots=True)
class Extraction:
    """Entities and relations extracted from one chunk.

    Every triple's subject and object name one of ``entities`` (by name or alias), and
    its provenance holds the chunk id and the source sentence with its span.
    """

    chunk_id: str
    doc_id: str
    entities: tuple[ExtractedEntity, ...] = ()
    triples: tuple[Triple, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Turns chunks into extractions, one per chunk, in order."""

    name: str

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]: ...
