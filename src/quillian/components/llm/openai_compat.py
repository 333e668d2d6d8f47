"""A chat model for any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp server.

Built on the official ``openai`` SDK (``AsyncOpenAI``) with the SDK's own retries turned
off: this class retries 408, 409, 429, 5xx, timeouts and connection errors itself, with
exponential backoff and full jitter, honouring ``Retry-After``. Other client errors
(400, 401, 403, 404, 422) fail at once with a typed :class:`~quillian.errors.LLMError`
whose message names the base URL and the model and says what to do.

The base URL, API key and model come from arguments; nothing is read from the
environment (resolving ``OPENAI_API_KEY`` and the like is the edge's job).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
import pydantic

from quillian.components.llm.base import (
    ChatMessage,
    ChatResponse,
    Decoding,
    TokenSink,
    Usage,
    token_sink,
)
from quillian.errors import (
    ConfigError,
    LLMAuthError,
    LLMError,
    LLMModelNotFoundError,
    LLMRequestError,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
)

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, Ollama) ignore the key; the SDK needs one


@dataclass(frozen=True, slots=True)
class _Failure:
    """A classified failure of one attempt."""

    error: type[LLMError]
    detail: str
    advice: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    raw: str = ""


class OpenAIChatModel:
    """Chat completions from an OpenAI-compatible endpoint.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or
            ``http://localhost:8000/v1`` (vLLM), ``http://localhost:11434/v1`` (Ollama).
        model: the model name the endpoint serves; also this model's ``model_id``.
        api_key: the bearer key; empty for local servers that need none.
        timeout: seconds one attempt may take, end to end.
        max_concurrency: requests in flight at once (per event loop).
        max_retries: retries after the first attempt for retryable failures.
        base_delay: backoff before retry ``k`` is uniform in
            ``[0, min(max_delay, base_delay * 2**k)]`` (full jitter).
        max_delay: cap of the backoff.
        max_retry_after: cap on a server's ``Retry-After``, which otherwise replaces the
            backoff.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        timeout: float = 60.0,
        max_concurrency: int = 8,
        max_retries: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        max_retry_after: float = 60.0,
    ) -> None:
        _validate(base_url, model, timeout, max_concurrency, max_retries, base_delay, max_delay)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max(0.0, max_retry_after)
        self.calls_without_usage = 0
        """Responses whose server sent no ``usage``; they were recorded as zero tokens."""
        self.schema_refused = False
        """Whether the server rejected a request with a JSON-schema ``response_format``
        that it took without one: the calls after it go without."""
        self._api_key = api_key
        self._rng = random.Random()
        # An httpx client and a semaphore belong to one event loop; keep one per loop so
        # the model also works across several ``asyncio.run`` calls.
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[openai.AsyncOpenAI, asyncio.Semaphore]
        ] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def model_id(self) -> str:
        """The model name (part of every cache key)."""
        return self.model

    # -- public API ----------------------------------------------------------------

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse:
        """One chat completion; retries transient failures, raises :class:`LLMError`."""
        decoding = decoding or Decoding()
        if not decoding.json_schema or self.schema_refused:
            return await self._chat(messages, prompt, decoding.free())
        try:
            return await self._chat(messages, prompt, decoding)
        except LLMRequestError as refused:
            response = await self._chat(messages, prompt, decoding.free())  # raises its own
            self.schema_refused = True  # the request passes without the schema
            logger.warning(
                "model %r at %s refused a JSON-schema response format (%s); asking without "
                "it from now on (replies are still parsed and validated)",
                self.model,
                self.base_url,
                refused,
            )
            return response

    async def _chat(
        self, messages: Sequence[ChatMessage], prompt: str, decoding: Decoding
    ) -> ChatResponse:
        payload: list[Any] = [{"role": m.role, "content": m.content} for m in messages]
        extra = _response_format(decoding)
        sink = token_sink()
        if sink is not None:

            def stream(client: openai.AsyncOpenAI) -> Awaitable[ChatResponse]:
                return self._stream(client, payload, decoding, prompt, sink)

            return await self._with_retries(stream, prompt, self.max_retries)

        def create(client: openai.AsyncOpenAI) -> Awaitable[Any]:
            return client.chat.completions.create(
                model=self.model,
                messages=payload,
                temperature=decoding.temperature,
                top_p=decoding.top_p,
                max_tokens=decoding.max_tokens,
                **extra,
            )

        completion = await self._with_retries(create, prompt, self.max_retries)
        return self._response(completion, prompt)

    async def check(self) -> tuple[str, ...]:
        """Fail early and clearly: list the endpoint's models (``GET /models``, one attempt).

        Returns the model names served. Raises :class:`LLMUnavailableError` when the
        endpoint cannot be reached, :class:`LLMAuthError` on a rejected key and
        :class:`LLMModelNotFoundError` when the endpoint lists models but not ours.
        """
        names = await self._with_retries(self._list_models, "", retries=0)
        if names and self.model not in names:
            raise self._model_not_found(names)
        return names

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        state = self._per_loop.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[0].close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- attempts and retries ------------------------------------------------------

    def _state(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key or _PLACEHOLDER_KEY,
                timeout=self.timeout,
                max_retries=0,
            )
            state = (client, asyncio.Semaphore(self.max_concurrency))
            self._per_loop[loop] = state
        return state

    async def _with_retries(
        self, op: Callable[[openai.AsyncOpenAI], Awaitable[T]], prompt: str, retries: int
    ) -> T:
        client, semaphore = self._state()
        for attempt in range(retries + 1):
            try:
                async with semaphore, asyncio.timeout(self.timeout):
                    return await op(client)
            except Exception as exc:
                failure = _classify(exc, self.timeout)
                if failure is None:
                    raise
                if not failure.retryable or attempt == retries:
                    raise await self._error(failure, prompt, attempt + 1) from exc
                delay = self._delay(attempt, failure.retry_after)
                logger.warning(
                    "%s (model %r at %s); retry %d/%d in %.2fs",
                    failure.detail,
                    self.model,
                    self.base_url,
                    attempt + 1,
                    retries,
                    delay,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return self._rng.uniform(0.0, min(self.max_delay, self.base_delay * 2**attempt))

    async def _error(self, failure: _Failure, prompt: str, attempts: int) -> LLMError:
        where = f"model {self.model!r} at {self.base_url}"
        if prompt:
            where += f", prompt {prompt!r}"
        tries = f"; gave up after {attempts} attempts" if attempts > 1 else ""
        message = f"{failure.detail} ({where}){tries}; {failure.advice}"
        common: dict[str, Any] = {
            "base_url": self.base_url,
            "model": self.model,
            "prompt": prompt,
            "status": failure.status,
        }
        if failure.error is LLMModelNotFoundError:
            available = await self._available_models()
            return self._model_not_found(available, prompt=prompt, status=failure.status)
        if failure.error is LLMResponseError:
            return LLMResponseError(message, raw=failure.raw, **common)
        return failure.error(message, **common)

    def _model_not_found(
        self, available: tuple[str, ...], *, prompt: str = "", status: int | None = None
    ) -> LLMModelNotFoundError:
        served = f"it serves: {', '.join(available)}" if available else "it did not list models"
        message = (
            f"{self.base_url} does not serve model {self.model!r} ({served}); "
            "set the model name to one the endpoint serves"
        )
        return LLMModelNotFoundError(
            message,
            base_url=self.base_url,
            model=self.model,
            prompt=prompt,
            status=status,
            available=available,
        )

    # -- models --------------------------------------------------------------------

    async def _list_models(self, client: openai.AsyncOpenAI) -> tuple[str, ...]:
        page = await client.models.list()
        return tuple(m.id for m in page.data)

    async def _available_models(self) -> tuple[str, ...]:
        """The served model names, or ``()`` when the endpoint will not say."""
        try:
            return await self._with_retries(self._list_models, "", retries=0)
        except LLMError:
            return ()

    # -- responses -----------------------------------------------------------------

    async def _stream(
        self,
        client: openai.AsyncOpenAI,
        payload: list[Any],
        decoding: Decoding,
        prompt: str,
        sink: TokenSink,
    ) -> ChatResponse:
        """One streamed completion: each piece of text goes to ``sink`` as it arrives
        (a retried attempt streams again from its start)."""
        stream = await client.chat.completions.create(
            model=self.model,
            messages=payload,
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            max_tokens=decoding.max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            **_response_format(decoding),
        )
        parts: list[str] = []
        usage: Any = None
        finish: str | None = None
        model = ""
        async for chunk in stream:
            model = getattr(chunk, "model", None) or model
            usage = getattr(chunk, "usage", None) or usage
            for choice in (getattr(chunk, "choices", None) or [])[:1]:
                text = getattr(choice.delta, "content", None)
                if text:
                    parts.append(text)
                    sink(prompt, text)
                finish = choice.finish_reason or finish
        return ChatResponse(
            "".join(parts),
            self._usage(usage, prompt),
            truncated=finish == "length",
            model=model or self.model,
        )

    def _response(self, completion: Any, prompt: str) -> ChatResponse:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMResponseError(
                f"the endpoint answered with no chat completion choices (model {self.model!r} "
                f"at {self.base_url}); check that the base URL points at an "
                "OpenAI-compatible API",
                base_url=self.base_url,
                model=self.model,
                prompt=prompt,
                raw=str(completion)[:2000],
            )
        choice = choices[0]
        text = getattr(getattr(choice, "message", None), "content", None) or ""
        return ChatResponse(
            text,
            self._usage(getattr(completion, "usage", None), prompt),
            truncated=getattr(choice, "finish_reason", None) == "length",
            model=getattr(completion, "model", None) or self.model,
        )

    def _usage(self, usage: Any, prompt: str) -> Usage:
        if usage is not None:
            return Usage(
                int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0),
            )
        self.calls_without_usage += 1
        level = logging.WARNING if self.calls_without_usage == 1 else logging.DEBUG
        logger.log(
            level,
            "%s sent no token usage for model %r (prompt %r); recorded as 0 tokens "
            "(%d such responses so far)",
            self.base_url,
            self.model,
            prompt,
            self.calls_without_usage,
        )
        return Usage()


def _validate(
    base_url: str,
    model: str,
    timeout: float,
    max_concurrency: int,
    max_retries: int,
    base_delay: float,
    max_delay: float,
) -> None:
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
    if not model:
        raise ConfigError("model must name the model the endpoint serves, got ''")
    if timeout <= 0:
        raise ConfigError(f"timeout must be greater than 0, got {timeout}")
    if max_concurrency <= 0:
        raise ConfigError(f"max_concurrency must be greater than 0, got {max_concurrency}")
    if max_retries < 0:
        raise ConfigError(f"max_retries must be at least 0, got {max_retries}")
    if not 0 <= base_delay <= max_delay:
        raise ConfigError(
            f"need 0 <= base_delay <= max_delay, got base_delay={base_delay}, max_delay={max_delay}"
        )


def _response_format(decoding: Decoding) -> dict[str, Any]:
    """The request's ``response_format`` for a decoding with a JSON schema (OpenAI's
    structured outputs, which vLLM, llama.cpp's server and Ollama accept too), not
    strict: OpenAI's strict mode refuses schemas with defaults or open objects."""
    if not decoding.json_schema:
        return {}
    schema = json.loads(decoding.json_schema)
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": schema, "strict": False},
        }
    }


def _classify(exc: Exception, timeout: float) -> _Failure | None:
    """What went wrong in one attempt, or ``None`` for an exception that is not ours."""
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return _Failure(
            LLMTimeoutError,
            f"no answer within {timeout:g}s",
            "raise the timeout or check that the server is not overloaded",
            retryable=True,
        )
    if isinstance(exc, openai.APIConnectionError):
        return _Failure(
            LLMUnavailableError,
            f"cannot connect: {exc.__cause__ or exc}",
            "check that the server is running and that the base URL is right",
            retryable=True,
        )
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc)
    if isinstance(exc, json.JSONDecodeError | pydantic.ValidationError):
        raw = getattr(exc, "doc", "") or str(exc)
        return _malformed(str(exc), raw)
    if isinstance(exc, openai.APIResponseValidationError):
        return _malformed(exc.message, str(exc.body))
    return None


def _malformed(detail: str, raw: str) -> _Failure:
    return _Failure(
        LLMResponseError,
        f"the endpoint answered with a malformed chat completion ({detail})",
        "check that the base URL points at an OpenAI-compatible API",
        retryable=False,
        raw=raw[:2000],
    )


def _classify_status(exc: openai.APIStatusError) -> _Failure:
    status = exc.status_code
    body = exc.body if isinstance(exc.body, Mapping) else {}
    said = str(body.get("message") or exc.message)
    if status in (401, 403):
        return _Failure(
            LLMAuthError,
            f"the endpoint rejected the API key (HTTP {status}: {said})",
            "check the API key you configured for this endpoint",
            retryable=False,
            status=status,
        )
    if status == 404:
        if body.get("code") == "model_not_found" or "model" in said.lower():
            return _Failure(LLMModelNotFoundError, said, "", retryable=False, status=status)
        return _Failure(
            LLMUnavailableError,
            f"no such API route (HTTP 404: {said})",
            "check the base URL; OpenAI-compatible servers usually serve under /v1",
            retryable=False,
            status=status,
        )
    if status in _RETRYABLE_STATUS or status >= 500:
        return _Failure(
            LLMUnavailableError,
            f"HTTP {status} from the endpoint: {said}",
            "check that the server is up and not overloaded, or raise max_retries",
            retryable=True,
            status=status,
            retry_after=_retry_after(exc.response.headers),
        )
    return _Failure(
        LLMRequestError,
        f"the endpoint rejected the request (HTTP {status}: {said})",
        "shorten the prompt or fix the decoding parameters",
        retryable=False,
        status=status,
    )


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``Retry-After``)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
