"""Corpus-level filters over extractions, independent of how chunks were batched.

Some decisions need the whole corpus: whether the bare name ``"John"`` names one
person or many can only be judged from how many documents use it. Running such a
filter once over all extractions (cached or fresh) gives the same graph however the
extraction calls were batched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.text import parse_title, title_aliases
from quillian.types import normalize_name

__all__ = [
    "UNIQUE_SHORT_TYPES",
    "NameUse",
    "ambiguous_names",
    "drop_ambiguous_names",
    "drop_names",
    "name_use",
    "settle_aliases",
    "settle_title_aliases",
]

logger = logging.getLogger(__name__)

#: Types whose single-word names are unique enough to merge across documents
#: ("France", "Europe", "English", "11 November 875" never name two different things).
UNIQUE_SHORT_TYPES = frozenset({"GPE", "LOC", "LANGUAGE", "DATE"})


def _is_short(entity: ExtractedEntity) -> bool:
    return (
        not entity.is_topic
        and entity.type not in UNIQUE_SHORT_TYPES
        and len(normalize_name(entity.name).split()) == 1
    )


def ambiguous_names(
    extractions: Iterable[Extraction], max_docs: int, protected: Iterable[str] = ()
) -> frozenset[str]:
    """Normalised single-word names used in more than ``max_docs`` documents.

    Only non-topic names of types outside :data:`UNIQUE_SHORT_TYPES` count, and names
    that are a topic's name or alias somewhere, or in ``protected`` (corpus titles), are
    never ambiguous (a passage titled ``"Gundobad"`` makes every ``"Gundobad"`` mention
    that person).
    """
    docs: dict[str, set[str]] = {}
    protected = {normalize_name(n) for n in protected}
    for extraction in extractions:
        for entity in extraction.entities:
            if entity.is_topic:
                protected.update(normalize_name(n) for n in (entity.name, *entity.aliases))
            elif _is_short(entity):
                docs.setdefault(normalize_name(entity.name), set()).add(extraction.doc_id)
    return frozenset(k for k, d in docs.items() if len(d) > max_docs and k not in protected)


def drop_ambiguous_names(
    extractions: Sequence[Extraction], *, max_docs: int, protected: Iterable[str] = ()
) -> list[Extraction]:
    """Remove ambiguous single-word entities (see :func:`ambiguous_names`) and their links.

    Without this, every bare ``"John"``, ``"Duke"`` or ``"Love"`` of a corpus merges
    into one hub entity linking unrelated people, ranks and songs. ``max_docs`` 0
    disables the filter. The filter is idempotent; run it once over the extractions of
    the whole corpus, since document counts (and the titles that protect a name) are
    only complete there.
    """
    if max_docs <= 0:
        return list(extractions)
    drop = ambiguous_names(extractions, max_docs, protected)
    if drop:
        logger.info("dropping %d ambiguous single-word names", len(drop))
    return [_without(extraction, drop) for extraction in extractions]


@dataclass(frozen=True, slots=True)
class NameUse:
    """What one extraction gives the ambiguity filter (:func:`ambiguous_names`):
    ``counted``, the single-word names it counts for its document; ``protected``, the
    names its topics make never ambiguous; ``named``, every name whose dropping would
    change it (its non-topic entities' and its triples' endpoints)."""

    counted: frozenset[str]
    protected: frozenset[str]
    named: frozenset[str]


def name_use(extraction: Extraction) -> NameUse:
    """The names ``extraction`` counts, protects and holds (see :class:`NameUse`)."""
    counted: set[str] = set()
    protected: set[str] = set()
    named: set[str] = set()
    for entity in extraction.entities:
        if entity.is_topic:
            protected.update(normalize_name(n) for n in (entity.name, *entity.aliases))
            continue
        named.add(normalize_name(entity.name))
        if _is_short(entity):
            counted.add(normalize_name(entity.name))
    for triple in extraction.triples:
        named.update((normalize_name(triple.subject), normalize_name(triple.object)))
    return NameUse(frozenset(counted), frozenset(protected), frozenset(named))


def drop_names(extraction: Extraction, drop: frozenset[str]) -> Extraction:
    """``extraction`` without its non-topic entities named in ``drop`` (normalised
    names) and, when one went, the triples naming one: what
    :func:`drop_ambiguous_names` does to each extraction."""
    return _without(extraction, drop)


def _without(extraction: Extraction, drop: frozenset[str]) -> Extraction:
    entities = tuple(
        e for e in extraction.entities if e.is_topic or normalize_name(e.name) not in drop
    )
    if len(entities) == len(extraction.entities):
        return extraction
    triples = tuple(
        t
        for t in extraction.triples
        if normalize_name(t.subject) not in drop and normalize_name(t.object) not in drop
    )
    return replace(extraction, entities=entities, triples=triples)


def settle_title_aliases(
    extractions: Sequence[Extraction], titles: Iterable[str]
) -> list[Extraction]:
    """Give each topic entity its title's alias exactly when it is safe among ``titles``.

    Whether ``"Coney Island Baby"`` may stand for ``"Coney Island Baby (film)"`` across
    the corpus depends on every other title (:func:`text.title_aliases`), so an
    extraction stored when the corpus was smaller may hold an alias that a later title
    makes ambiguous, or lack one that a deleted title made safe. Run once over the
    extractions of the whole corpus, with every document title.
    """
    return settle_aliases(extractions, title_aliases(titles))


def settle_aliases(extractions: Sequence[Extraction], safe: dict[str, str]) -> list[Extraction]:
    """:func:`settle_title_aliases` with the safe aliases already computed (``safe``:
    :func:`text.title_aliases` of the corpus's titles)."""
    return [_settled(extraction, safe) for extraction in extractions]


def _settled(extraction: Extraction, safe: dict[str, str]) -> Extraction:
    entities = list(extraction.entities)
    for i, entity in enumerate(entities):
        title = " ".join(entity.name.split())
        candidate = parse_title(title).alias if entity.is_topic else ""
        if not candidate:
            continue
        others = tuple(a for a in entity.aliases if a != candidate)
        aliases = (candidate, *others) if safe.get(title) == candidate else others
        if aliases != entity.aliases:
            entities[i] = replace(entity, aliases=aliases)
    if entities == list(extraction.entities):
        return extraction
    return replace(extraction, entities=tuple(entities))
