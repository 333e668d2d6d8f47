"""Retrieval and answers: ``POST /api/workspaces/{ws}/retrieve`` and ``.../answer``
(one JSON body, or server-sent events with ``stream: true``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse

from quillian.server import models as m
from quillian.server.answering import ANSWER_EVENTS, answer, answer_events
from quillian.server.deps import Ctx, WorkspaceDep
from quillian.server.sse import SSE_HEADERS, sse
from quillian.server.views import retrieval_json

router = APIRouter(prefix="/api/workspaces/{ws}", tags=["retrieval and answers"])


@router.post("/retrieve", response_model=m.RetrieveResponse)
async def retrieve(body: m.RetrieveRequest, workspace: WorkspaceDep, ctx: Ctx) -> Response:
    """Top-k passages with scores and the activated subgraph (nodes with their
    activation, edges used with their relation text and source sentence)."""
    start = time.perf_counter()
    async with asyncio.timeout(ctx.settings.request_timeout_s):
        result = await workspace.engine.aretrieve(body.query, body.method, body.k)
    content = retrieval_json(result, time.perf_counter() - start)
    return Response(content, media_type="application/json")


@router.post("/answer", response_model=m.AnswerResponse, responses=ANSWER_EVENTS.responses())
async def answer_question(
    body: m.AnswerRequest, workspace: WorkspaceDep, ctx: Ctx
) -> m.AnswerResponse | StreamingResponse:
    """Answer a question with a method: the answer, its citations, the method's steps,
    each retrieval's subgraph, tokens and seconds."""
    timeout = ctx.settings.request_timeout_s
    if not body.stream:
        return await answer(workspace.engine, body, timeout)

    async def events() -> AsyncIterator[bytes]:
        async for event in answer_events(workspace.engine, body, timeout, ctx.describe):
            yield sse(event.name, event.data)

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
