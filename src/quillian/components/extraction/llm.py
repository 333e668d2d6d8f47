"""LLM knowledge-graph extraction: SA-RAG's NER and relation-extraction prompts per chunk.

For each chunk, ``sa-rag.ner`` (Listing 4) lists the named entities with their type,
aliases and ``entity_information``; then ``sa-rag.relations`` (Listing 5) is given the
chunk and those names and returns ``[subject, relation, object]`` triples. The output
becomes one :class:`Extraction`:

* an entity's description is its ``entity_information`` (the sentences mentioning it
  when the model gave none); its aliases are kept;
* the entity naming a titled chunk's document (by title, title base or safe title
  alias, see :func:`~quillian.components.extraction.assemble.topic_draft`) is the topic:
  it is named by the title, as the other extractors name it, and ``is_topic`` is set;
* a triple is kept when both ends name an extracted entity (by name or alias,
  compared by :func:`~quillian.types.normalize_name`, so case-insensitively), with the
  entities' canonical names as ends; others are dropped and counted by reason in
  :attr:`LLMExtractor.report`. Its provenance is the chunk sentence holding both names,
  else the first holding the subject, else the whole chunk.

Each step is a typed task with a strict pydantic parser and one repair attempt (see
:class:`~quillian.components.llm.tasks.TaskRunner`). A chunk whose NER output is
still unusable yields an empty extraction; one whose relation output is unusable keeps
its entities without triples. Either way the failure (chunk, stage, error, raw text)
goes to :attr:`LLMExtractor.failures`, and the batch goes on.

:func:`~quillian.components.extraction.llm_budget.estimate_extraction` predicts calls
and tokens without calling a model, and an
:class:`~quillian.components.extraction.llm_budget.ExtractionBudget` stops the extractor
(raising :class:`~quillian.errors.BudgetExhausted`) before a chunk that would exceed it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from quillian.components.extraction.assemble import EntityDraft, Passage, topic_draft, topic_keys
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.llm_budget import (
    BudgetLedger,
    ChunkCost,
    ExtractionBudget,
    TokenCounter,
    approx_tokens,
    budget_exhausted,
    chunk_cost,
)
from quillian.components.extraction.llm_report import ExtractionFailure, LLMExtractionReport
from quillian.components.extraction.llm_tasks import (
    NER_TASK,
    RELATIONS_TASK,
    NEREntity,
    Relations,
)
from quillian.components.extraction.text import (
    Span,
    describe,
    find_name,
    parse_title,
    sentence_of,
    split_sentences,
    title_aliases,
)
from quillian.components.llm.tasks import TaskFailed, TaskRunner, Transcript
from quillian.errors import ConfigError
from quillian.types import Chunk, Provenance, Triple, normalize_name

__all__ = ["LLMExtractor"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest description built from the chunk's sentences for an entity the model gave
#: no ``entity_information``.
FALLBACK_DESCRIPTION_CHARS = 600


# --- assembling one chunk --------------------------------------------------------------


@dataclass
class _Entity:
    """An entity of one chunk: what will be emitted and every name it goes by here."""

    entity: ExtractedEntity
    surfaces: tuple[str, ...]
    spans: list[Span]


def _unique(names: Iterable[str], skip: Iterable[str] = ()) -> tuple[str, ...]:
    """Names with distinct, non-empty normalised keys, none of them in ``skip``."""
    seen = set(skip)
    out = []
    for name in names:
        key = normalize_name(name)
        if key and key not in seen:
            seen.add(key)
            out.append(name.strip())
    return tuple(out)


def _merge_duplicates(found: Sequence[NEREntity]) -> list[NEREntity]:
    """One entity per normalised name: aliases joined, distinct information joined."""
    merged: dict[str, NEREntity] = {}
    for entity in found:
        key = normalize_name(entity.name)
        if not key:
            continue
        first = merged.get(key)
        if first is None:
            merged[key] = entity.model_copy()
            continue
        first.aliases = [*first.aliases, *entity.aliases]
        info = entity.entity_information
        if info and info not in first.entity_information:
            first.entity_information = f"{first.entity_information} {info}".strip()
    return list(merged.values())


def _assemble(
    passage: Passage, found: Sequence[NEREntity], topic: EntityDraft | None
) -> tuple[list[_Entity], dict[str, _Entity]]:
    """Entities of a chunk and a map from every normalised name or alias to its entity."""
    text = passage.chunk.text
    keys = topic_keys(topic) if topic else frozenset()
    entities: list[_Entity] = []
    topic_found = False
    for ner in found:
        names = (ner.name, *ner.aliases)
        is_topic = (
            topic is not None and not topic_found and any(normalize_name(n) in keys for n in names)
        )
        if is_topic and topic is not None:
            topic_found = True
            # the title names it; the model's names become aliases unless they are the
            # title or its base (a base such as "Lloyd" is no safe alias corpus-wide)
            name = topic.name
            aliases = (*topic.aliases, *_unique(names, skip=keys))
            surfaces = _unique((*names, *parse_title(topic.name).local_names, *topic.aliases))
        else:
            name = ner.name
            aliases = _unique(ner.aliases, skip=[normalize_name(ner.name)])
            surfaces = _unique(names)
        spans = sorted({s for n in surfaces for s in find_name(text, n, ignore_case=True)})
        description = ner.entity_information or _sentences(passage, spans)
        start, end = spans[0] if spans else (-1, -1)
        extracted = ExtractedEntity(name, ner.type, aliases, description, is_topic, start, end)
        entities.append(_Entity(extracted, surfaces, spans))
    by_key: dict[str, _Entity] = {}
    for item in sorted(entities, key=lambda e: not e.entity.is_topic):
        for key in (normalize_name(item.entity.name), *(keys if item.entity.is_topic else ())):
            by_key.setdefault(key, item)
    for item in entities:
        for surface in item.surfaces:
            by_key.setdefault(normalize_name(surface), item)
    return entities, by_key


def _sentences(passage: Passage, spans: Sequence[Span]) -> str:
    if not spans or not passage.sentences:
        return ""
    where = [sentence_of(passage.sentences, s) for s, _ in spans]
    return describe(passage.chunk.text, passage.sentences, where, FALLBACK_DESCRIPTION_CHARS)


def _provenance(passage: Passage, subject: _Entity, obj: _Entity) -> Provenance:
    """The sentence holding both ends, else the first holding the subject, else the chunk."""
    chunk, sentences = passage.chunk, passage.sentences
    s_idx = sorted({sentence_of(sentences, s) for s, _ in subject.spans}) if sentences else []
    o_idx = {sentence_of(sentences, s) for s, _ in obj.spans} if sentences else set()
    index = next((i for i in s_idx if i in o_idx), s_idx[0] if s_idx else None)
    if index is None:
        return Provenance(chunk.doc_id, chunk.id, 0, len(chunk.text), chunk.text)
    start, end = sentences[index]
    return Provenance(chunk.doc_id, chunk.id, start, end, passage.sentence(index))


def _triples(
    passage: Passage, relations: Relations, by_key: dict[str, _Entity], dropped: Counter[str]
) -> list[Triple]:
    out: list[Triple] = []
    seen: set[tuple[int, str, int]] = set()
    for raw in relations.triples:
        parts = [" ".join(p.split()) for p in raw]
        if len(parts) != 3 or not all(parts):
            dropped["malformed"] += 1
            continue
        subject, predicate, obj = parts
        s_ent, o_ent = by_key.get(normalize_name(subject)), by_key.get(normalize_name(obj))
        if s_ent is None or o_ent is None:
            dropped["unknown entity"] += 1
            continue
        if s_ent is o_ent:
            dropped["same entity"] += 1
            continue
        ident = (id(s_ent), predicate.casefold(), id(o_ent))
        if ident in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(ident)
        out.append(
            Triple(
                s_ent.entity.name,
                predicate,
                o_ent.entity.name,
                f"{subject} {predicate} {obj}",
                _provenance(passage, s_ent, o_ent),
            )
        )
    return out


# --- the extractor ---------------------------------------------------------------------


def _run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine from sync code: ``asyncio.run`` here, or, when this thread already
    runs an event loop (sync code called from async code), on a worker thread with its
    own loop while this thread waits. The model must work across event loops (Quillian's
    chat models keep their per-loop state per loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="quillian-extract") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


class LLMExtractor:
    """SA-RAG extraction with an LLM: NER, then relations, per chunk (see module docs).

    Args:
        runner: runs the typed tasks (model, prompts, one repair attempt).
        concurrency: chunks in flight at once.
        budget: limits on calls and tokens over the extractor's lifetime; when the next
            chunk would pass one, :meth:`extract` raises
            :class:`~quillian.errors.BudgetExhausted` holding the extractions finished
            before it (see :class:`ExtractionBudget`).
        on_failure: called with each :class:`ExtractionFailure` as it happens (default:
            a logged warning); failures are also kept in :attr:`failures`.
        corpus_titles: every document title of the corpus, to judge which title aliases
            are safe (as for the other extractors); the titles of each batch are added.
        count_tokens: token counter for the per-chunk estimate the budget uses.

    :attr:`name` (``"llm:<model id>:<ner prompt key>+<relation prompt key>"``) keys the
    extraction cache of an index, so changing the model or a prompt version re-extracts.
    """

    def __init__(
        self,
        runner: TaskRunner,
        *,
        concurrency: int = 4,
        budget: ExtractionBudget | None = None,
        on_failure: Callable[[ExtractionFailure], None] | None = None,
        corpus_titles: Iterable[str] = (),
        count_tokens: TokenCounter | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.runner = runner
        self.concurrency = concurrency
        self.budget = budget or ExtractionBudget()
        self.on_failure = on_failure
        self.count_tokens = count_tokens or approx_tokens
        self.report = LLMExtractionReport()
        self.name = (
            f"llm:{runner.model.model_id}:{runner.prompt_key(NER_TASK.prompt)}"
            f"+{runner.prompt_key(RELATIONS_TASK.prompt)}"
        )
        self._titles = {" ".join(t.split()) for t in corpus_titles} | {""}
        self._aliases = title_aliases(self._titles)
        self._ledger = BudgetLedger()

    @property
    def failures(self) -> list[ExtractionFailure]:
        """Every chunk stage whose output stayed unusable, in the order they happened."""
        return self.report.failures

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One extraction per chunk, in order.

        Runs :meth:`aextract` with ``asyncio.run``; called from a thread that already
        runs an event loop, it runs it on a worker thread with its own loop and blocks
        until done (a Ctrl-C then waits for the batch in flight). Async callers should
        await :meth:`aextract` instead.
        """
        if not chunks:
            return []
        return _run_sync(lambda: self.aextract(chunks))

    async def aextract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """:meth:`extract` for async callers.

        A fixed pool of ``concurrency`` workers takes chunks in input order (no
        semaphore: the pool is the limit), so the budget is checked chunk by chunk in
        order and a stop leaves exactly a finished prefix. An error other than an
        unusable output (an unreachable endpoint) cancels the other workers and
        propagates.
        """
        new = {" ".join(c.title.split()) for c in chunks} - self._titles
        aliases = self._aliases if not new else title_aliases([*self._titles, *new])
        results: list[Extraction | None] = [None] * len(chunks)
        queue: Iterator[tuple[int, Chunk]] = iter(enumerate(chunks))
        stop: list[tuple[int, ChunkCost]] = []

        async def worker() -> None:
            for i, chunk in queue:  # next() never awaits: each chunk is taken once
                if stop:
                    return
                cost = chunk_cost(chunk, self.runner.prompts, self.count_tokens)
                if not self._ledger.admits(self.budget, self.report, cost):
                    stop.append((i, cost))
                    return
                results[i] = await self._reserved_run(chunk, aliases, cost)

        tasks = [asyncio.ensure_future(worker()) for _ in range(min(self.concurrency, len(chunks)))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        if stop:
            index, cost = stop[0]
            done = [r for r in results[:index] if r is not None]
            raise budget_exhausted(self.budget, self.report, done, cost)
        return [r for r in results if r is not None]

    async def _reserved_run(
        self, chunk: Chunk, aliases: dict[str, str], cost: ChunkCost
    ) -> Extraction:
        transcript = Transcript()
        with self._ledger.reserve(cost):
            try:
                extraction = await self._extract_one(chunk, aliases, transcript)
            finally:
                self.report.add_calls(transcript)
        self.report.chunks += 1
        self.report.entities += len(extraction.entities)
        self.report.triples += len(extraction.triples)
        return extraction

    async def _extract_one(
        self, chunk: Chunk, aliases: dict[str, str], transcript: Transcript
    ) -> Extraction:
        empty = Extraction(chunk.id, chunk.doc_id)
        if not chunk.text.strip():
            return empty
        try:
            found = await self.runner.run(NER_TASK, transcript, passage=chunk.text)
        except TaskFailed as exc:
            self._fail(chunk, "ner", exc)
            return empty
        found = _merge_duplicates(found)
        passage = Passage(chunk, split_sentences(chunk.text))
        entities, by_key = _assemble(passage, found, topic_draft(chunk, aliases))
        extracted = tuple(e.entity for e in entities)
        if len(entities) < 2:
            return Extraction(chunk.id, chunk.doc_id, extracted)
        names = ", ".join(e.name for e in found)
        try:
            relations = await self.runner.run(
                RELATIONS_TASK, transcript, passage=chunk.text, entities=names
            )
        except TaskFailed as exc:
            self._fail(chunk, "relations", exc)
            return Extraction(chunk.id, chunk.doc_id, extracted)
        triples = _triples(passage, relations, by_key, self.report.dropped)
        return Extraction(chunk.id, chunk.doc_id, extracted, tuple(triples))

    def _fail(self, chunk: Chunk, stage: Literal["ner", "relations"], exc: TaskFailed) -> None:
        failure = ExtractionFailure(chunk.id, chunk.doc_id, stage, str(exc), exc.raw)
        self.report.failures.append(failure)
        if self.on_failure is not None:
            self.on_failure(failure)
        else:
            logger.warning("chunk %s (%r): %s", chunk.id, chunk.title, exc)
