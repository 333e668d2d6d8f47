"""Quillian over the Model Context Protocol (``quillian mcp INDEX``): the tools
``retrieve``, ``answer`` and ``entity`` on one index, served over stdio with the
official ``mcp`` SDK. Like the HTTP API, a thin edge over one engine; the tools return
the API's response models, so their results are structured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from quillian.engine import Engine
from quillian.errors import QuillianError
from quillian.server import models as m
from quillian.server.answering import answer as answer_question
from quillian.server.graph import neighbourhood, search_entities
from quillian.server.views import retrieval_view

__all__ = ["create_mcp"]

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
        start = time.perf_counter()
        result = await _tool(engine.aretrieve(query, method, k), timeout_s)
        return retrieval_view(result, time.perf_counter() - start)

    @server.tool()
    async def answer(
        question: str, method: str = "sa-rag", options: dict[str, Any] | None = None
    ) -> m.AnswerResponse:
        """Answer a question with a method (sa-rag by default): the answer, the passages
        and relations it rests on, the method's steps, tokens and seconds."""
        request = m.AnswerRequest(question=question, method=method, options=options or {})
        return await _tool(answer_question(engine, request, timeout_s), timeout_s)

    @server.tool()
    async def entity(name: str, limit: int = 20) -> m.Neighbourhood:
        """An entity of the knowledge graph found by name: its descriptions, the
        entities it is related to, the relations with their source sentences, and the
        passages they come from (at most ``limit`` relations)."""
        context = (await asyncio.to_thread(lambda: engine.index)).context
        total, hits = search_entities(context, name, 0, 1)
        if not total:
            raise ToolError(f"no entity named like {name!r}")
        return neighbourhood(context, hits[0].id, 0, max(1, min(limit, 500)))

    return server


async def _tool(work: Any, timeout_s: float) -> Any:
    """Await ``work``; Quillian's refusals become tool errors the model can read."""
    try:
        async with asyncio.timeout(timeout_s):
            return await work
    except (QuillianError, ValueError) as exc:
        raise ToolError(str(exc)) from None
    except TimeoutError:
        raise ToolError(f"took longer than {timeout_s:g} s") from None
