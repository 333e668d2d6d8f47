"""Chat models from a one-line spec, wrapped with the response cache and accounting.

Specs:

- ``local``: the bundled Qwen2.5-Coder-0.5B-Instruct GGUF (extra ``local``);
  ``local:/path/model.gguf`` any other GGUF file; ``local-int8`` and
  ``local-int8:/path/model.gguf`` the same with int8 linear layers, weights per channel
  and activations per token (about 3 times faster, close to float32 but not equal: it
  answers the README's question "Newell" where float32 answers "Milwaukee":
  ``python research/first_run.py --llm local-int8``);
- ``openai:MODEL``: the OpenAI API (key from the caller, e.g. ``OPENAI_API_KEY``);
- ``http://host:port/v1#MODEL``: any OpenAI-compatible server (vLLM, Ollama,
  llama.cpp server);
- ``scripted:FILE.json``: a :class:`~quillian.components.llm.scripted.ScriptedChatModel` with
  routes from a JSON object ``{"prompt name": "reply" | ["reply", ...]}``, for offline
  demos and tests.

A spec may end in options, ``?name=value``, joined by ``&``:

- ``schema=off``: the tasks that read JSON then leave the model free instead of holding
  it to their reply's schema (``Decoding.json_schema``; the default, ``schema=on``, holds
  the local model token by token and asks an HTTP endpoint for structured output), and
  so do the tasks whose reply has a grammar (``Decoding.grammar``: KAG's plans and
  judge, Know3-RAG's verdicts and answers; only the local model is held to one). Free
  replies are still parsed and validated, and key the response cache as they did before
  schemas existed.
- ``prefix-cache=MB`` (local models only): memory for the attention keys and values of
  recent prompts, reused by a prompt that begins the same way (default 512; ``0`` turns
  the reuse off, :mod:`quillian.components.llm.prefix_cache`).

The edge (CLI, server) resolves the API key and paths; nothing here reads the
environment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from quillian.components.llm.accounting import AccountingChatModel, Ledger
from quillian.components.llm.base import ChatMessage, ChatModel, ChatResponse, Decoding
from quillian.components.llm.cache import CachedChatModel
from quillian.components.llm.local import LocalChatModel
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.errors import ConfigError, InputError
from quillian.types import Progress

__all__ = ["FreeOutput", "LLMSession", "LLMSpec", "parse_llm_spec"]

OPENAI_URL = "https://api.openai.com/v1"

Kind = Literal["local", "openai", "scripted", "model"]


@dataclass(frozen=True)
class LLMSpec:
    kind: Kind
    model: str = ""
    base_url: str = ""
    path: str = ""
    dtype: str = ""
    schema: bool = True
    """Whether tasks hold the model to their reply's schema or grammar (``?schema=off``:
    no)."""
    prefix_cache_mb: int | None = None
    """A local model's memory for reused prompt prefixes; ``None``: its default."""


_ON_OFF = {"on": True, "off": False}


def parse_llm_spec(spec: str) -> LLMSpec:
    """Read a spec string (see the module docstring); a malformed one raises
    :class:`ConfigError` listing the accepted forms."""
    spec = spec.strip()
    head, mark, options = spec.rpartition("?")
    if mark and "#" not in options and head:
        return _with_options(parse_llm_spec(head), options, spec)
    for prefix, dtype in (("local-int8", "int8"), ("local", "")):
        if spec == prefix:
            return LLMSpec("local", dtype=dtype)
        if spec.startswith(prefix + ":") and spec[len(prefix) + 1 :]:
            return LLMSpec("local", path=spec[len(prefix) + 1 :], dtype=dtype)
    if spec.startswith("openai:") and spec[7:]:
        return LLMSpec("openai", model=spec[7:], base_url=OPENAI_URL)
    if spec.startswith("scripted:") and spec[9:]:
        return LLMSpec("scripted", path=spec[9:])
    if spec.startswith(("http://", "https://")) and "#" in spec:
        url, model = spec.split("#", 1)
        if url and model:
            return LLMSpec("openai", model=model, base_url=url.rstrip("/"))
    raise ConfigError(
        f"cannot read LLM spec {spec!r}; use 'local', 'local:/path/model.gguf', "
        "'local-int8[:/path]', 'openai:MODEL', 'http://host:port/v1#MODEL' or "
        "'scripted:routes.json', optionally followed by options such as '?schema=off'"
    )


_OPTIONS_HELP = "options are schema=on|off and (local models) prefix-cache=MB, joined by &"


def _with_options(spec: LLMSpec, options: str, whole: str) -> LLMSpec:
    for option in options.split("&"):
        name, _, value = option.partition("=")
        if name == "schema" and value in _ON_OFF:
            spec = replace(spec, schema=_ON_OFF[value])
        elif name == "prefix-cache" and spec.kind == "local" and value.isdigit():
            spec = replace(spec, prefix_cache_mb=int(value))
        else:
            raise ConfigError(f"cannot read LLM spec {whole!r}: {option!r}; {_OPTIONS_HELP}")
    return spec


def _scripted(path: str) -> ChatModel:
    try:
        routes = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read scripted routes ({exc})", path=path) from exc
    if not isinstance(routes, dict):
        raise InputError("scripted routes must be a JSON object", path=path)
    default = routes.pop("default", None)
    return ScriptedChatModel(routes, default=default)


def _inner(
    spec: LLMSpec, api_key: str, concurrency: int, on_progress: Progress | None
) -> ChatModel:
    if spec.kind == "local":
        options: dict[str, Any] = {"on_progress": on_progress}
        if spec.dtype:
            options["dtype"] = spec.dtype
        if spec.prefix_cache_mb is not None:
            options["prefix_cache_mb"] = spec.prefix_cache_mb
        return LocalChatModel(spec.path or None, **options)
    if spec.kind == "scripted":
        return _scripted(spec.path)
    # imported on use: the openai client takes about half a second to import
    from quillian.components.llm.openai_compat import OpenAIChatModel

    return OpenAIChatModel(spec.base_url, spec.model, api_key=api_key, max_concurrency=concurrency)


class FreeOutput:
    """A chat model that asks ``inner`` with no reply schema (``?schema=off``)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse:
        free = (decoding or Decoding()).free()
        return await self.inner.chat(messages, prompt=prompt, decoding=free)


class LLMSession:
    """A chat model for one run: ``AccountingChatModel(CachedChatModel(model))`` (with
    :class:`FreeOutput` between the two for ``?schema=off``), from a spec or around a
    :class:`ChatModel` the caller built.

    Use as an async context manager: entering checks an HTTP endpoint once (a clear
    error for an unreachable server, a wrong key or an unknown model), and leaving
    closes the cache and the HTTP client. A local model is loaded on entering, unless
    ``lazy`` and there is a response cache: then it loads on the first call the cache
    misses, so a rerun whose every reply is cached never loads it (what a one-shot
    command wants; a server wants the load done before its first question).
    ``on_progress`` sees the load (:data:`~quillian.components.llm.local.LOAD_STAGE`).
    """

    def __init__(
        self,
        spec: str | LLMSpec | ChatModel,
        *,
        api_key: str = "",
        cache_path: Path | None = None,
        concurrency: int = 4,
        on_progress: Progress | None = None,
        lazy: bool = False,
    ) -> None:
        if isinstance(spec, str | LLMSpec):
            self.spec = parse_llm_spec(spec) if isinstance(spec, str) else spec
            self.backend = _inner(self.spec, api_key, concurrency, on_progress)
        else:  # a chat model the caller built (a library user's own backend, a test's)
            self.spec = LLMSpec("model", model=spec.model_id)
            self.backend = spec
        self.cache = CachedChatModel(self.backend, cache_path) if cache_path else None
        inner: ChatModel = self.cache or self.backend
        self.model = AccountingChatModel(inner if self.spec.schema else FreeOutput(inner))
        self.lazy = lazy and self.cache is not None

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def ledger(self) -> Ledger:
        return self.model.ledger()

    async def __aenter__(self) -> LLMSession:
        """Check an HTTP endpoint before the first question, and load a local model
        then (unless ``lazy``), so neither counts in the first question's time."""
        for name in ("check",) if self.lazy else ("check", "load"):
            step = getattr(self.backend, name, None)
            if step is not None:
                await step()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.cache is not None:
            self.cache.close()
        aclose = getattr(self.backend, "aclose", None)
        if aclose is not None:
            await aclose()
