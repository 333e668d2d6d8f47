"""Typed LLM tasks: a prompt, a pure parser, one repair attempt, and a record of each call.

LLM output is untrusted input. A task's parser raises
:class:`~quillian.components.llm.structured.ParseError` on anything it cannot read. The
runner then asks once more with a repair instruction (after a
:class:`~quillian.components.llm.structured.Refusal`, the original prompt again with the
refusal's hint); if that fails too, the task's ``fallback`` (when it has one) turns the
raw text into a value, and otherwise (or when the fallback cannot read it either)
:class:`TaskFailed` is raised. Every attempt, failed or not, lands in the
:class:`Transcript` with its raw text, so failures are counted, never hidden.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from quillian.components.llm.base import ChatMessage, ChatModel, Decoding, Usage
from quillian.components.llm.prompts import PromptRegistry
from quillian.components.llm.stops import cut_reply
from quillian.components.llm.structured import ParseError, Refusal
from quillian.errors import QuillianError

__all__ = ["CallRecord", "Task", "TaskFailed", "TaskRunner", "Transcript", "refusing"]

T = TypeVar("T")

REPAIR = (
    "Your reply could not be used: {error}. Answer again, following the required output "
    "format exactly and writing nothing else."
)


@dataclass(frozen=True)
class Task(Generic[T]):
    """One LLM step: the prompt to render and how to read the reply."""

    prompt: str
    parse: Callable[[str], T]
    decoding: Decoding = field(default_factory=Decoding)
    fallback: Callable[[str], T] | None = None
    repair: str = REPAIR


def refusing(task: Task[T], refuse: Callable[[T], tuple[str, str] | None]) -> Task[T]:
    """``task`` with its parsed replies checked by ``refuse``, which returns why a reply
    is turned down and the hint to ask again with (a
    :class:`~quillian.components.llm.structured.Refusal`), or None. A reply refused
    twice is kept as written; one that does not parse at all goes to the task's own
    fallback (none: the runner fails the task, as without the check)."""

    def parse(raw: str) -> T:
        value = task.parse(raw)
        reason = refuse(value)
        if reason is not None:
            raise Refusal(reason[0], raw, reason[1])
        return value

    def as_written(raw: str) -> T:
        try:
            return task.parse(raw)
        except ParseError:
            if task.fallback is None:
                raise
            return task.fallback(raw)

    return replace(task, parse=parse, fallback=as_written)


@dataclass(frozen=True)
class CallRecord:
    """One model call. ``error`` and ``raw`` are set when its output failed to parse.

    ``stage`` names the step by the method that ran it (``vanilla-rag.passage-note``)
    when the runner knows its method, else it is the prompt key; ``prompt`` is always
    the versioned prompt key (``kg-infused.passage-note@1``: a method may borrow another
    paper's prompt). ``stopped``: the decoding's stop rule ended the reply (what the
    model wrote past that point, if anything, was dropped).
    """

    stage: str
    usage: Usage
    cached: bool
    seconds: float
    truncated: bool = False
    attempt: int = 1
    error: str = ""
    raw: str = ""
    prompt: str = ""
    stopped: bool = False

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stage": self.stage,
            "prompt": self.prompt or self.stage,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "cached": self.cached,
            "seconds": round(self.seconds, 3),
        }
        if self.truncated:
            out["truncated"] = True
        if self.stopped:
            out["stopped"] = True
        if self.attempt > 1:
            out["attempt"] = self.attempt
        if self.error:
            out["error"] = self.error
            out["raw"] = self.raw
        return out


@dataclass
class Transcript:
    """Every call made for one question."""

    calls: list[CallRecord] = field(default_factory=list)

    def add(self, record: CallRecord) -> None:
        self.calls.append(record)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for call in self.calls:
            total = total + call.usage
        return total

    @property
    def parse_failures(self) -> int:
        return sum(1 for c in self.calls if c.error)

    @property
    def model_calls(self) -> int:
        """Calls that reached the model (cache hits excluded)."""
        return sum(1 for c in self.calls if not c.cached)


class TaskFailed(QuillianError):
    """A task's output could not be parsed even after the repair attempt."""

    def __init__(self, prompt: str, error: ParseError) -> None:
        super().__init__(f"{prompt}: unusable model output after a repair attempt: {error}")
        self.prompt = prompt
        self.raw = error.raw


class TaskRunner:
    """Renders a task's prompt, calls the model, parses, repairs once, records.

    ``method``, when given, names the calls' stages (see :class:`CallRecord`).
    """

    def __init__(self, model: ChatModel, prompts: PromptRegistry, method: str = "") -> None:
        self.model = model
        self.prompts = prompts
        self.method = method

    def prompt_key(self, name: str) -> str:
        return self.prompts.get(name).key

    def for_method(self, method: str) -> TaskRunner:
        """This runner on the same model and prompts, its calls labelled by ``method``."""
        return TaskRunner(self.model, self.prompts, method)

    def stage(self, prompt_name: str) -> str:
        """A call's stage: ``method.step`` (the step is the prompt's name without the
        family it comes from), or the prompt key when the runner has no method."""
        if not self.method:
            return self.prompts.get(prompt_name).key
        step = prompt_name.split(".", 1)[-1]
        return f"{self.method}.{step}"

    async def run(self, task: Task[T], transcript: Transcript, **variables: Any) -> T:
        prompt = self.prompts.get(task.prompt)
        messages = prompt.render(**variables)
        for attempt in (1, 2):
            start = time.perf_counter()
            response = await self.model.chat(messages, prompt=prompt.key, decoding=task.decoding)
            seconds = time.perf_counter() - start
            text = cut_reply(task.decoding.stop, response.text)
            stopped = text != response.text  # the rule ends the reply, not the token limit
            if stopped:
                response = replace(response, text=text, truncated=False)
            record = CallRecord(
                self.stage(task.prompt),
                response.usage,
                response.cached,
                seconds,
                response.truncated,
                attempt,
                prompt=prompt.key,
                stopped=stopped,
            )
            try:
                value = task.parse(response.text)
            except ParseError as exc:
                reason = str(exc) + (" (cut off at the token limit)" if response.truncated else "")
                transcript.add(replace(record, error=reason, raw=response.text))
                if attempt == 1:
                    if isinstance(exc, Refusal):  # asked afresh, the reason added
                        last = messages[-1]
                        messages = [
                            *messages[:-1],
                            ChatMessage(last.role, f"{last.content}\n\n{exc.hint}"),
                        ]
                    else:
                        messages = [
                            *messages,
                            ChatMessage("assistant", response.text),
                            ChatMessage("user", task.repair.replace("{error}", _short(exc))),
                        ]
                    continue
                if task.fallback is None:
                    raise TaskFailed(prompt.key, exc) from exc
                try:
                    return task.fallback(response.text)
                except ParseError as again:
                    raise TaskFailed(prompt.key, again) from again
            transcript.add(record)
            return value
        raise AssertionError("unreachable")  # pragma: no cover


def _short(error: ParseError) -> str:
    message = str(error).split("; raw output:", 1)[0]
    return message.split(": ", 1)[1] if message.startswith(error.prompt + ": ") else message
