"""A real HTTP server speaking the OpenAI chat wire format, for offline tests.

It listens on ``127.0.0.1`` on a free port in a background thread and serves
``POST /v1/chat/completions`` and ``GET /v1/models``. Behaviour is scriptable through
attributes and :meth:`FakeOpenAIServer.fail_next`, and it counts what it received so
tests can assert how many real calls were made::

    with FakeOpenAIServer(reply=lambda messages: "Paris") as server:
        model = OpenAIChatModel(server.base_url, api_key=server.api_key, model="fake-model")
        ...
        assert server.chat_requests == 1

Replies are cut to ``max_tokens`` whitespace tokens, in which case ``finish_reason``
is ``"length"``; usage counts whitespace tokens.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "Reply"]

Reply = Callable[[list[dict[str, Any]]], str | None]
"""A reply as a function of the request's messages (``{"role", "content"}`` dicts);
``None`` becomes ``"content": null``."""


def _echo(messages: list[dict[str, Any]]) -> str:
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return f"echo: {last_user['content']}" if last_user else "echo:"


def _tokens(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True, slots=True)
class _Failure:
    status: int
    retry_after: str | None


class FakeOpenAIServer:
    """An OpenAI-compatible HTTP server with scriptable faults.

    Args:
        reply: the assistant's text as a function of the messages (default: an echo of
            the last user message).
        api_key: the key every request must bear (``Authorization: Bearer ...``);
            ``None`` accepts any or none. Wrong keys get 401 ``invalid_api_key``.
        models: the model names served; others get 404 ``model_not_found``.
            ``None`` accepts any name.

    Attributes that tests may change at any time: ``reply``, ``delay`` (seconds before
    each chat response), ``finish_reason`` (forced, e.g. ``"length"``), ``omit_usage``,
    ``malformed`` (a 200 whose body is not JSON), ``refuse_response_format`` (a 400 for
    a request with a ``response_format``, as a server without structured outputs).
    Counters: ``requests`` (all HTTP requests), ``chat_requests``, ``model_requests``,
    ``max_in_flight`` (peak number of chat requests handled at once) and ``bodies`` (the
    chat request bodies).
    """

    def __init__(
        self,
        reply: Reply = _echo,
        *,
        api_key: str | None = "test-key",
        models: Iterable[str] | None = ("fake-model",),
    ) -> None:
        self.reply = reply
        self.api_key = api_key
        self.models = None if models is None else tuple(models)
        self.delay = 0.0
        self.finish_reason: str | None = None
        self.omit_usage = False
        self.malformed = False
        self.refuse_response_format = False
        self.requests = 0
        self.chat_requests = 0
        self.model_requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self._failures: deque[_Failure] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -----------------------------------------------------------------

    def fail_next(self, n: int, status: int = 500, *, retry_after: str | None = None) -> None:
        """Answer the next ``n`` requests with ``status`` (and a ``Retry-After`` header)."""
        with self._lock:
            self._failures.extend(_Failure(status, retry_after) for _ in range(n))

    # -- lifecycle -----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake OpenAI server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what an OpenAI client takes as its base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        """Bind a free port and serve in a daemon thread."""
        httpd = _Server(("127.0.0.1", 0), _handler_for(self))
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},  # so stop() returns quickly
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; delayed responses in progress are abandoned."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling (called from handler threads) ----------------------------

    def _count(self, path: str) -> None:
        with self._lock:
            self.requests += 1
            if path == "/v1/chat/completions":
                self.chat_requests += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            elif path.rstrip("/") == "/v1/models":
                self.model_requests += 1

    def _next_failure(self) -> _Failure | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def _authorised(self, header: str | None) -> bool:
        return self.api_key is None or header == f"Bearer {self.api_key}"

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        text = self.reply(messages)
        finish = "stop"
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if text is not None and max_tokens is not None and _tokens(text) > max_tokens:
            text, finish = " ".join(text.split()[:max_tokens]), "length"
        completion: dict[str, Any] = {
            "id": f"chatcmpl-fake-{self.chat_requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": self.finish_reason or finish,
                    "logprobs": None,
                }
            ],
        }
        if not self.omit_usage:
            prompt_tokens = sum(_tokens(str(m.get("content") or "")) for m in messages)
            completion_tokens = _tokens(text or "")
            completion["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return completion


_SSE = {"Content-Type": "text/event-stream"}


def _stream_events(completion: dict[str, Any], body: dict[str, Any]) -> bytes:
    """``completion`` as OpenAI's stream: a chunk per word, the finish, the usage when
    ``stream_options.include_usage`` asks for it, then ``[DONE]``."""
    choice = completion["choices"][0]
    text = choice["message"]["content"] or ""
    base = {k: completion[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""}, None)]
    events += [chunk({"content": piece}, None) for piece in re.findall(r"\S+\s*|\s+", text)]
    events.append(chunk({}, choice["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage") and "usage" in completion:
        events.append({**base, "choices": [], "usage": completion["usage"]})
    lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


def _error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


_FAILURE_BODIES = {
    429: _error("Rate limit reached, please retry later", "requests", "rate_limit_exceeded"),
    400: _error("Bad request", "invalid_request_error", None),
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts) are expected; everything else is printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _handler_for(fake: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: tests assert on counters, not on logs."""

        def _send(
            self,
            status: int,
            payload: dict[str, Any] | bytes,
            headers: dict[str, str] | None = None,
        ) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            headers = dict(headers or {})
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _preflight(self) -> bool:
            """Apply a scripted failure, then check the key; False when already answered."""
            failure = fake._next_failure()
            if failure is not None:
                body = _FAILURE_BODIES.get(
                    failure.status, _error("The server had an error", "server_error", None)
                )
                headers = (
                    {} if failure.retry_after is None else {"Retry-After": failure.retry_after}
                )
                self._send(failure.status, body, headers)
                return False
            if not fake._authorised(self.headers.get("Authorization")):
                self._send(
                    401,
                    _error(
                        "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
                    ),
                )
                return False
            return True

        def do_GET(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            fake._count(self.path)
            if self.path.rstrip("/") != "/v1/models":
                self._send(404, _error(f"no route {self.path}", "invalid_request_error", None))
                return
            if not self._preflight():
                return
            names = fake.models or ()
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
            self._send(200, {"object": "list", "data": data})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            fake._count(self.path)
            if self.path != "/v1/chat/completions":
                self._send(404, _error(f"no route {self.path}", "invalid_request_error", None))
                return
            try:
                self._chat(raw)
            finally:
                with fake._lock:
                    fake.in_flight -= 1

        def _chat(self, raw: bytes) -> None:
            if fake.delay and fake._stopping.wait(fake.delay):
                return
            if not self._preflight():
                return
            body = json.loads(raw or b"{}")
            with fake._lock:
                fake.bodies.append(body)
            model = body.get("model")
            if fake.models is not None and model not in fake.models:
                message = f"The model `{model}` does not exist or you do not have access to it."
                self._send(404, _error(message, "invalid_request_error", "model_not_found"))
            elif fake.malformed:
                self._send(200, b'{"id": "chatcmpl-broken", "choices": [{"mess')
            elif fake.refuse_response_format and "response_format" in body:
                message = "response_format is not supported by this server"
                self._send(400, _error(message, "invalid_request_error", None))
            elif body.get("stream"):
                self._send(200, _stream_events(fake._completion(body), body), _SSE)
            else:
                self._send(200, fake._completion(body))

    return Handler
