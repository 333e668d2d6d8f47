"""The FastAPI application factory: ``create_app(settings)``.

The app opens every workspace (engine, LLM session, job runner) when it starts and
closes them when it stops. Errors become JSON ``{"detail": ...}`` with a 4xx naming the
problem (see :mod:`quillian.server.failures`); the middleware checks the API key and
the body size, counts and times requests, and writes the access log; the routes'
dependencies check what the key may do (:mod:`quillian.server.deps`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse

from quillian import __version__
from quillian.errors import QuillianError
from quillian.server.deps import Context
from quillian.server.failures import describe
from quillian.server.keys import Unauthorized
from quillian.server.models import ErrorBody
from quillian.server.observability import BodyTooLarge, Metrics, ServerMiddleware
from quillian.server.routers import documents, graph, jobs, openai, retrieval, system, workspaces
from quillian.server.settings import ServerSettings
from quillian.server.ui import mount_ui
from quillian.server.workspaces import Workspaces

__all__ = ["create_app"]


def create_app(settings: ServerSettings) -> FastAPI:
    """The API over ``settings.workspaces``; serve it with any ASGI server."""
    spaces = Workspaces(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
        lifespan=lifespan,
    )
    metrics = Metrics()
    ctx = app.state.quillian = Context(settings, spaces, metrics)
    errors: dict[int | str, dict[str, Any]] = {
        "4XX": {"model": ErrorBody, "description": "Refused: the detail names the problem"},
        "5XX": {"model": ErrorBody, "description": "The server or its model failed"},
    }
    for router in (system, workspaces, retrieval, documents, jobs, graph, openai):
        app.include_router(router.router, responses=errors)
    ui_paths = mount_ui(app)  # the web UI at /, its files under /ui/

    async def failed(request: Request, exc: Exception) -> JSONResponse:
        status, message = describe(exc, request.path_params.get("ws"))
        response = _error(request, status, message)
        if isinstance(exc, Unauthorized):
            response.headers["WWW-Authenticate"] = "ApiKey"
        return response

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(_problem(e) for e in exc.errors())
        return _error(request, 422, f"invalid request: {problems}")

    app.add_exception_handler(RequestValidationError, invalid)
    for refused in (QuillianError, ValueError, TimeoutError, BodyTooLarge, Exception):
        app.add_exception_handler(refused, failed)
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


def _error(request: Request, status: int, message: str) -> JSONResponse:
    """``{"detail": message}``; on the OpenAI-compatible routes also OpenAI's
    ``{"error": {"message", "type", "code"}}``, which its clients show."""
    body: dict[str, object] = {"detail": message}
    if request.url.path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "server_error"
        body["error"] = {"message": message, "type": kind, "code": status}
    return JSONResponse(body, status_code=status)


def _problem(error: dict[str, object]) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")  # type: ignore[attr-defined]
    return f"{where or 'body'}: {error.get('msg')}"
