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
:class:`~quillian.components.generation.tasks.TaskRunner`). A chunk whose NER output is
still unusable yields an empty extraction; one whose relation output is unusable keeps
its entities without triples. Either way the failure (chunk, stage, error, raw text)
goes to :attr:`LLMExtractor.failures`, and the batch goes on.

:func:`estimate_extraction` predicts calls and tokens without calling a model, and an
:class:`ExtractionBudget` stops the extractor (raising
:class:`~quillian.errors.BudgetExhausted`) before a chunk that would exceed it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

from quillian.components.extraction.assemble import EntityDraft, Passage, topic_draft, topic_keys
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.text import (
    Span,
    describe,
    find_name,
    parse_title,
    sentence_of,
    split_sentences,
    title_aliases,
)
from quillian.components.generation.tasks import Task, TaskFailed, TaskRunner, Transcript
from quillian.components.llm.base import ChatMessage, Decoding, Usage
from quillian.components.llm.prompts import PromptRegistry
from quillian.components.llm.structured import ParseError, parse_json_as
from quillian.errors import BudgetExhausted, ConfigError
from quillian.types import Chunk, Provenance, Triple, normalize_name

__all__ = [
    "COMPLETION_RATIO",
    "ENTITY_LIST_RATIO",
    "MESSAGE_TOKENS",
    "NER_TASK",
    "RELATIONS_TASK",
    "ExtractionBudget",
    "ExtractionFailure",
    "LLMExtractionReport",
    "LLMExtractor",
    "NEREntity",
    "Relations",
    "approx_tokens",
    "estimate_extraction",
    "parse_entities",
    "parse_relations",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
TokenCounter = Callable[[str], int]

#: Tokens a chat template adds around each message (role markers), for estimates.
MESSAGE_TOKENS = 4
#: Assumed completion length per stage, as a multiple of the passage's tokens (capped at
#: the stage's ``max_tokens``). The paper's own demonstrations answer with 2.55 times
#: their passage's length for NER (Listing 4: JSON with entity information) and 2.51
#: times for relations (Listing 5: reasoning, then the triples).
COMPLETION_RATIO = {"ner": 2.5, "relations": 2.5}
#: Assumed length of the relation prompt's entity list, as a multiple of the passage's
#: tokens (Listing 5's demonstration: 0.25), since it is known only after NER.
ENTITY_LIST_RATIO = 0.25
#: Longest description built from the chunk's sentences for an entity the model gave
#: no ``entity_information``.
FALLBACK_DESCRIPTION_CHARS = 600

STAGES = ("ner", "relations")


# --- parsing -------------------------------------------------------------------------


class NEREntity(BaseModel):
    """One element of Listing 4's output array (extra keys are refused)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: str = Field(min_length=1)
    type: Literal["PERSON", "ORGANIZATION", "GPE", "MISC"]
    aliases: list[str] = Field(default_factory=list)
    entity_information: str = ""

    @field_validator("type", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("aliases", mode="before")
    @classmethod
    def _no_aliases(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("entity_information", mode="before")
    @classmethod
    def _no_information(cls, value: Any) -> Any:
        return "" if value is None else value


class NEROutput(RootModel[list[NEREntity]]):
    """Listing 4's whole output: a JSON array of entities (possibly empty)."""


class Relations(BaseModel):
    """Listing 5's output object. Triples of the wrong length are kept here and dropped
    (and counted) when the extraction is assembled."""

    model_config = ConfigDict(coerce_numbers_to_str=True, extra="ignore")

    triples: list[list[str]]


def parse_entities(raw: str, prompt: str = "") -> list[NEREntity]:
    """The entity array of an NER reply; anything else raises :class:`ParseError`."""
    return parse_json_as(raw, NEROutput, prompt).root


def parse_relations(raw: str, prompt: str = "") -> Relations:
    """The ``{"triples": [...]}`` object of a relation reply, after any reasoning.

    The first JSON value of the reply is tried first; when it is not the object (the
    reasoning quoted a bracketed list), the object holding ``"triples"`` is read.
    """
    try:
        return parse_json_as(raw, Relations, prompt)
    except ParseError as first:
        at = raw.find('"triples"')
        start = raw.rfind("{", 0, at) if at >= 0 else -1
        if start <= 0:
            raise
        try:
            return parse_json_as(raw[start:], Relations, prompt)
        except ParseError:
            raise first from None


#: Listing 4. Strict: an unknown type or key is a parse error, repaired once.
NER_TASK: Task[list[NEREntity]] = Task("sa-rag.ner", parse_entities, Decoding(max_tokens=4096))
#: Listing 5.
RELATIONS_TASK: Task[Relations] = Task(
    "sa-rag.relations", parse_relations, Decoding(max_tokens=4096)
)


# --- estimates and budget ------------------------------------------------------------


def approx_tokens(text: str) -> int:
    """Default token count: one token per four characters, rounded up (the usual rule
    of thumb for English with BPE tokenizers; pass a real tokenizer for precision)."""
    return (len(text) + 3) // 4


def _message_tokens(messages: Iterable[ChatMessage], count: TokenCounter) -> int:
    return sum(count(m.content) + MESSAGE_TOKENS for m in messages)


@dataclass(frozen=True, slots=True)
class _Cost:
    """Expected calls and tokens of one chunk (both stages)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: _Cost) -> _Cost:
        return _Cost(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def __sub__(self, other: _Cost) -> _Cost:
        return _Cost(
            self.calls - other.calls,
            self.prompt_tokens - other.prompt_tokens,
            self.completion_tokens - other.completion_tokens,
        )


def _sum(costs: dict[str, _Cost]) -> _Cost:
    total = _Cost()
    for cost in costs.values():
        total = total + cost
    return total


def _chunk_costs(chunk: Chunk, prompts: PromptRegistry, count: TokenCounter) -> dict[str, _Cost]:
    """Per stage, the expected cost of extracting ``chunk`` (nothing for a blank chunk)."""
    if not chunk.text.strip():
        return {stage: _Cost() for stage in STAGES}
    passage = count(chunk.text)
    ner = prompts.get(NER_TASK.prompt).render(passage=chunk.text)
    relations = prompts.get(RELATIONS_TASK.prompt).render(passage=chunk.text, entities="")
    prompt_tokens = {
        "ner": _message_tokens(ner, count),
        "relations": _message_tokens(relations, count) + math.ceil(ENTITY_LIST_RATIO * passage),
    }
    limits = {"ner": NER_TASK.decoding.max_tokens, "relations": RELATIONS_TASK.decoding.max_tokens}
    return {
        stage: _Cost(
            1,
            prompt_tokens[stage],
            min(limits[stage], math.ceil(COMPLETION_RATIO[stage] * passage)),
        )
        for stage in STAGES
    }


def estimate_extraction(
    chunks: Sequence[Chunk], prompts: PromptRegistry, count_tokens: TokenCounter | None = None
) -> dict[str, Any]:
    """Calls and tokens that extracting ``chunks`` would take, without calling a model.

    Prompt tokens are counted on the real rendered prompts with ``count_tokens`` (default
    :func:`approx_tokens`, characters / 4), plus :data:`MESSAGE_TOKENS` per message; the
    relation prompt's entity list is assumed to be :data:`ENTITY_LIST_RATIO` times the
    passage. Completion tokens are assumed to be :data:`COMPLETION_RATIO` times the
    passage, capped at each stage's ``max_tokens``. Calls assume one NER and one relation
    call per non-blank chunk: an upper bound on relation calls (skipped for chunks with
    fewer than two entities) and a lower bound if replies need a repair attempt.

    Returns ``{"chunks", "prompts": {stage: key}, "stages": {stage: {"calls",
    "prompt_tokens", "completion_tokens"}}, "total": {..., "tokens"}, "token_counter",
    "assumptions"}`` with stages ``"ner"`` and ``"relations"``.
    """
    count = count_tokens or approx_tokens
    totals = {stage: _Cost() for stage in STAGES}
    for chunk in chunks:
        for stage, cost in _chunk_costs(chunk, prompts, count).items():
            totals[stage] = totals[stage] + cost
    total = totals["ner"] + totals["relations"]

    def row(cost: _Cost) -> dict[str, int]:
        return {
            "calls": cost.calls,
            "prompt_tokens": cost.prompt_tokens,
            "completion_tokens": cost.completion_tokens,
        }

    return {
        "chunks": len(chunks),
        "prompts": {
            "ner": prompts.get(NER_TASK.prompt).key,
            "relations": prompts.get(RELATIONS_TASK.prompt).key,
        },
        "stages": {stage: row(cost) for stage, cost in totals.items()},
        "total": {**row(total), "tokens": total.tokens},
        "token_counter": "chars/4" if count_tokens is None else "given",
        "assumptions": (
            f"completion = {COMPLETION_RATIO['ner']}x (NER) and "
            f"{COMPLETION_RATIO['relations']}x (relations) the passage's tokens; entity "
            f"list = {ENTITY_LIST_RATIO}x; {MESSAGE_TOKENS} tokens per message; one call "
            "per stage and non-blank chunk, no repairs"
        ),
    }


@dataclass(frozen=True, slots=True)
class ExtractionBudget:
    """Limits on what extraction may spend; ``None`` means no limit.

    Only calls that reached the model count (replies from the response cache are free).
    Before each chunk the extractor adds that chunk's estimate (as in
    :func:`estimate_extraction`) to what was spent and what chunks in flight reserved,
    and stops if the sum would pass a limit. A chunk once started is finished, so a
    repair attempt or an estimate below the real size can overshoot a little.
    """

    max_calls: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for label, value in (("max_calls", self.max_calls), ("max_tokens", self.max_tokens)):
            if value is not None and value < 1:
                raise ConfigError(f"{label} must be at least 1, got {value}")

    def admits(self, calls: int, tokens: int) -> bool:
        """Whether spending ``calls`` and ``tokens`` in all stays within the limits."""
        return (self.max_calls is None or calls <= self.max_calls) and (
            self.max_tokens is None or tokens <= self.max_tokens
        )

    def describe(self) -> str:
        parts = [f"{self.max_calls} calls"] if self.max_calls is not None else []
        parts += [f"{self.max_tokens} tokens"] if self.max_tokens is not None else []
        return " and ".join(parts) or "no limit"


# --- reporting -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractionFailure:
    """A chunk stage whose output stayed unusable after the repair attempt."""

    chunk_id: str
    doc_id: str
    stage: Literal["ner", "relations"]
    error: str
    raw: str


@dataclass
class LLMExtractionReport:
    """What an :class:`LLMExtractor` did over all its :meth:`~LLMExtractor.extract` calls.

    ``calls`` and ``usage`` cover every call, cache hits included; ``billed`` is the
    usage of calls that reached the model, which budgets count. ``dropped`` counts
    triples left out by reason: ``"unknown entity"`` (an end names no extracted
    entity), ``"same entity"``, ``"malformed"`` (not three non-empty strings) and
    ``"duplicate"``.
    """

    chunks: int = 0
    entities: int = 0
    triples: int = 0
    calls: int = 0
    cached_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    billed: Usage = field(default_factory=Usage)
    dropped: Counter[str] = field(default_factory=Counter)
    failures: list[ExtractionFailure] = field(default_factory=list)

    @property
    def billed_calls(self) -> int:
        """Calls that reached the model (what budgets count)."""
        return self.calls - self.cached_calls

    def add_calls(self, transcript: Transcript) -> None:
        for call in transcript.calls:
            self.calls += 1
            self.usage = self.usage + call.usage
            if call.cached:
                self.cached_calls += 1
            else:
                self.billed = self.billed + call.usage

    def summary(self) -> str:
        """One line: chunks, entities, triples kept and dropped, calls, tokens, failures."""
        dropped = ", ".join(f"{k} {n}" for k, n in sorted(self.dropped.items())) or "none"
        return (
            f"{self.chunks} chunks: {self.entities} entities, {self.triples} triples "
            f"(dropped: {dropped}); {self.calls} calls ({self.cached_calls} cached), "
            f"{self.usage.prompt_tokens} prompt + {self.usage.completion_tokens} completion "
            f"tokens; {len(self.failures)} failures"
        )


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
            chunk would pass one, :meth:`extract` raises :class:`BudgetExhausted`
            holding the extractions finished before it (see :class:`ExtractionBudget`).
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
        self._reserved = _Cost()

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
        stop: list[tuple[int, _Cost]] = []

        async def worker() -> None:
            for i, chunk in queue:  # next() never awaits: each chunk is taken once
                if stop:
                    return
                cost = _sum(_chunk_costs(chunk, self.runner.prompts, self.count_tokens))
                if not self._admits(cost):
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
            raise self._exhausted([r for r in results[:index] if r is not None], cost)
        return [r for r in results if r is not None]

    def _admits(self, cost: _Cost) -> bool:
        calls = self.report.billed_calls + self._reserved.calls + cost.calls
        tokens = self.report.billed.total_tokens + self._reserved.tokens + cost.tokens
        return self.budget.admits(calls, tokens)

    def _exhausted(self, done: list[Extraction], cost: _Cost) -> BudgetExhausted:
        calls, tokens = self.report.billed_calls, self.report.billed.total_tokens
        return BudgetExhausted(
            f"LLM extraction budget ({self.budget.describe()}) exhausted: spent {calls} "
            f"calls and {tokens} tokens, and the next chunk needs about {cost.calls} calls "
            f"and {cost.tokens} tokens; the extractions done so far are kept, rerun "
            "with a larger budget to resume",
            done=done,
            calls=calls,
            tokens=tokens,
        )

    async def _reserved_run(self, chunk: Chunk, aliases: dict[str, str], cost: _Cost) -> Extraction:
        self._reserved = self._reserved + cost
        transcript = Transcript()
        try:
            extraction = await self._extract_one(chunk, aliases, transcript)
        finally:
            self._reserved = self._reserved - cost
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
