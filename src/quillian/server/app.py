"""The FastAPI application factory: ``create_app(settings)``.

The app opens every workspace (engine, LLM session, job runner) when it starts and
closes them when it stops. Errors have one shape: ``{"detail": ...}`` with a 4xx naming
the problem (see :mod:`quillian.server.failures`), and under ``/v1`` OpenAI's
``{"error": {"message", "type", "param", "code"}}``, which its clients show. ``OPTIONS``
on any route answers 204 with ``Allow`` (CORS, when configured, answers preflights
first); a method a route does not take is a 405 with ``Allow``. The middleware checks
the API key and the body size, counts and times requests, and writes the access log;
the routes' dependencies check what the key may do (:mod:`quillian.server.deps`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match, Mount, compile_path
from threadpoolctl import threadpool_limits

from quillian import __version__
from quillian.compiled import prepare
from quillian.errors import IndexDamagedError, QuillianError
from quillian.server import models as m
from quillian.server.answering import ANSWER_EVENTS
from quillian.server.deps import Context
from quillian.server.failures import NotFound
from quillian.server.failures import invalid as invalid_request
from quillian.server.keys import Unauthorized
from quillian.server.observability import BodyTooLarge, Metrics, ServerMiddleware
from quillian.server.routers import documents, graph, jobs, openai, retrieval, system, workspaces
from quillian.server.settings import ServerSettings
from quillian.server.sse import event_schemas
from quillian.server.ui import mount_ui
from quillian.server.workspaces import Workspaces

__all__ = ["create_app"]

#: Seconds a client is asked to wait after a 503 that passes (an index being built, a
#: database away), in ``Retry-After``.
RETRY_AFTER_S = 2

#: The event streams the routes send, whose events' models the schema publishes.
STREAMS = (ANSWER_EVENTS, jobs.JOB_EVENTS, openai.CHAT_EVENTS)

#: The order ``Allow`` lists methods in.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

DESCRIPTION = (
    'Errors: every 4xx and 5xx is `{"detail": message}`, and under `/v1` OpenAI\'s '
    '`{"error": {"message", "type", "param", "code"}}`. `OPTIONS` on any route answers '
    "204 with an `Allow` header listing its methods; another method it does not take is "
    "a 405 with `Allow`. Streams (`text/event-stream`) publish each event's name and "
    "the schema of its JSON data."
)


@contextmanager
def _blas_threads(threads: int | None) -> Iterator[None]:
    """The BLAS libraries on ``threads`` threads while the server runs, as they were
    after: process-wide where a library keeps one setting (the engines' retrieval
    threads set their own, for those that keep one per thread)."""
    if threads is None:
        yield
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield


def create_app(settings: ServerSettings) -> FastAPI:
    """The API over ``settings.workspaces``; serve it with any ASGI server."""
    spaces = Workspaces(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with _blas_threads(settings.blas_threads):
            prepare()  # the retrieval kernels' compiler, now rather than at the first answer
            await spaces.open()
            try:
                yield
            finally:
                await spaces.close()

    app = FastAPI(
        title="Quillian",
        version=__version__,
        summary="Knowledge-graph RAG as a service: retrieval with the activated subgraph, "
        "answers with citations, documents and ingestion jobs, graph browsing.",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    metrics = Metrics()
    ctx = Context(settings, spaces, metrics)
    app.state.quillian = ctx
    for router in (system, workspaces, retrieval, documents, jobs, graph, openai):
        body = m.OpenAIErrorBody if router is openai else m.ErrorBody
        errors: dict[int | str, dict[str, Any]] = {
            "4XX": {"model": body, "description": "Refused: the message names the problem"},
            "5XX": {"model": body, "description": "The server or its model failed"},
        }
        app.include_router(router.router, responses=errors)
    ui_paths = mount_ui(app)  # the web UI at /, its files under /ui/
    app.add_api_route("/{path:path}", _options, methods=["OPTIONS"], include_in_schema=False)
    failed = _handle_errors(app, ctx)
    # with keys per workspace, the schema names no workspace: a tenant learns no other's
    shown = spaces.names if settings.keys_file is None else []
    app.openapi = _published(app, shown)  # type: ignore[method-assign]
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Location"],
        )
    app.add_middleware(
        ServerMiddleware,
        metrics=metrics,
        keys=ctx.keys,
        refused=failed,
        max_body=settings.max_request_bytes,
        open_paths=("/healthz", *ui_paths),
    )
    return app


def _handle_errors(
    app: FastAPI, ctx: Context
) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    """Every error as one JSON body of the path's shape; returns the handler of refusals,
    which the middleware also uses for the key checks it makes before any route."""

    async def failed(request: Request, exc: Exception) -> JSONResponse:
        status, message = ctx.describe(exc, request.path_params.get("ws"))
        response = _error(request, status, message)
        if isinstance(exc, Unauthorized):
            response.headers["WWW-Authenticate"] = "ApiKey"
        if status == 503 and not isinstance(exc, IndexDamagedError):  # it passes
            response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _error(request, 422, f"invalid request: {invalid_request(exc.errors())}")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every route has OPTIONS: it may be no route at all
            allowed = _allowed(request.app, request.url.path)
            if not allowed:
                return _error(request, 404, "Not Found")
            headers["Allow"] = ", ".join(allowed)
        if exc.status_code < 400:
            return Response(status_code=exc.status_code, headers=headers)
        return _error(request, exc.status_code, str(exc.detail), headers)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    for refused in (QuillianError, ValueError, TimeoutError, BodyTooLarge, Exception):
        app.add_exception_handler(refused, failed)
    return failed


def _error(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = m.error_content(request.url.path, status, message)
    return JSONResponse(body, status_code=status, headers=headers)


async def _options(request: Request) -> Response:
    """``OPTIONS``: 204 with the methods the path takes in ``Allow`` (404: no route)."""
    allowed = _allowed(request.app, request.url.path)
    if not allowed:
        raise NotFound(f"no route {request.url.path}")
    return Response(status_code=204, headers={"Allow": ", ".join(allowed)})


def _allowed(app: FastAPI, path: str) -> list[str]:
    """The methods ``path`` takes, ``OPTIONS`` included (none: no route): those of its
    operations in the schema (a concrete path before a templated one, as OpenAPI
    matches), else of the routes that match it (the UI's page and files)."""
    methods: set[str] = set()
    templates = [t for t in app.openapi()["paths"] if compile_path(t)[0].match(path)]
    if templates:
        template = min(templates, key=lambda t: t.count("{"))
        methods = {name.upper() for name in app.openapi()["paths"][template]}
    else:
        for method in METHODS:
            scope = {"type": "http", "path": path, "root_path": "", "method": method}
            for route in app.router.routes:
                if getattr(route, "endpoint", None) is _options:
                    continue
                if isinstance(route, Mount) and method not in ("GET", "HEAD"):
                    continue  # the UI's files
                if route.matches(scope)[0] is Match.FULL:
                    methods.add(method)
    return [name for name in METHODS if name in methods or (methods and name == "OPTIONS")]


def _published(app: FastAPI, workspaces: list[str]) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` with what this server knows: the models of the streams' events
    among its schemas, and the chat models it serves as ``model``'s values."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, model in event_schemas(STREAMS).items():
                schemas.setdefault(name, model)
            if workspaces:
                model = schemas["ChatRequest"]["properties"]["model"]
                model["enum"] = openai.model_ids(workspaces)
        return app.openapi_schema  # type: ignore[return-value]

    return openapi
