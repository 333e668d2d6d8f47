"""Turn located mentions into an :class:`Extraction`: merging, topic, descriptions, links.

Shared by every extractor that finds mentions itself (spaCy NER) or locates given
names in the text (precomputed LLM output), so both build topic entities, entity
descriptions and links the same way. A link is named by the predicate the sentence's
dependency parse gives it (:mod:`predicates`) when the passage carries a parse, and is
SA-RAG's ``related_to`` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from quillian.components.extraction.base import ExtractedEntity
from quillian.components.extraction.predicates import (
    TOPIC_PRONOUNS,
    ParsedToken,
    Reading,
    read_predicate,
)
from quillian.components.extraction.text import (
    Span,
    describe,
    find_name,
    lead_description,
    parse_title,
    sentence_of,
)
from quillian.types import Chunk, Provenance, Triple, normalize_name

__all__ = [
    "LINK_VERSION",
    "RELATED_TO",
    "EntityDraft",
    "Mention",
    "Passage",
    "group_mentions",
    "link_triples",
    "title_keys",
    "to_entities",
    "topic_draft",
    "topic_keys",
]

#: The version of the rules making a chunk's links from its mentions (its sentences, by
#: ``text.split_sentences``, and :func:`link_triples`), part of what a stored linked
#: extraction was made with (``SpacyExtractor.link_settings``): 2 ends a sentence at
#: every paragraph break and links the topic only in its document's first chunk or
#: in a chunk naming it.
LINK_VERSION = 2
#: Predicate of SA-RAG's co-occurrence links.
RELATED_TO = "related_to"
#: Words that join a name to a place or house: ``"Adalbert II of Tuscany"`` is not
#: referred to as ``"Tuscany"``, so a name containing one is matched by its first word only.
_CONNECTORS = frozenset({"of", "de", "du", "da", "di", "von", "van", "der", "the", "la", "le"})
#: Types whose single-word mentions are never shortened names of a longer entity.
_NOT_SHORT_NAMES = frozenset({"GPE", "LOC", "DATE", "LANGUAGE", "NORP"})


@dataclass(frozen=True, slots=True)
class Mention:
    """One located mention: a cleaned name, its type and its span in the chunk text."""

    name: str
    type: str
    start: int
    end: int


@dataclass
class EntityDraft:
    """An entity of one chunk under construction: its name and all its mention spans."""

    name: str
    type: str
    spans: list[Span] = field(default_factory=list)
    aliases: tuple[str, ...] = ()
    is_topic: bool = False

    @property
    def key(self) -> str:
        return normalize_name(self.name)

    @property
    def first(self) -> Span:
        return min(self.spans) if self.spans else (-1, -1)


@dataclass(frozen=True, slots=True)
class Passage:
    """A chunk with its sentence spans and, when read, its dependency parse's tokens."""

    chunk: Chunk
    sentences: Sequence[Span]
    tokens: Sequence[ParsedToken] = ()

    def sentence(self, index: int) -> str:
        start, end = self.sentences[index]
        return self.chunk.text[start:end]


def topic_draft(chunk: Chunk, aliases: Mapping[str, str]) -> EntityDraft | None:
    """The topic entity of a titled chunk, with the spans where its title or base occurs.

    ``aliases`` maps titles to their safe global alias (see ``text.title_aliases``).
    """
    title = " ".join(chunk.title.split())
    if not title:
        return None
    names = parse_title(title)
    spans = [s for name in names.local_names for s in find_name(chunk.text, name)]
    alias = aliases.get(title, "")
    return EntityDraft(title, "TITLE", _outermost(spans), (alias,) if alias else (), True)


def topic_keys(topic: EntityDraft) -> frozenset[str]:
    """Normalised names that refer to ``topic`` inside its own chunk."""
    return title_keys(topic.name, topic.aliases)


def title_keys(title: str, aliases: Iterable[str] = ()) -> frozenset[str]:
    """Normalised names that refer to the topic of a chunk titled ``title`` inside that
    chunk: the title, its base and ``aliases``."""
    names = parse_title(" ".join(title.split())).local_names if title.strip() else ()
    return frozenset(k for k in (normalize_name(n) for n in (*names, *aliases)) if k)


def group_mentions(mentions: Iterable[Mention], topic: EntityDraft | None) -> list[EntityDraft]:
    """Merge a chunk's mentions into entities, the topic (if any) first.

    Mentions sharing a normalised name merge. A mention of the title, of its base, or
    of the base with middle names (``"Kerris Lilla Dorsey"`` for ``"Kerris Dorsey"``)
    joins the topic, which takes the mention's type; a mention inside a topic span is
    part of the title and dropped. A single-word mention that is the first word (or
    the last, for names without ``of``/``de``/...) of exactly one longer name in the
    chunk refers to it (``"Boritzer"`` -> ``"Etan Boritzer"``).
    """
    drafts: dict[str, EntityDraft] = {}
    for mention in sorted(mentions, key=lambda m: (m.start, -m.end)):
        key = normalize_name(mention.name)
        if key and not (topic and _joins_topic(mention, key, topic)):
            draft = drafts.setdefault(key, EntityDraft(mention.name, mention.type))
            draft.spans.append((mention.start, mention.end))
    _resolve_short_names(drafts, topic)
    grouped = ([topic] if topic else []) + sorted(drafts.values(), key=lambda d: d.first)
    for draft in grouped:
        draft.spans = sorted(set(draft.spans))
    return grouped


def _joins_topic(mention: Mention, key: str, topic: EntityDraft) -> bool:
    """Whether ``mention`` is (part of) the topic; a topic mention is added to it."""
    span = (mention.start, mention.end)
    if _inside(span, topic.spans):
        return True
    base = parse_title(topic.name).base.split()
    if key not in topic_keys(topic) and not _with_middle_names(mention.name.split(), base):
        return False
    topic.spans.append(span)
    if topic.type == "TITLE" and mention.type:
        topic.type = mention.type
    return True


def _with_middle_names(words: list[str], base: list[str]) -> bool:
    """``"Kerris Lilla Dorsey"`` for a topic titled ``"Kerris Dorsey"``."""
    return (
        len(base) >= 2
        and len(words) > len(base)
        and words[0] == base[0]
        and words[-1] == base[-1]
        and not _CONNECTORS.intersection(words)
    )


def _resolve_short_names(drafts: dict[str, EntityDraft], topic: EntityDraft | None) -> None:
    longer = [d for d in drafts.values() if len(d.name.split()) > 1]
    if topic:
        base = parse_title(topic.name).base
        longer.append(EntityDraft(base, topic.type, topic.spans, is_topic=True))
    for key, draft in list(drafts.items()):
        if " " in draft.name or draft.type in _NOT_SHORT_NAMES:
            continue
        owners = {id(d): d for d in longer if draft.name in _short_forms(d.name)}
        if len(owners) != 1:
            continue
        owner = next(iter(owners.values()))
        target = topic if owner.is_topic and topic else owner
        target.spans.extend(draft.spans)
        del drafts[key]


def _short_forms(name: str) -> tuple[str, ...]:
    words = name.split()
    if len(words) < 2:
        return ()
    if any(w in _CONNECTORS for w in words):
        return (words[0],)
    return (words[0], words[-1])


def _inside(span: Span, spans: Iterable[Span]) -> bool:
    return any(s <= span[0] and span[1] <= e and (s, e) != span for s, e in spans)


def _outermost(spans: Iterable[Span]) -> list[Span]:
    kept: list[Span] = []
    for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        if not kept or start >= kept[-1][1]:
            kept.append((start, end))
    return kept


def to_entities(
    passage: Passage,
    drafts: Sequence[EntityDraft],
    *,
    description_chars: int,
    lead_chars: int,
    fallbacks: Mapping[str, str] | None = None,
) -> tuple[ExtractedEntity, ...]:
    """Entities with descriptions: the sentences mentioning them, or the chunk's lead.

    A topic is described by the chunk's leading sentence(s) (up to ``lead_chars``),
    any other entity by the sentences that mention it (up to ``description_chars``),
    or else by ``fallbacks[key]`` when given.
    """
    text, sentences = passage.chunk.text, passage.sentences
    entities = []
    for draft in drafts:
        if draft.is_topic:
            description = lead_description(text, sentences, lead_chars)
        elif draft.spans and sentences:
            where = [sentence_of(sentences, s) for s, _ in draft.spans]
            description = describe(text, sentences, where, description_chars)
        else:
            description = (fallbacks or {}).get(draft.key, "")
        start, end = draft.first
        entities.append(
            ExtractedEntity(
                name=draft.name,
                type=draft.type,
                aliases=draft.aliases,
                description=description,
                is_topic=draft.is_topic,
                start=start,
                end=end,
            )
        )
    return tuple(entities)


def link_triples(
    passage: Passage, drafts: Sequence[EntityDraft], *, max_per_sentence: int, link_topic: bool
) -> list[Triple]:
    """Links between entities mentioned in the same sentence (SA-RAG's co-occurrence
    links), each named by the predicate the passage's parse gives it, else ``related_to``.

    Each pair is linked once per chunk, by the first sentence where both occur, which is
    the link's description and provenance. Only the first ``max_per_sentence``
    non-topic entities of a sentence are paired (at most ``n*(n-1)/2`` links), so a
    list-like sentence cannot add hundreds of links. With ``link_topic``, the topic is
    also linked to every other entity of the chunk by that entity's first sentence, in
    its document's first chunk or in a chunk naming it (its title or base): Wikipedia
    passages refer to their subject by pronoun as they introduce it ("He was the son of
    X"). A later chunk of a long document that never names its title is not linked to
    it: its names would make the title a hub growing with the document (a text file's
    title is its file's name, named nowhere in the text).
    """
    if not passage.sentences:
        return []
    by_sentence: dict[int, list[tuple[EntityDraft, int]]] = {}
    for draft in drafts:
        for index, at in _first_in_sentences(passage, draft).items():
            by_sentence.setdefault(index, []).append((draft, at))
    linked: set[frozenset[str]] = set()
    triples: list[Triple] = []
    for index in sorted(by_sentence):
        members = _capped(by_sentence[index], max_per_sentence)
        for a, b in combinations(members, 2):
            _link(passage, a, b, index, linked, triples)
    topic = next((d for d in drafts if d.is_topic), None)
    if link_topic and topic and (topic.spans or passage.chunk.index == 0):
        for draft in drafts:
            if draft is not topic and draft.spans:
                index = sentence_of(passage.sentences, draft.first[0])
                _link(passage, topic, draft, index, linked, triples)
    return triples


def _first_in_sentences(passage: Passage, draft: EntityDraft) -> dict[int, int]:
    """Per sentence where ``draft`` is mentioned, its first mention's position there
    (one pass over its spans: a long passage mentions an entity thousands of times)."""
    first: dict[int, int] = {}
    for s, _ in draft.spans:
        index = sentence_of(passage.sentences, s)
        start, end = passage.sentences[index]
        at = s if start <= s < end else start
        first[index] = min(at, first.get(index, at))
    return first


def _capped(members: list[tuple[EntityDraft, int]], limit: int) -> list[EntityDraft]:
    """A sentence's topics, then its first ``limit`` other entities by position."""
    ordered = [d for d, _ in sorted(members, key=lambda m: (not m[0].is_topic, m[1]))]
    topics = [d for d in ordered if d.is_topic]
    return topics + [d for d in ordered if not d.is_topic][:limit]


def _link(
    passage: Passage,
    a: EntityDraft,
    b: EntityDraft,
    index: int,
    linked: set[frozenset[str]],
    out: list[Triple],
) -> None:
    pair = frozenset((a.key, b.key))
    if a.key == b.key or pair in linked:
        return
    linked.add(pair)
    sentence = passage.sentence(index)
    start, end = passage.sentences[index]
    chunk = passage.chunk
    provenance = Provenance(chunk.doc_id, chunk.id, start, end, sentence)
    reading = _reading(passage, a, b, index) if passage.tokens else None
    if reading is None:
        out.append(Triple(a.name, RELATED_TO, b.name, sentence, provenance))
        return
    subject, obj = (a, b) if reading.forward else (b, a)
    out.append(Triple(subject.name, reading.predicate, obj.name, sentence, provenance))


def _reading(passage: Passage, a: EntityDraft, b: EntityDraft, index: int) -> Reading | None:
    """The predicate the parse gives ``a`` and ``b`` in sentence ``index``: between
    their mentions there, a topic not named in it standing as its pronouns."""
    spans_a, spans_b = (_spans_in(passage, d, index) for d in (a, b))
    reading = read_predicate(passage.tokens, spans_a, spans_b)
    if reading and (a if reading.forward else b).type == "DATE":
        return None  # a date is when, never who: "(c. 854-895), count of Arles"
    return reading


def _spans_in(passage: Passage, draft: EntityDraft, index: int) -> list[Span]:
    start, end = passage.sentences[index]
    spans = [s for s in draft.spans if start <= s[0] and s[1] <= end]
    if spans or not draft.is_topic:
        return spans
    return [
        (t.start, t.end)
        for t in passage.tokens
        if start <= t.start < end and t.tag.startswith("PRP") and t.word in TOPIC_PRONOUNS
    ]
