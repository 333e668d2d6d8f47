"""Use precomputed LLM extractions (OpenIE JSONL) as an :class:`Extractor`.

Each chunk is matched to its record by title and text (whitespace-normalised). The
record's entities and triple endpoints become entities, described by the sentences
that mention them (found case-insensitively) or, failing that, by their triples as
text; its triples keep the LLM's relation as predicate and are described as
``"subject predicate object"``, with the sentence holding both ends (else the
subject) as provenance. A titled chunk gets its topic entity exactly as the spaCy
extractor builds it. File problems and unmatched chunks go to :attr:`report`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from quillian.components.extraction.assemble import (
    EntityDraft,
    Passage,
    link_triples,
    to_entities,
    topic_draft,
    topic_keys,
)
from quillian.components.extraction.base import Extraction
from quillian.components.extraction.records import ImportReport, OpenIERecord, read_records
from quillian.components.extraction.text import Span, find_name, sentence_of, split_sentences
from quillian.components.extraction.text import title_aliases as safe_aliases
from quillian.errors import ConfigError, InputError
from quillian.types import Chunk, Provenance, Triple, normalize_name

__all__ = ["PrecomputedExtractor"]

logger = logging.getLogger(__name__)

_Key = tuple[str, str]


def _squash(text: str) -> str:
    return " ".join(text.split())


class PrecomputedExtractor:
    """Extractor that replays LLM extractions saved as JSONL (see ``records``).

    The file is read at construction; :attr:`report` lists every repaired or skipped
    item with its line, and the chunks matched and missed by :meth:`extract`. A
    chunk without a record gets only its topic entity (or nothing if untitled) and its
    id is recorded in ``report.missed``. Title aliases are judged safe against all the
    file's titles, so batching chunks does not change them. ``strict`` turns every
    file problem and every missed chunk into an :class:`InputError`. ``link_topic``
    adds SA-RAG ``related_to`` links from the topic to every entity of its chunk, as
    the spaCy extractor does.
    """

    name = "precomputed"

    def __init__(
        self,
        path: str | Path,
        *,
        strict: bool = False,
        link_topic: bool = False,
        description_chars: int = 600,
        lead_chars: int = 300,
    ) -> None:
        if description_chars < 1 or lead_chars < 1:
            raise ConfigError(
                f"description_chars and lead_chars must be at least 1, "
                f"got {description_chars} and {lead_chars}"
            )
        self.path = str(path)
        self.strict = strict
        self.link_topic = link_topic
        self.description_chars = description_chars
        self.lead_chars = lead_chars
        self.report = ImportReport(self.path)
        self._exact: dict[_Key, OpenIERecord] = {}
        self._by_title: dict[str, list[OpenIERecord]] = {}
        for record in read_records(self.path, self.report, strict=strict):
            self._index(record)
        self._titles = set(self._by_title) | {""}
        self._aliases = safe_aliases(self._titles)
        logger.info("%s", self.report.summary())

    def _index(self, record: OpenIERecord) -> None:
        key = (_squash(record.title), _squash(record.text))
        first = self._exact.get(key)
        if first is not None:
            message = f"same title and text as line {first.line}; first kept"
            if self.strict:
                raise InputError(message, path=self.path, line=record.line)
            self.report.add(record.line, "", message, "skipped")
            return
        self._exact[key] = record
        self._by_title.setdefault(key[0], []).append(record)

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One extraction per chunk, in order; unmatched chunks are recorded in the report."""
        titles = {_squash(c.title) for c in chunks} - self._titles
        aliases = self._aliases if not titles else safe_aliases([*self._titles, *titles])
        out = [self._extract_one(chunk, aliases) for chunk in chunks]
        if self.report.missed:
            logger.warning("%s", self.report.summary())
        return out

    def _extract_one(self, chunk: Chunk, aliases: dict[str, str]) -> Extraction:
        record, partial = self._find(chunk)
        topic = topic_draft(chunk, aliases)
        passage = Passage(chunk, split_sentences(chunk.text) if chunk.text.strip() else [])
        if record is None:
            if self.strict:
                raise InputError(
                    f"no record for chunk {chunk.id} (title {chunk.title!r})", path=self.path
                )
            self.report.chunk_missed(chunk.id)
            drafts = [topic] if topic else []
            return self._extraction(passage, drafts, [], {}, 0)
        self.report.chunk_matched(chunk.id, partial)
        return self._from_record(passage, record, topic, partial)

    def _find(self, chunk: Chunk) -> tuple[OpenIERecord | None, bool]:
        title, text = _squash(chunk.title), _squash(chunk.text)
        record = self._exact.get((title, text))
        if record is not None:
            return record, False
        for candidate in self._by_title.get(title, []):
            if text and text in _squash(candidate.text):
                return candidate, True
        return None, False

    def _from_record(
        self, passage: Passage, record: OpenIERecord, topic: EntityDraft | None, partial: bool
    ) -> Extraction:
        text = passage.chunk.text
        located = {
            n: find_name(text, n, ignore_case=True)
            for n in (*record.entities, *(x for t in record.triples for x in (t[0], t[2])))
        }
        triples = [t for t in record.triples if not partial or located[t[0]] or located[t[2]]]
        names = [n for n in record.entities if not partial or located[n]]
        names += [x for t in triples for x in (t[0], t[2])]
        by_key = _drafts(names, located, topic)
        unique = list({id(d): d for d in by_key.values()}.values())
        return self._extraction(passage, unique, triples, by_key, record.line)

    def _extraction(
        self,
        passage: Passage,
        entity_drafts: list[EntityDraft],
        triples: list[tuple[str, str, str]],
        by_key: dict[str, EntityDraft],
        line: int,
    ) -> Extraction:
        chunk = passage.chunk
        fallbacks = _triple_texts(triples, by_key, self.description_chars)
        entities = to_entities(
            passage,
            entity_drafts,
            description_chars=self.description_chars,
            lead_chars=self.lead_chars,
            fallbacks=fallbacks,
        )
        relations = []
        for triple in triples:
            relation = _relation(passage, triple, by_key)
            if isinstance(relation, str):
                self.report.add(line, "triples", f"{triple!r}: {relation}", "skipped")
            else:
                relations.append(relation)
        if self.link_topic:
            relations += link_triples(passage, entity_drafts, max_per_sentence=0, link_topic=True)
        return Extraction(chunk.id, chunk.doc_id, entities, tuple(relations))


def _drafts(
    names: list[str], located: dict[str, list[Span]], topic: EntityDraft | None
) -> dict[str, EntityDraft]:
    """Entity drafts keyed by every normalised name that refers to them."""
    drafts: dict[str, EntityDraft] = {}
    keys = topic_keys(topic) if topic else frozenset()
    if topic:
        drafts.update(dict.fromkeys(keys, topic))
    for name in names:
        key = normalize_name(name)
        if not key:
            continue
        draft = drafts.setdefault(key, EntityDraft(name, ""))
        draft.spans = sorted({*draft.spans, *located.get(name, [])})
    return drafts


def _relation(
    passage: Passage, triple: tuple[str, str, str], by_key: dict[str, EntityDraft]
) -> Triple | str:
    """The relation for ``triple``, or why it cannot be one."""
    subject, predicate, obj = triple
    s_draft = by_key.get(normalize_name(subject))
    o_draft = by_key.get(normalize_name(obj))
    if s_draft is None or o_draft is None:
        return "an end has no usable name"
    if s_draft is o_draft:
        return "subject and object name the same entity"
    chunk = passage.chunk
    index = _source_sentence(passage, s_draft.spans, o_draft.spans)
    if index is None:
        provenance = Provenance(chunk.doc_id, chunk.id, -1, -1, "")
    else:
        start, end = passage.sentences[index]
        provenance = Provenance(chunk.doc_id, chunk.id, start, end, passage.sentence(index))
    description = f"{subject} {predicate} {obj}"
    return Triple(s_draft.name, predicate, o_draft.name, description, provenance)


def _source_sentence(passage: Passage, subject: list[Span], obj: list[Span]) -> int | None:
    if not passage.sentences or not subject:
        return None
    s_idx = [sentence_of(passage.sentences, s) for s, _ in subject]
    o_idx = {sentence_of(passage.sentences, s) for s, _ in obj}
    return next((i for i in s_idx if i in o_idx), s_idx[0])


def _triple_texts(
    triples: list[tuple[str, str, str]], by_key: dict[str, EntityDraft], limit: int
) -> dict[str, str]:
    """Per entity key, its triples rendered as text: the fallback description."""
    texts: dict[str, list[str]] = {}
    for subject, predicate, obj in triples:
        rendered = f"{subject} {predicate} {obj}"
        for name in (subject, obj):
            draft = by_key.get(normalize_name(name))
            if draft is not None:
                texts.setdefault(draft.key, []).append(rendered)
    return {key: "; ".join(parts)[:limit] for key, parts in texts.items()}
