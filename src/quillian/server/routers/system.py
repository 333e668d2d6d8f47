"""``/healthz`` (no key needed) and ``/metrics`` (Prometheus text format, an admin key)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from quillian.server.deps import AdminDep, Ctx, GrantDep
from quillian.server.observability import gauge

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str
    workspaces: list[str]


@router.get("/healthz", response_model=Health)
def healthz(ctx: Ctx, grant: GrantDep) -> Health:
    """Liveness: the process answers and its workspaces are open (named where the key
    may read them: on a server with keys, none without one)."""
    return Health(status="ok", workspaces=[n for n in ctx.workspaces.names if grant.sees(n)])


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
