"""What every question-answering pipeline shares: the per-question run record, the
result it returns, and retrieval that keeps the evidence."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from quillian.components.concurrency import Offload, to_thread
from quillian.components.generation.evidence import Evidence
from quillian.components.llm.tasks import TaskFailed, TaskRunner, Transcript
from quillian.components.retrieval.base import (
    RetrievalResult,
    Retriever,
    ScoredPassage,
    UsedRelation,
)
from quillian.errors import ConfigError
from quillian.methods.steps import Retrieval, Step

__all__ = [
    "AnswerResult",
    "Pipeline",
    "PipelineBase",
    "Retrieve",
    "Run",
    "RunObserver",
    "StepLog",
    "dual_retrieve",
]


class RunObserver(Protocol):
    """Watches a question being answered (the server streams what it sees): each
    retrieval with its full trace, and each step as the method records it."""

    def retrieved(self, result: RetrievalResult) -> None: ...

    def step(self, step: Step) -> None: ...


class StepLog(list[Step]):
    """The steps of a run; tells the run's observer, if any, about each one appended."""

    def __init__(self, observer: RunObserver | None = None) -> None:
        super().__init__()
        self.observer = observer

    def append(self, step: Step) -> None:
        super().append(step)
        if self.observer is not None:
            self.observer.step(step)


@dataclass
class Run:
    """The state of answering one question: evidence so far, calls made, steps taken."""

    question: str
    evidence: Evidence = field(default_factory=Evidence)
    transcript: Transcript = field(default_factory=Transcript)
    steps: list[Step] = field(default_factory=StepLog)
    observer: RunObserver | None = None


@dataclass
class AnswerResult:
    """An answer with what it rests on and what it cost. ``error`` is set when the
    pipeline could not finish (the answer is then empty)."""

    method: str
    question: str
    answer: str
    evidence: Evidence
    transcript: Transcript
    steps: list[Step]
    seconds: float
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        usage = self.transcript.usage
        return {
            "method": self.method,
            "question": self.question,
            "answer": self.answer,
            "error": self.error,
            "evidence": self.evidence.as_dict(),
            "steps": [step.as_dict() for step in self.steps],
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "llm_calls": len(self.transcript.calls),
            "parse_failures": self.transcript.parse_failures,
            "seconds": round(self.seconds, 3),
            "calls": [c.as_dict() for c in self.transcript.calls],
        }


@runtime_checkable
class Pipeline(Protocol):
    name: str

    async def answer(self, question: str, observer: RunObserver | None = None) -> AnswerResult: ...


class PipelineBase:
    """Runs :meth:`_answer` under a fresh :class:`Run`; a task whose output stays
    unusable after its repair attempt ends the question with a recorded error.

    Retrieval runs through ``offload`` (default: asyncio's thread pool), off the event
    loop, so one process answers many questions at once."""

    name = "pipeline"
    needs_retriever = True
    #: The method's configuration dataclass (its options); None: it takes none.
    config_class: ClassVar[type[Any] | None] = None

    def __init__(
        self,
        runner: TaskRunner,
        retriever: Retriever | None = None,
        config: Any = None,
        *,
        offload: Offload | None = None,
    ) -> None:
        if self.needs_retriever and retriever is None:
            raise ConfigError(f"method {self.name!r} needs a retriever (an index)")
        if config is None and self.config_class is not None:
            config = self.config_class()
        self.runner = runner
        self._retriever = retriever
        self.config = config
        self.offload: Offload = offload or to_thread

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            raise ConfigError(f"method {self.name!r} has no retriever")
        return self._retriever

    async def answer(self, question: str, observer: RunObserver | None = None) -> AnswerResult:
        """Answer ``question``; ``observer`` sees retrievals and steps as they happen."""
        if not question.strip():
            raise ConfigError("the question is empty")
        run = Run(question, steps=StepLog(observer), observer=observer)
        start = time.perf_counter()
        answer, error = "", ""
        try:
            answer = await self._answer(run)
        except TaskFailed as exc:
            error = str(exc)
        return AnswerResult(
            self.name,
            question,
            answer.strip(),
            run.evidence,
            run.transcript,
            run.steps,
            time.perf_counter() - start,
            error,
        )

    async def _answer(self, run: Run) -> str:
        raise NotImplementedError

    async def retrieve(
        self, run: Run, query: str, k: int
    ) -> tuple[list[ScoredPassage], list[UsedRelation]]:
        """Top-``k`` passages (and the relations the retriever used) for ``query``,
        computed off the event loop; both join the run's evidence."""
        result = await self.offload(self.retriever.retrieve, query, k)
        if run.observer is not None:
            run.observer.retrieved(result)
        run.evidence.add_passages(result.passages)
        run.evidence.add_relations(result.trace.relations)
        run.evidence.add_paths(result.trace.paths)
        run.steps.append(
            Retrieval(query, result.method, tuple(p.chunk_id for p in result.passages))
        )
        return result.passages, result.trace.relations


Retrieve = Callable[[Run, str, int], Awaitable[tuple[list[ScoredPassage], list[UsedRelation]]]]
"""A pipeline's :meth:`PipelineBase.retrieve`."""


async def dual_retrieve(
    retrieve: Retrieve, run: Run, query: str, expanded: str, k: int
) -> list[ScoredPassage]:
    """KG-Infused RAG's eq. 7, shared by vanilla query expansion: ``k/2`` passages for
    the query and ``k - k/2`` for the expanded query, merged without duplicates (so
    possibly fewer than ``k``)."""
    first, _ = await retrieve(run, query, k // 2)
    second, _ = await retrieve(run, expanded, k - k // 2)
    seen = {p.chunk for p in first}
    return first + [p for p in second if p.chunk not in seen]
