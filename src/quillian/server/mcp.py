"""Quillian over the Model Context Protocol (``quillian mcp INDEX``): the tools
``retrieve``, ``answer`` and ``entity`` on one index, served over stdio with the
official ``mcp`` SDK. Like the HTTP API, a thin edge over one engine; the tools return
the API's response models, so their results are structured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from quillian.engine import Engine
from quillian.errors import InputError, QuillianError
from quillian.server import models as m
from quillian.server.answering import answer as answer_question
from quillian.server.failures import invalid
from quillian.server.graph import neighbourhood, search_entities
from quillian.server.views import retrieval_view

__all__ = ["create_mcp"]

T = TypeVar("T")

INSTRUCTIONS = (
    "Quillian answers questions over a document collection with knowledge-graph "
    "retrieval. Use `retrieve` for the passages (and the entities and relations that led "
    "to them), `answer` for an answer with citations, `entity` to look an entity up in "
    "the knowledge graph."
)


def create_mcp(engine: Engine, *, timeout_s: float = 300.0) -> MCPServer[None]:
    """An MCP server whose tools ask ``engine`` (its LLM session opens with the server)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[None]) -> AsyncIterator[None]:
        async with engine:
            yield

    server: MCPServer[None] = MCPServer(
        "quillian", instructions=INSTRUCTIONS, lifespan=lifespan, log_level="WARNING"
    )

    @server.tool()
    async def retrieve(query: str, method: str = "sa", k: int = 8) -> m.RetrieveResponse:
        """Passages for a query, best first, with the activated subgraph: seed entities,
        activated entities, and the relations used with their source sentences.
        method: sa, sa-paper, ppr, dense or bm25."""

        async def run() -> m.RetrieveResponse:
            request = m.RetrieveRequest(query=query, method=method, k=k)
            start = time.perf_counter()
            result = await engine.aretrieve(request.query, request.method, request.k)
            return retrieval_view(result, time.perf_counter() - start)

        return await _tool(run(), timeout_s)

    @server.tool()
    async def answer(
        question: str, method: str = "sa-rag", options: dict[str, Any] | None = None
    ) -> m.AnswerResponse:
        """Answer a question with a method (sa-rag by default): the answer, the passages
        and relations it rests on, the method's steps, tokens and seconds."""

        async def run() -> m.AnswerResponse:
            request = m.AnswerRequest(question=question, method=method, options=options or {})
            return await answer_question(engine, request, timeout_s)

        return await _tool(run(), timeout_s)

    @server.tool()
    async def entity(name: str, limit: int = 20) -> m.Neighbourhood:
        """An entity of the knowledge graph found by name: its descriptions, the
        entities it is related to, the relations with their source sentences, and the
        passages they come from (at most ``limit`` relations)."""

        async def run() -> m.Neighbourhood:
            if not name.strip():
                raise InputError("the name is empty")
            context = (await asyncio.to_thread(lambda: engine.index)).context
            total, hits = search_entities(context, name, 0, 1)
            if not total:
                raise ToolError(f"no entity named like {name!r}")
            return neighbourhood(context, hits[0].id, 0, max(1, min(limit, 500)))

        return await _tool(run(), timeout_s)

    return server


async def _tool(work: Awaitable[T], timeout_s: float) -> T:
    """Await ``work``: its arguments checked as the HTTP API checks them, Quillian's
    refusals become one-line tool errors the model can read (no traceback)."""
    try:
        async with asyncio.timeout(timeout_s):
            return await work
    except ValidationError as exc:
        raise ToolError(f"invalid arguments: {invalid(exc.errors())}") from None
    except (QuillianError, ValueError) as exc:
        raise ToolError(str(exc)) from None
    except TimeoutError:
        raise ToolError(f"took longer than {timeout_s:g} s") from None
