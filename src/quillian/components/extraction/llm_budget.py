"""Dry-run estimate and budget of LLM extraction.

:func:`estimate_extraction` predicts the calls and tokens that extracting chunks with
:class:`~quillian.components.extraction.llm.LLMExtractor` would take, without calling a
model. An :class:`ExtractionBudget` stops the extractor (raising
:class:`~quillian.errors.BudgetExhausted`) before a chunk whose estimate, added to what
was spent and what chunks in flight reserved (:class:`BudgetLedger`), would exceed it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.llm_report import LLMExtractionReport
from quillian.components.extraction.llm_tasks import NER_TASK, RELATIONS_TASK
from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import PromptRegistry
from quillian.components.llm.tasks import Task
from quillian.errors import BudgetExhausted, ConfigError
from quillian.types import Chunk

__all__ = [
    "COMPLETION_RATIO",
    "ENTITY_LIST_RATIO",
    "MESSAGE_TOKENS",
    "ExtractionBudget",
    "approx_tokens",
    "estimate_extraction",
]

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

STAGES = ("ner", "relations")


def approx_tokens(text: str) -> int:
    """Default token count: one token per four characters, rounded up (the usual rule
    of thumb for English with BPE tokenizers; pass a real tokenizer for precision)."""
    return (len(text) + 3) // 4


def _message_tokens(messages: Iterable[ChatMessage], count: TokenCounter) -> int:
    return sum(count(m.content) + MESSAGE_TOKENS for m in messages)


@dataclass(frozen=True, slots=True)
class ChunkCost:
    """Expected calls and tokens of one chunk (both stages)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: ChunkCost) -> ChunkCost:
        return ChunkCost(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def __sub__(self, other: ChunkCost) -> ChunkCost:
        return ChunkCost(
            self.calls - other.calls,
            self.prompt_tokens - other.prompt_tokens,
            self.completion_tokens - other.completion_tokens,
        )


def _sum(costs: dict[str, ChunkCost]) -> ChunkCost:
    total = ChunkCost()
    for cost in costs.values():
        total = total + cost
    return total


def _tasks() -> tuple[Task[Any], Task[Any]]:
    """The NER and relation tasks, whose prompts and ``max_tokens`` the estimate uses."""
    return NER_TASK, RELATIONS_TASK


def _chunk_costs(
    chunk: Chunk, prompts: PromptRegistry, count: TokenCounter
) -> dict[str, ChunkCost]:
    """Per stage, the expected cost of extracting ``chunk`` (nothing for a blank chunk)."""
    if not chunk.text.strip():
        return {stage: ChunkCost() for stage in STAGES}
    ner_task, relations_task = _tasks()
    passage = count(chunk.text)
    ner = prompts.get(ner_task.prompt).render(passage=chunk.text)
    relations = prompts.get(relations_task.prompt).render(passage=chunk.text, entities="")
    prompt_tokens = {
        "ner": _message_tokens(ner, count),
        "relations": _message_tokens(relations, count) + math.ceil(ENTITY_LIST_RATIO * passage),
    }
    limits = {"ner": ner_task.decoding.max_tokens, "relations": relations_task.decoding.max_tokens}
    return {
        stage: ChunkCost(
            1,
            prompt_tokens[stage],
            min(limits[stage], math.ceil(COMPLETION_RATIO[stage] * passage)),
        )
        for stage in STAGES
    }


def chunk_cost(chunk: Chunk, prompts: PromptRegistry, count: TokenCounter) -> ChunkCost:
    """The expected cost of extracting ``chunk``, both stages (as in
    :func:`estimate_extraction`); what the extractor reserves against its budget."""
    return _sum(_chunk_costs(chunk, prompts, count))


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
    ner_task, relations_task = _tasks()
    totals = {stage: ChunkCost() for stage in STAGES}
    for chunk in chunks:
        for stage, cost in _chunk_costs(chunk, prompts, count).items():
            totals[stage] = totals[stage] + cost
    total = totals["ner"] + totals["relations"]

    def row(cost: ChunkCost) -> dict[str, int]:
        return {
            "calls": cost.calls,
            "prompt_tokens": cost.prompt_tokens,
            "completion_tokens": cost.completion_tokens,
        }

    return {
        "chunks": len(chunks),
        "prompts": {
            "ner": prompts.get(ner_task.prompt).key,
            "relations": prompts.get(relations_task.prompt).key,
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


class BudgetLedger:
    """The budget accounting of one extractor: what its chunks in flight reserved.

    A chunk is admitted when what was spent (the billed calls and tokens of the
    extractor's report), what is reserved and the chunk's estimate stay within the
    budget together; it holds its estimate while it runs.
    """

    def __init__(self) -> None:
        self.reserved = ChunkCost()

    def admits(self, budget: ExtractionBudget, spent: LLMExtractionReport, cost: ChunkCost) -> bool:
        """Whether a chunk costing ``cost`` fits ``budget`` now."""
        calls = spent.billed_calls + self.reserved.calls + cost.calls
        tokens = spent.billed.total_tokens + self.reserved.tokens + cost.tokens
        return budget.admits(calls, tokens)

    @contextmanager
    def reserve(self, cost: ChunkCost) -> Iterator[None]:
        """Hold ``cost`` for the duration of the block."""
        self.reserved = self.reserved + cost
        try:
            yield
        finally:
            self.reserved = self.reserved - cost


def budget_exhausted(
    budget: ExtractionBudget, spent: LLMExtractionReport, done: list[Extraction], cost: ChunkCost
) -> BudgetExhausted:
    """The error stopping extraction before a chunk costing ``cost``, holding ``done``."""
    calls, tokens = spent.billed_calls, spent.billed.total_tokens
    return BudgetExhausted(
        f"LLM extraction budget ({budget.describe()}) exhausted: spent {calls} "
        f"calls and {tokens} tokens, and the next chunk needs about {cost.calls} calls "
        f"and {cost.tokens} tokens; the extractions done so far are kept, rerun "
        "with a larger budget to resume",
        done=done,
        calls=calls,
        tokens=tokens,
    )
