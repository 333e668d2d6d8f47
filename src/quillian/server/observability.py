"""Requests counted and timed by route (Prometheus text format), structured access
logs, API-key checks and the request size limit: the server's ASGI middleware.

Every request but those to the open paths needs a key the server knows, checked here
before the body is read (401 otherwise); what the key may do is checked by the routes'
dependencies (:mod:`quillian.server.deps`), which find its :class:`Grant` in the
request's state. Keys are compared as hashes in constant time and never logged: the
access log records the method, route, status, duration, client address and the key's
id, not the key nor any header.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from quillian.server.keys import ANONYMOUS, OPEN, Grant, KeyRing, Unauthorized
from quillian.server.models import error_content

__all__ = ["BodyTooLarge", "Metrics", "ServerMiddleware", "gauge"]

access_log = logging.getLogger("quillian.server.access")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Latency histogram buckets, seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class BodyTooLarge(Exception):
    """The request body went past the configured limit."""


class Metrics:
    """Request counts and latency histograms by route, method and status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], list[int]] = {}
        self.latency_sum: dict[tuple[str, str], float] = defaultdict(float)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(route, method, status)] += 1
            counts = self.latency.setdefault((route, method), [0] * (len(BUCKETS) + 1))
            counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self.latency_sum[(route, method)] += seconds

    def render(self, extra: Iterable[str] = ()) -> str:
        """The Prometheus text exposition (version 0.0.4), with ``extra`` lines."""
        lines = [
            "# HELP quillian_http_requests_total HTTP requests by route, method and status.",
            "# TYPE quillian_http_requests_total counter",
        ]
        with self._lock:
            for (route, method, status), n in sorted(self.requests.items()):
                labels = _labels(route=route, method=method, status=str(status))
                lines.append(f"quillian_http_requests_total{labels} {n}")
            lines += [
                "# HELP quillian_http_request_seconds HTTP request latency by route.",
                "# TYPE quillian_http_request_seconds histogram",
            ]
            for (route, method), counts in sorted(self.latency.items()):
                running = 0
                for bound, count in zip([*BUCKETS, float("inf")], counts, strict=True):
                    running += count
                    le = "+Inf" if bound == float("inf") else repr(bound)
                    labels = _labels(route=route, method=method, le=le)
                    lines.append(f"quillian_http_request_seconds_bucket{labels} {running}")
                labels = _labels(route=route, method=method)
                total = self.latency_sum[(route, method)]
                lines.append(f"quillian_http_request_seconds_sum{labels} {total:.6f}")
                lines.append(f"quillian_http_request_seconds_count{labels} {running}")
        lines += list(extra)
        return "\n".join(lines) + "\n"


def _labels(**labels: str) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels.items()) + "}"


def gauge(
    name: str, help_text: str, kind: str, samples: Iterable[tuple[dict[str, str], float]]
) -> list[str]:
    """Prometheus lines of one metric family."""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{_labels(**labels)} {value:g}" for labels, value in samples]
    return lines


class ServerMiddleware:
    """Auth, the body size limit, metrics and the access log around every request.

    A request without a known key is answered by ``refused`` (the app's exception
    handler, so the refusal has the app's error shape) with :class:`Unauthorized`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        keys: KeyRing,
        refused: Callable[[Request, Exception], Awaitable[Response]],
        max_body: int,
        open_paths: tuple[str, ...] = ("/healthz",),
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.keys = keys
        self.refused = refused
        self.max_body = max_body
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        grant: Grant | None = None
        try:
            grant = self._identify(scope)
            if grant is None:
                why = "wrong API key" if _presented(scope) else "an API key is required (X-API-Key)"
                response = await self.refused(Request(scope), Unauthorized(why))
                await response(scope, receive, send_status)
                return
            refusal = self._refuse(scope)
            if refusal is not None:
                await _reply(send_status, scope["path"], *refusal)
            else:
                await self._limited_app(scope, receive, send_status)
        finally:
            seconds = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe(route, scope["method"], status, seconds)
            client = scope.get("client") or ("", 0)
            access_log.info(
                json.dumps(
                    {
                        "ts": round(time.time(), 3),
                        "method": scope["method"],
                        "path": scope["path"],
                        "route": route,
                        "status": status,
                        "ms": round(seconds * 1000, 2),
                        "client": client[0],
                        "key": grant.key_id if grant else None,  # its id, never the key
                    }
                )
            )

    def _identify(self, scope: Scope) -> Grant | None:
        """The grant of the request's key, also left in its state for the routes; None
        for a request that needs a key and has none the server knows."""
        if not self.keys.enabled:
            grant: Grant | None = OPEN
        elif scope["path"] in self.open_paths or scope["method"] == "OPTIONS":
            # an open path, or a CORS preflight (it carries no key): a key is optional
            grant = self.keys.identify(_presented(scope)) or ANONYMOUS
        else:
            grant = self.keys.identify(_presented(scope))
        if grant is not None:
            scope.setdefault("state", {})["grant"] = grant
        return grant

    def _refuse(self, scope: Scope) -> tuple[int, str, dict[str, str]] | None:
        """A (status, message, headers) reply for a request refused before it runs."""
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return (
                413,
                f"request body of {int(length)} bytes is over the limit of {self.max_body}",
                {},
            )
        return None

    async def _limited_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app, reading at most ``max_body`` bytes of a body of any length (chunked,
        without Content-Length, too): past it, the app's reading fails, and whatever it
        answers, the client gets a 413."""
        seen = 0
        too_large = f"request body is over the limit of {self.max_body} bytes"
        over = False
        replied = False

        async def limited() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    over = True
                    raise BodyTooLarge(too_large)
            return message

        async def send_413(message: Message) -> None:
            nonlocal replied
            if not over:
                await send(message)
            elif not replied:  # the app's own answer to the failed read, replaced
                replied = True
                await _reply(send, scope["path"], 413, too_large, {"connection": "close"})

        try:
            await self.app(scope, limited, send_413)
        except Exception:
            if not over:
                raise
        if over and not replied:  # the app raised, or answered nothing
            await _reply(send, scope["path"], 413, too_large, {"connection": "close"})


def _presented(scope: Scope) -> str:
    """The key of a request: ``X-API-Key``, else an ``Authorization: Bearer`` token."""
    headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
    given = headers.get("x-api-key", b"")
    bearer = headers.get("authorization", b"")
    if not given and bearer[:7].lower() == b"bearer ":
        given = bearer[7:].strip()
    return given.decode("latin-1")


async def _reply(send: Send, path: str, status: int, message: str, headers: dict[str, str]) -> None:
    body = json.dumps(error_content(path, status, message)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
