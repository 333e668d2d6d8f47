"""``/healthz`` (no key needed), ``/metrics`` (Prometheus text format, an admin key),
and the API's description: ``/openapi.json``, ``/docs`` and ``/redoc`` (any key)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BaseModel

from quillian.server.deps import AdminDep, Ctx
from quillian.server.observability import gauge

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str
    workspaces: list[str]


@router.get("/healthz", response_model=Health)
def healthz(ctx: Ctx) -> Health:
    """Liveness: the process answers and its workspaces are open."""
    return Health(status="ok", workspaces=ctx.workspaces.names)


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(ctx: Ctx, _: AdminDep) -> PlainTextResponse:
    """Requests and latency by route, LLM calls and tokens, jobs by state."""
    calls, tokens, jobs = [], [], []
    for ws in ctx.workspaces:
        jobs += [({"workspace": ws.name, "state": s}, n) for s, n in ws.jobs.counts().items()]
        if ws.engine.options.llm is None:
            continue
        total = ws.engine.ledger().total
        calls.append(({"workspace": ws.name, "cached": "false"}, total.calls - total.cached_calls))
        calls.append(({"workspace": ws.name, "cached": "true"}, total.cached_calls))
        tokens.append(({"workspace": ws.name, "kind": "prompt"}, total.prompt_tokens))
        tokens.append(({"workspace": ws.name, "kind": "completion"}, total.completion_tokens))
    extra = [
        *gauge("quillian_llm_calls_total", "LLM calls.", "counter", calls),
        *gauge("quillian_llm_tokens_total", "LLM tokens billed.", "counter", tokens),
        *gauge("quillian_jobs", "Ingestion jobs by state.", "gauge", jobs),
    ]
    return PlainTextResponse(
        ctx.metrics.render(extra), media_type="text/plain; version=0.0.4; charset=utf-8"
    )


# FastAPI's own schema and docs routes would bypass the app's dependencies (the key
# check): the app turns them off and serves them here, as routes like any other.


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request) -> dict[str, Any]:
    schema: dict[str, Any] = request.app.openapi()
    return schema


@router.get("/docs", include_in_schema=False)
def swagger(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{request.app.title} API")


@router.get("/redoc", include_in_schema=False)
def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title=f"{request.app.title} API")
