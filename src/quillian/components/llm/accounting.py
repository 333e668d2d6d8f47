"""Token, time and cost accounting per stage, as a chat-model wrapper and a plain ledger.

A stage is the prompt name without its version (``"sa-rag.answer@1"`` →
``"sa-rag.answer"``; no prompt → ``"unnamed"``). Tokens of calls served from a cache are
kept apart from billed tokens, and only billed tokens cost money. Put the accountant
outside the cache, ``AccountingChatModel(CachedChatModel(model, path))``, so it sees
which calls were cached.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quillian.components.llm.base import ChatMessage, ChatModel, ChatResponse, Decoding, Usage
from quillian.errors import ConfigError

__all__ = [
    "AccountingChatModel",
    "Ledger",
    "Price",
    "StageUsage",
    "UsageLedger",
    "stage_of",
]

logger = logging.getLogger(__name__)


def stage_of(prompt: str) -> str:
    """The stage a prompt key belongs to: its name without ``@version``, or ``"unnamed"``."""
    return prompt.split("@", 1)[0] or "unnamed"


@dataclass(frozen=True, slots=True)
class Price:
    """Prices in currency units per million input (prompt) and output (completion) tokens."""

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        if self.input_per_million < 0 or self.output_per_million < 0:
            raise ConfigError(f"prices must be at least 0, got {self}")

    def cost(self, usage: Usage) -> float:
        return (
            usage.prompt_tokens * self.input_per_million
            + usage.completion_tokens * self.output_per_million
        ) / 1e6


PriceTable = Mapping[str, Price | tuple[float, float]]
"""Prices per model id, as :class:`Price` or ``(input, output)`` per million tokens."""


@dataclass(frozen=True, slots=True)
class StageUsage:
    """What one stage (or the total) used.

    ``calls`` counts answered calls, ``cached_calls`` those among them served from a
    cache, ``failed_calls`` calls that raised. ``prompt_tokens`` and
    ``completion_tokens`` are billed tokens (calls not cached); the ``cached_*`` tokens
    are what cached calls would have cost. ``seconds`` is the wall time spent in calls,
    failed ones included (concurrent calls overlap, so it can exceed elapsed time).
    ``cost`` is ``None`` when a billed call's model has no price.
    """

    stage: str
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    seconds: float = 0.0
    cost: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        """Billed prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: StageUsage, stage: str | None = None) -> StageUsage:
        """The sum of two records, named ``stage`` (default: this record's stage)."""
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return StageUsage(
            stage=self.stage if stage is None else stage,
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            failed_calls=self.failed_calls + other.failed_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
            cached_completion_tokens=self.cached_completion_tokens + other.cached_completion_tokens,
            seconds=self.seconds + other.seconds,
            cost=cost,
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with ``total_tokens``."""
        return {**dataclasses.asdict(self), "total_tokens": self.total_tokens}


@dataclass(frozen=True, slots=True)
class Ledger:
    """A snapshot: one record per stage (sorted by name) and their total."""

    stages: tuple[StageUsage, ...]
    total: StageUsage

    def stage(self, name: str) -> StageUsage:
        """The record of stage ``name`` (an empty one if it made no calls)."""
        return next((s for s in self.stages if s.stage == name), StageUsage(name))

    def as_dict(self) -> dict[str, Any]:
        """``{"stages": {name: record}, "total": record}``, JSON-ready."""
        return {
            "stages": {s.stage: s.as_dict() for s in self.stages},
            "total": self.total.as_dict(),
        }


class UsageLedger:
    """A thread-safe running account of chat calls per stage.

    Args:
        prices: price per model id; without a table every cost is ``None`` (unknown),
            and a billed call to a model missing from the table makes its stage's cost
            ``None`` (logged once per model).
    """

    def __init__(self, prices: PriceTable | None = None) -> None:
        self.prices: dict[str, Price] | None = None
        if prices is not None:
            self.prices = {
                model: p if isinstance(p, Price) else Price(*p) for model, p in prices.items()
            }
        self._stages: dict[str, StageUsage] = {}
        self._unpriced: set[str] = set()
        self._lock = threading.Lock()

    def record(
        self,
        prompt: str,
        usage: Usage | None,
        *,
        cached: bool = False,
        seconds: float = 0.0,
        model: str = "",
    ) -> None:
        """Add one call under the stage of ``prompt``; ``usage=None`` records a failure."""
        stage = stage_of(prompt)
        if usage is None:
            entry = StageUsage(stage, failed_calls=1, seconds=seconds)
        elif cached:
            entry = StageUsage(
                stage,
                calls=1,
                cached_calls=1,
                cached_prompt_tokens=usage.prompt_tokens,
                cached_completion_tokens=usage.completion_tokens,
                seconds=seconds,
            )
        else:
            entry = StageUsage(
                stage,
                calls=1,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                seconds=seconds,
                cost=self._cost(model, usage),
            )
        with self._lock:
            self._stages[stage] = self._stages.get(stage, StageUsage(stage)).plus(entry)

    def snapshot(self) -> Ledger:
        """The records so far, frozen."""
        with self._lock:
            stages = tuple(self._stages[name] for name in sorted(self._stages))
        total = StageUsage("total")
        for stage in stages:
            total = total.plus(stage)
        return Ledger(stages, total)

    def as_dict(self) -> dict[str, Any]:
        """The current snapshot as JSON-ready data."""
        return self.snapshot().as_dict()

    def _cost(self, model: str, usage: Usage) -> float | None:
        if self.prices is None:
            return None
        price = self.prices.get(model)
        if price is None:
            if model not in self._unpriced:
                self._unpriced.add(model)
                logger.warning("no price for model %r; its cost is reported as unknown", model)
            return None
        return price.cost(usage)


class AccountingChatModel:
    """Records every call of ``inner`` in a :class:`UsageLedger`; replies are unchanged.

    Args:
        inner: the model to account for.
        prices: price per model id (looked up under ``inner.model_id``).
        ledger: a ledger to share with other models; give prices to it, not here.
    """

    def __init__(
        self,
        inner: ChatModel,
        prices: PriceTable | None = None,
        *,
        ledger: UsageLedger | None = None,
    ) -> None:
        if ledger is not None and prices is not None:
            raise ConfigError("pass prices to the shared UsageLedger, not to the model")
        self.inner = inner
        self.usage_ledger = ledger if ledger is not None else UsageLedger(prices)

    def __repr__(self) -> str:
        return f"AccountingChatModel({self.inner!r})"

    @property
    def model_id(self) -> str:
        """The inner model's id."""
        return self.inner.model_id

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse:
        """Call ``inner`` and record the call (a failure too) under the prompt's stage."""
        start = time.perf_counter()
        try:
            response = await self.inner.chat(messages, prompt=prompt, decoding=decoding)
        except Exception:
            self.usage_ledger.record(
                prompt, None, seconds=time.perf_counter() - start, model=self.model_id
            )
            raise
        self.usage_ledger.record(
            prompt,
            response.usage,
            cached=response.cached,
            seconds=time.perf_counter() - start,
            model=self.model_id,
        )
        return response

    def ledger(self) -> Ledger:
        """Per-stage records and their total so far."""
        return self.usage_ledger.snapshot()
