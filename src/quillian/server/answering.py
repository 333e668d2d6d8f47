"""Answering a question for a request: plainly, or as a stream of typed events.

The stream's events, as they happen: ``retrieval`` (passages and activated subgraph)
for each retrieval the method makes, ``step`` for each step it records, ``token``
(``{"prompt", "text"}``) while the model writes, where its backend streams (the
OpenAI-compatible backend and the scripted model do; a cached reply streams nothing),
then ``final`` (the answer, citations, usage) or ``error``. A failure mid-stream
becomes an ``error`` event, never a dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from quillian.components.llm.base import streaming_tokens
from quillian.components.retrieval.base import RetrievalResult
from quillian.engine import Engine
from quillian.methods.base import AnswerResult
from quillian.methods.steps import Step
from quillian.server import models as m
from quillian.server.sse import EventStream
from quillian.server.views import answer_view, retrieval_view

__all__ = ["ANSWER_EVENTS", "AnswerEvent", "EventObserver", "answer", "answer_events"]

#: The answer stream's events, as the OpenAPI schema publishes them.
ANSWER_EVENTS = EventStream(
    "The answer (JSON), or with ``stream: true`` server-sent events: ``retrieval`` for "
    "each retrieval, ``step`` for each step, ``token`` while the model writes, then "
    "``final`` (the AnswerResponse) or ``error``.",
    (
        ("retrieval", m.RetrieveResponse),
        ("step", m.StepEvent),
        ("token", m.TokenEvent),
        ("final", m.AnswerResponse),
        ("error", m.StreamError),
    ),
)


@dataclass(frozen=True)
class AnswerEvent:
    """One event of an answer stream: its name and its body."""

    name: str
    data: BaseModel


class EventObserver:
    """Turns a run's retrievals and steps into events on a queue (from any thread)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.queue: asyncio.Queue[AnswerEvent | None] = asyncio.Queue()
        self.retrievals: list[m.RetrieveResponse] = []

    def _put(self, event: AnswerEvent) -> None:
        if threading.get_ident() == self.thread:
            self.queue.put_nowait(event)
        else:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)

    def retrieved(self, result: RetrievalResult) -> None:
        seconds = sum(result.trace.timings_ms.values()) / 1000
        view = retrieval_view(result, seconds)
        self.retrievals.append(view)
        self._put(AnswerEvent("retrieval", view))

    def step(self, step: Step) -> None:
        self._put(AnswerEvent("step", m.StepEvent.model_validate(step.as_dict())))

    def token(self, prompt: str, text: str) -> None:
        self._put(AnswerEvent("token", m.TokenEvent(prompt=prompt, text=text)))


async def _run(
    engine: Engine, request: m.AnswerRequest, observer: EventObserver, *, tokens: bool = False
) -> AnswerResult:
    with streaming_tokens(observer.token) if tokens else contextlib.nullcontext():
        return await engine.answer(
            request.question,
            request.method,
            retriever=request.retriever,
            observer=observer,
            **request.options,
        )


async def answer(engine: Engine, request: m.AnswerRequest, timeout_s: float) -> m.AnswerResponse:
    """The answer as one response; a run past ``timeout_s`` raises TimeoutError."""
    observer = EventObserver()
    async with asyncio.timeout(timeout_s):
        result = await _run(engine, request, observer)
    return answer_view(result, observer.retrievals)


async def answer_events(
    engine: Engine,
    request: m.AnswerRequest,
    timeout_s: float,
    describe: Any,
) -> AsyncIterator[AnswerEvent]:
    """The answer as events; ``describe(exc)`` gives an error's ``(status, message)``."""
    observer = EventObserver()
    task = asyncio.create_task(_run(engine, request, observer, tokens=True))
    task.add_done_callback(lambda _: observer.queue.put_nowait(None))
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                event = await asyncio.wait_for(observer.queue.get(), max(remaining, 0.0))
            except TimeoutError:
                message = f"the answer took longer than {timeout_s:g} s"
                yield AnswerEvent("error", m.StreamError(status=504, detail=message))
                return
            if event is not None:
                yield event
                continue
            if task.cancelled():
                yield AnswerEvent("error", m.StreamError(status=499, detail="cancelled"))
            elif (exc := task.exception()) is not None:
                status, message = describe(exc)
                yield AnswerEvent("error", m.StreamError(status=status, detail=message))
            else:
                yield AnswerEvent("final", answer_view(task.result(), observer.retrievals))
            return
    finally:
        if not task.done():
            task.cancel()
