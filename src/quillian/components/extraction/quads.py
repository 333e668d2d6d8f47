"""KAGS's 4-tuples: triples that keep their source sentence.

Two sources:

* :class:`QuadExtractor` asks an LLM for ``[head, relationship, tail, sentences]`` per
  chunk (:data:`~.quad_tasks.EXTRACT_QUADS`); the sentence is the model's own account
  of where the triple came from and is kept as given (its span is found in the chunk
  when it is copied word for word, else -1). Malformed lines, repeated tuples, tuples
  whose ends are one entity and chunks whose reply stays unusable are recorded in
  :attr:`QuadExtractor.report`, and the batch goes on.
* :func:`sentence_quads` turns any other extraction (spaCy's, or recorded OpenIE
  extractions) into 4-tuples: the source sentence is the chunk's sentence holding both
  ends of the triple (the triple's own provenance sentence first); a triple with no
  such sentence is left out and counted. A titled chunk's topic (its title, or the
  title's base) counts as held by each of the chunk's sentences: a Wikipedia-style
  passage names its subject once and then says "he" or "the band", and the spaCy
  extractor links the topic to every entity of its chunk by that entity's sentence
  (:func:`~quillian.components.extraction.assemble.link_triples`), so "He was born in
  Milwaukee" is the source sentence of ``(Herbert A. Simon, related_to, Milwaukee)``
  in Simon's passage.

Either way a 4-tuple is a :class:`~quillian.types.Triple` whose provenance holds the
document, the chunk, the sentence and its span.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from quillian.components.extraction.assemble import title_keys
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.llm import _run_sync
from quillian.components.extraction.llm_report import ExtractionFailure
from quillian.components.extraction.quad_tasks import EXTRACT_QUADS, Quad
from quillian.components.extraction.text import Span, find_name, split_sentences
from quillian.components.llm.base import Usage
from quillian.components.llm.tasks import TaskFailed, TaskRunner, Transcript
from quillian.errors import ConfigError
from quillian.types import Chunk, Provenance, Triple, normalize_name

__all__ = [
    "QUAD_EXTRACTOR",
    "QuadExtractor",
    "QuadReport",
    "locate_sentence",
    "sentence_quads",
]

logger = logging.getLogger(__name__)

#: The name (prefix) of the LLM 4-tuple extractor: its extractions' sentences are the
#: model's and are kept as given.
QUAD_EXTRACTOR = "kags-llm"
#: Longest entity description built from the sentences of its tuples.
DESCRIPTION_CHARS = 600


@dataclass
class QuadReport:
    """What a :class:`QuadExtractor` did: tuples kept, lines and tuples dropped by
    reason, the rejected lines themselves, calls and tokens, and unusable replies."""

    chunks: int = 0
    quads: int = 0
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    dropped: Counter[str] = field(default_factory=Counter)
    rejected: list[tuple[str, str, str]] = field(default_factory=list)
    """``(chunk id, line, reason)`` for every malformed tuple line."""
    failures: list[ExtractionFailure] = field(default_factory=list)

    def summary(self) -> str:
        dropped = ", ".join(f"{k} {n}" for k, n in sorted(self.dropped.items())) or "none"
        return (
            f"{self.chunks} chunks: {self.quads} 4-tuples (dropped: {dropped}); "
            f"{self.calls} calls, {self.usage.prompt_tokens} prompt + "
            f"{self.usage.completion_tokens} completion tokens; {len(self.failures)} failures"
        )


def locate_sentence(text: str, sentence: str) -> Span:
    """The span of ``sentence`` in ``text`` (exact, then ignoring case), else ``(-1, -1)``."""
    at = text.find(sentence)
    if at < 0 and len(text.lower()) == len(text):
        at = text.lower().find(sentence.lower())
    return (at, at + len(sentence)) if at >= 0 else (-1, -1)


def _holds(sentence: str, name: str, topic: frozenset[str]) -> bool:
    return normalize_name(name) in topic or bool(find_name(sentence, name, ignore_case=True))


def sentence_quads(
    extraction: Extraction, chunk: Chunk, dropped: Counter[str] | None = None
) -> list[Triple]:
    """The extraction's triples as 4-tuples whose sentence is the chunk's sentence
    holding both ends (see the module docs); repeats are dropped. ``dropped`` counts
    what was left out by reason."""
    dropped = Counter() if dropped is None else dropped
    spans = split_sentences(chunk.text) if chunk.text.strip() else []
    topic = title_keys(chunk.title)
    out: dict[tuple[str, str, str, str], Triple] = {}
    for triple in extraction.triples:
        found = _both_ends(triple, chunk.text, spans, topic)
        if found is None:
            dropped["no sentence holds both ends"] += 1
            continue
        start, end = found
        sentence = chunk.text[start:end]
        key = (
            normalize_name(triple.subject),
            triple.predicate,
            normalize_name(triple.object),
            sentence,
        )
        if key in out:
            dropped["duplicate"] += 1
            continue
        provenance = Provenance(chunk.doc_id, chunk.id, start, end, sentence)
        description = f"{triple.subject} {triple.predicate} {triple.object}"
        out[key] = Triple(triple.subject, triple.predicate, triple.object, description, provenance)
    return list(out.values())


def _both_ends(
    triple: Triple, text: str, spans: Sequence[Span], topic: frozenset[str]
) -> Span | None:
    """The span of the sentence holding both ends (the chunk's ``topic`` keys are held
    by every sentence): the triple's own, else the first."""
    prov = triple.provenance
    candidates = list(spans)
    if prov is not None and 0 <= prov.start < prov.end:
        candidates.insert(0, (prov.start, prov.end))
    for start, end in candidates:
        sentence = text[start:end]
        if _holds(sentence, triple.subject, topic) and _holds(sentence, triple.object, topic):
            return (start, end)
    return None


class QuadExtractor:
    """KAGS extraction with an LLM: 4-tuples per chunk (see the module docs).

    :attr:`name` (``"kags-llm:<model id>:<prompt key>"``) keys the extraction cache of an
    index, so changing the model or the prompt version re-extracts.
    """

    def __init__(self, runner: TaskRunner, *, concurrency: int = 4) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.runner = runner
        self.concurrency = concurrency
        self.report = QuadReport()
        self.name = (
            f"{QUAD_EXTRACTOR}:{runner.model.model_id}:{runner.prompt_key(EXTRACT_QUADS.prompt)}"
        )

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One extraction per chunk, in order (runs :meth:`aextract`)."""
        if not chunks:
            return []
        return _run_sync(lambda: self.aextract(chunks))

    async def aextract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """:meth:`extract` for async callers: ``concurrency`` chunks in flight."""
        limit = asyncio.Semaphore(self.concurrency)

        async def one(chunk: Chunk) -> Extraction:
            async with limit:
                return await self._extract_one(chunk)

        return list(await asyncio.gather(*(one(c) for c in chunks)))

    async def _extract_one(self, chunk: Chunk) -> Extraction:
        self.report.chunks += 1
        if not chunk.text.strip():
            return Extraction(chunk.id, chunk.doc_id)
        context = f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text
        transcript = Transcript()
        try:
            reply = await self.runner.run(EXTRACT_QUADS, transcript, context=context)
        except TaskFailed as exc:
            failure = ExtractionFailure(chunk.id, chunk.doc_id, "quads", str(exc), exc.raw)
            self.report.failures.append(failure)
            logger.warning("chunk %s (%r): %s", chunk.id, chunk.title, exc)
            return Extraction(chunk.id, chunk.doc_id)
        finally:
            self.report.calls += len(transcript.calls)
            self.report.usage = self.report.usage + transcript.usage
        for line, why in reply.rejected:
            self.report.rejected.append((chunk.id, line, why))
        self.report.dropped["malformed"] += len(reply.rejected)
        self.report.dropped["duplicate"] += reply.duplicates
        extraction = quads_to_extraction(chunk, reply.quads, self.report.dropped)
        self.report.quads += len(extraction.triples)
        return extraction


def quads_to_extraction(
    chunk: Chunk, quads: Sequence[Quad], dropped: Counter[str] | None = None
) -> Extraction:
    """An extraction from a chunk's 4-tuples: the ends become entities (described by
    their tuples' sentences), the tuples triples whose provenance is their sentence."""
    dropped = Counter() if dropped is None else dropped
    names: dict[str, str] = {}
    sentences: dict[str, list[str]] = {}
    triples: dict[tuple[str, str, str, str], Triple] = {}
    for head, relation, tail, sentence in quads:
        h, t = normalize_name(head), normalize_name(tail)
        if not h or not t:
            dropped["unnamed end"] += 1
            continue
        if h == t:
            dropped["same entity"] += 1
            continue
        key = (h, relation, t, sentence)
        if key in triples:
            dropped["duplicate"] += 1
            continue
        head, tail = names.setdefault(h, head), names.setdefault(t, tail)
        for k in (h, t):
            if sentence not in sentences.setdefault(k, []):
                sentences[k].append(sentence)
        start, end = locate_sentence(chunk.text, sentence)
        provenance = Provenance(chunk.doc_id, chunk.id, start, end, sentence)
        triples[key] = Triple(head, relation, tail, f"{head} {relation} {tail}", provenance)
    entities = []
    for name_key, name in names.items():
        first = find_name(chunk.text, name, ignore_case=True)
        start, end = first[0] if first else (-1, -1)
        description = " ".join(sentences[name_key])[:DESCRIPTION_CHARS]
        entities.append(ExtractedEntity(name, description=description, start=start, end=end))
    return Extraction(chunk.id, chunk.doc_id, tuple(entities), tuple(triples.values()))
