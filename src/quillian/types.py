"""Domain types shared by every Quillian component.

All types are frozen dataclasses whose ids are derived from their content, so the same
document, chunk, entity or triple gets the same id on every run and on every machine.
Only storage adapters serialise these objects; algorithms work on them directly.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Chunk",
    "Document",
    "Entity",
    "Provenance",
    "Triple",
    "normalize_name",
    "stable_id",
]


def stable_id(prefix: str, *parts: str) -> str:
    """Return ``prefix-<16 hex chars>`` derived from the SHA-256 of ``parts``.

    Parts are joined with a separator that cannot occur in UTF-8 text, so
    ``("ab", "c")`` and ``("a", "bc")`` give different ids.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"{prefix}-{digest[:16]}"


_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = "\"'`“”‘’.,;:!?()[]{}"


def normalize_name(name: str) -> str:
    """Canonical key for entity-name matching (SA-RAG's name/alias overlap check).

    Unicode NFKC, case-folded, inner whitespace collapsed, surrounding quotes and
    punctuation stripped, a leading English article dropped. ``"The  Beatles."`` and
    ``"the beatles"`` share a key; ``"Paris"`` and ``"Paris, Texas"`` do not.
    """
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _SPACE.sub(" ", text).strip().strip(_EDGE_PUNCT).strip()
    for article in ("the ", "a ", "an "):
        if text.startswith(article) and len(text) > len(article):
            text = text[len(article) :]
            break
    return text


@dataclass(frozen=True, slots=True)
class Document:
    """A source document as read from a file or a corpus entry."""

    text: str
    title: str = ""
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def id(self) -> str:
        return stable_id("doc", self.title, self.text)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A contiguous piece of a document: ``text == document.text[start:end]``."""

    doc_id: str
    index: int
    text: str
    start: int
    end: int
    title: str = ""

    @property
    def id(self) -> str:
        return stable_id("chunk", self.doc_id, str(self.index), self.text)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a fact came from: the document, the chunk and the source sentence's span.

    ``start``/``end`` are character offsets into the chunk text; ``sentence`` is the
    source sentence itself, kept so a triple can be cited without reopening the chunk.
    """

    doc_id: str
    chunk_id: str
    start: int
    end: int
    sentence: str = ""


@dataclass(frozen=True, slots=True)
class Entity:
    """A named entity with its aliases, type and the descriptions gathered for it."""

    name: str
    type: str = ""
    aliases: tuple[str, ...] = ()
    descriptions: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return stable_id("ent", normalize_name(self.name))

    @property
    def keys(self) -> frozenset[str]:
        """Normalised name and aliases: two entities sharing a key are the same entity."""
        return frozenset(k for k in (normalize_name(n) for n in (self.name, *self.aliases)) if k)


@dataclass(frozen=True, slots=True)
class Triple:
    """A (subject, predicate, object) relation with its text and provenance.

    ``description`` is the textual representation of the relation that SA-RAG embeds
    and returns as context; for co-occurrence relations it is the source sentence.
    """

    subject: str
    predicate: str
    object: str
    description: str = ""
    provenance: Provenance | None = None

    @property
    def id(self) -> str:
        where = self.provenance.chunk_id if self.provenance else ""
        return stable_id(
            "rel",
            normalize_name(self.subject),
            self.predicate,
            normalize_name(self.object),
            where,
        )
