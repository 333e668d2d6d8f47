"""A deterministic chat model answering by prompt name (``--llm scripted:routes.json``,
demos and tests).

Routes are tried in order: a route matches when its key equals the call's prompt name
(``"sa-rag.answer@1"`` or just ``"sa-rag.answer"``) or occurs in the last user message.
A route's answer is a string, a list of strings served in turn (the last repeats), or
a function of the messages. Every call is recorded, so tests can assert on prompts.
Within :func:`~quillian.components.llm.base.streaming_tokens`, replies stream a word
at a time.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from quillian.components.llm.base import (
    ChatMessage,
    ChatResponse,
    Decoding,
    Usage,
    token_sink,
)
from quillian.errors import QuillianError

__all__ = ["ScriptedCall", "ScriptedChatModel", "UnscriptedPromptError"]

Answer = str | list[str] | Callable[[Sequence[ChatMessage]], str]


class UnscriptedPromptError(QuillianError, LookupError):
    """No route of the scripted model matches a call."""


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    prompt: str
    messages: tuple[ChatMessage, ...]
    decoding: Decoding


def _tokens(text: str) -> int:
    return len(text.split())


class ScriptedChatModel:
    """Canned or computed answers by prompt name or message substring."""

    def __init__(
        self, routes: Mapping[str, Answer], default: str | None = None, *, latency: float = 0.0
    ) -> None:
        """``latency`` seconds pass (asynchronously) before each reply, as with a remote
        model."""
        self._routes = dict(routes)
        self.latency = latency
        self._served: dict[str, int] = {}
        self._default = default
        self.calls: list[ScriptedCall] = []

    @property
    def model_id(self) -> str:
        return "scripted"

    def _answer(self, key: str, messages: Sequence[ChatMessage]) -> str:
        answer = self._routes[key]
        if callable(answer):
            return answer(messages)
        if isinstance(answer, list):
            index = self._served.get(key, 0)
            self._served[key] = index + 1
            return answer[min(index, len(answer) - 1)]
        return answer

    def _route(self, prompt: str, messages: Sequence[ChatMessage]) -> str | None:
        name = prompt.split("@", 1)[0]
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        for key in self._routes:
            if key in (prompt, name) or (key and key in last_user):
                return key
        return None

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse:
        decoding = decoding or Decoding()
        self.calls.append(ScriptedCall(prompt, tuple(messages), decoding))
        if self.latency:
            await asyncio.sleep(self.latency)
        key = self._route(prompt, messages)
        if key is None:
            if self._default is None:
                raise UnscriptedPromptError(f"no scripted answer for prompt {prompt!r}")
            text = self._default
        else:
            text = self._answer(key, messages)
        sink = token_sink()
        if sink is not None:  # stream the reply a word at a time, as a remote model would
            for piece in re.findall(r"\S+\s*|\s+", text):
                sink(prompt, piece)
                await asyncio.sleep(0)
        usage = Usage(sum(_tokens(m.content) for m in messages), _tokens(text))
        return ChatResponse(text, usage, model=self.model_id)
