"""One narrow protocol for chat models: messages in; text, token usage and a cached flag out.

Wrappers (caching, retries, accounting) keep the same protocol. ``prompt`` names the
prompt and its version (``"sa-rag.answer@1"``) so caches, scripted models and
evaluation manifests can tell calls apart.

A backend that can stream its reply also hands each piece of text, as it arrives, to
the token sink of the running task (:func:`streaming_tokens`), if one is set; the
reply it returns is the same either way. Wrappers need not know: a cached reply
streams nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatResponse",
    "Decoding",
    "TokenSink",
    "Usage",
    "streaming_tokens",
    "token_sink",
]

TokenSink = Callable[[str, str], None]
"""Receives ``(prompt, text)`` for each piece of a reply a backend streams."""

_TOKEN_SINK: ContextVar[TokenSink | None] = ContextVar("quillian_token_sink", default=None)


@contextmanager
def streaming_tokens(sink: TokenSink) -> Iterator[None]:
    """Within the block (and tasks started in it), streaming backends send ``sink``
    the text of their replies as it arrives."""
    reset = _TOKEN_SINK.set(sink)
    try:
        yield
    finally:
        _TOKEN_SINK.reset(reset)


def token_sink() -> TokenSink | None:
    """The running task's token sink, if any (for backends)."""
    return _TOKEN_SINK.get()


Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant"):
            raise ValueError(f"unknown chat role {self.role!r}")


@dataclass(frozen=True, slots=True)
class Decoding:
    """Decoding parameters; part of every cache key.

    ``json_schema``: a JSON schema (as JSON text) the reply is to match, or empty. A
    backend that can constrain its decoding to it does (the local model through
    llguidance, an OpenAI-compatible server through ``response_format``), so a small
    model cannot break the format; the reply is parsed and validated either way.

    ``grammar``: a grammar in llguidance's Lark dialect the reply is to match, or empty,
    for replies that are not JSON (KAG's ``StepN``/``ActionN`` plans and its judge's
    verdict, Know3-RAG's relevance verdict and answer). The local model
    holds its decoding to it; an OpenAI-compatible server is asked without it (the
    chat API has no portable grammar field), and the reply is parsed either way. At
    most one of the two is set.

    ``stop``: the name of a stop rule (:mod:`quillian.components.llm.stops`), or empty.
    The task runner cuts the reply where the rule says; the local model stops decoding
    there.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    json_schema: str = ""
    grammar: str = ""
    stop: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be greater than 0, got {self.max_tokens}")
        if self.json_schema:
            try:
                schema = json.loads(self.json_schema)
            except json.JSONDecodeError as exc:
                raise ValueError(f"json_schema is not JSON: {exc}") from None
            if not isinstance(schema, dict):
                raise ValueError("json_schema must be a JSON object")
        if self.json_schema and self.grammar:
            raise ValueError("a decoding holds a reply to a json_schema or a grammar, not both")

    def free(self) -> Decoding:
        """The same parameters without the schema or grammar."""
        held = self.json_schema or self.grammar
        return replace(self, json_schema="", grammar="") if held else self


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """What a model said. ``truncated`` is set when it stopped at the token limit."""

    text: str
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    truncated: bool = False
    model: str = ""


@runtime_checkable
class ChatModel(Protocol):
    """An asynchronous chat model."""

    @property
    def model_id(self) -> str: ...

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse: ...
