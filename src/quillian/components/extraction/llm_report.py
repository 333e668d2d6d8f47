"""What an :class:`~quillian.components.extraction.llm.LLMExtractor` did: its report
(chunks, entities, triples kept and dropped, calls and token usage) and the record of
each chunk stage whose output stayed unusable."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from quillian.components.llm.base import Usage
from quillian.components.llm.tasks import Transcript

__all__ = ["ExtractionFailure", "LLMExtractionReport"]


@dataclass(frozen=True, slots=True)
class ExtractionFailure:
    """A chunk stage whose output stayed unusable after the repair attempt."""

    chunk_id: str
    doc_id: str
    stage: Literal["ner", "relations", "quads"]
    error: str
    raw: str


@dataclass
class LLMExtractionReport:
    """What an :class:`~quillian.components.extraction.llm.LLMExtractor` did over all its
    :meth:`~quillian.components.extraction.llm.LLMExtractor.extract` calls.

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
