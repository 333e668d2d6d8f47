"""Domain types shared by every Quillian component.

All types are frozen dataclasses whose ids are derived from their content, so the same
document, chunk, entity or triple gets the same id on every run and on every machine.
Only storage adapters serialise these objects; algorithms work on them directly.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

__all__ = [
    "Chunk",
    "Document",
    "Entity",
    "Provenance",
    "Triple",
    "entity_id",
    "key64",
    "normalize_name",
    "relation_id",
    "stable_id",
    "stable_ids",
]


def stable_id(prefix: str, *parts: str) -> str:
    """Return ``prefix-<16 hex chars>`` derived from the SHA-256 of ``parts``.

    Parts are joined with the unit separator U+001F, each part's own U+001F and U+001E
    escaped with U+001E, so ``("ab", "c")`` and ``("a", "bc")`` give different ids, and
    so do ``("a" + US + "b", "c")`` and ``("a", "b" + US + "c")`` (text may hold any
    character). A part holding neither character is hashed as it is: ids made before
    the escape stay.
    """
    joined = _SEP.join(_escaped_part(part) for part in parts)
    digest = hashlib.sha256(joined.encode("utf-8")).hexdigest()
    return f"{prefix}-{digest[:16]}"


#: The separator of a stable id's parts (U+001F) and its escape (U+001E).
_SEP, _ESC = "\x1f", "\x1e"


def stable_ids(prefix: str, rows: Iterable[Sequence[str]]) -> list[str]:
    """:func:`stable_id` of ``prefix`` and each row's parts, in one pass (the many ids
    of a graph build): a row whose joined parts hold no escape and no separator but
    those joining them is hashed as joined."""
    sha, head, out = hashlib.sha256, f"{prefix}-", []
    for row in rows:
        joined = _SEP.join(row)
        if _ESC in joined or joined.count(_SEP) != len(row) - 1:
            joined = _SEP.join(map(_escaped_part, row))
        out.append(head + sha(joined.encode("utf-8")).hexdigest()[:16])
    return out


def key64(text: str) -> int:
    """A signed 64-bit key of ``text`` (the first 8 bytes of its BLAKE2b digest): the id
    a stored text, chunk or triple is keyed by in SQLite tables."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _escaped_part(text: str) -> str:
    if _SEP not in text and _ESC not in text:
        return text
    return text.replace(_ESC, _ESC + _ESC).replace(_SEP, _ESC + _SEP)


#: A long step's progress callback: ``(stage, done, total)``, ``total`` 0 when not known.
Progress = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    """A :data:`Progress` callback that ignores every report."""


_EDGE_PUNCT = "\"'`“”‘’.,;:!?()[]{}"
_ARTICLES = ("the ", "a ", "an ")


#: Keys computed lately, kept: a build normalises each name of a chunk several times
#: (resolving it, its aliases, each relation end and id), the corpus's names again and
#: again (the graph builder's pass at 20k passages took 0.78 s without, 0.56 s with,
#: ``research/update_stages.py``).
@lru_cache(maxsize=1 << 17)
def normalize_name(name: str) -> str:
    """Canonical key for entity-name matching, the only one in Quillian: index entity
    ids, extraction, seeding and imported-graph look-ups all compare names by it.

    Unicode NFKC, case-folded, inner whitespace collapsed, surrounding quotes and
    punctuation stripped, a leading English article dropped. ``"The  Beatles."`` and
    ``"the beatles"`` share a key; ``"Paris"`` and ``"Paris, Texas"`` do not.
    """
    # str.split() splits on exactly the characters the regex \s matches (both use
    # str.isspace), so this equals re.sub(r"\s+", " ", text).strip(), twice as fast
    text = " ".join(unicodedata.normalize("NFKC", name).casefold().split())
    text = text.strip(_EDGE_PUNCT).strip()
    if text.startswith(_ARTICLES):  # no trailing space is left, so a word follows
        return text.partition(" ")[2]
    return text


#: Ids computed lately, kept: a served retrieval names its activated entities and every
#: step of its paths by id, the same few thousand names again and again, and hashing
#: them anew each time took a tenth of the service's time (``quillian.server.load``).
_ID_CACHE = 1 << 16


@lru_cache(maxsize=_ID_CACHE)
def entity_id(name: str) -> str:
    """The id of the entity called ``name`` (``ent-`` and a hash of its normalised name):
    the same in every build and graph, whatever position the entity takes there."""
    return stable_id("ent", normalize_name(name))


@lru_cache(maxsize=_ID_CACHE)
def relation_id(subject: str, predicate: str, obj: str, source: str) -> str:
    """The id of a relation: its ends' normalised names, its predicate, and where it
    was read: a path step's sentence (or, without one, its description), a stored
    triple's chunk id (:attr:`Triple.id`)."""
    return stable_id("rel", normalize_name(subject), predicate, normalize_name(obj), source)


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


@dataclass(frozen=True)
class Chunk:
    """A contiguous piece of a document: ``text == document.text[start:end]``."""

    doc_id: str
    index: int
    text: str
    start: int
    end: int
    title: str = ""

    @cached_property
    def id(self) -> str:
        """``chunk-`` and a hash of the document id, the position and the text, hashed
        once per chunk object (kept beside its fields, not among them: no slots), since
        a build reads every chunk's id in several passes."""
        return stable_id("chunk", self.doc_id, str(self.index), self.text)

    @classmethod
    def stored(
        cls, chunk_id: str, doc_id: str, index: int, text: str, start: int, end: int, title: str
    ) -> Chunk:
        """A chunk read back from a store, its id the one it was stored under (a store
        keys a chunk by :attr:`id`), not hashed again: a build reads every chunk."""
        chunk = object.__new__(cls)  # the frozen fields set at once: 2x faster than __init__
        chunk.__dict__.update(
            doc_id=doc_id, index=index, text=text, start=start, end=end, title=title, id=chunk_id
        )  # ``id`` where the cached property keeps it
        return chunk


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
        return entity_id(self.name)

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
        return relation_id(self.subject, self.predicate, self.object, where)
