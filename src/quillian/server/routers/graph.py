"""Graph browsing for the UI: entity search by name, an entity's neighbourhood, and the
links between the entities and passages a retrieval put on screen. Entities are named
by content-derived ids (``ent-`` and 16 hex digits), valid across uploads, deletes and
rebuilds; an id whose entity is gone is a 404."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path, Query

from quillian.server import models as m
from quillian.server.deps import WorkspaceDep
from quillian.server.graph import links, neighbourhood, search_entities
from quillian.server.ids import ENTITY_ID_HELP

router = APIRouter(prefix="/api/workspaces/{ws}", tags=["graph"])


@router.get("/entities", response_model=m.EntityPage)
async def find_entities(
    workspace: WorkspaceDep,
    q: Annotated[str, Query(min_length=1, max_length=200, description="part of a name")],
    offset: Annotated[int, Query(ge=0, le=m.MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> m.EntityPage:
    """Entities whose name or alias contains ``q``: exact, then prefix matches first."""
    context = (await asyncio.to_thread(lambda: workspace.engine.index)).context
    total, hits = await asyncio.to_thread(search_entities, context, q, offset, limit)
    return m.EntityPage(total=total, offset=offset, limit=limit, entities=hits)


@router.get("/entities/{entity}", response_model=m.Neighbourhood)
async def entity_neighbourhood(
    entity: Annotated[
        str,
        Path(max_length=100, description=ENTITY_ID_HELP, examples=["ent-5d1f0a1c9e8b7a62"]),
    ],
    workspace: WorkspaceDep,
    offset: Annotated[int, Query(ge=0, le=m.MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> m.Neighbourhood:
    """An entity with its descriptions, related entities, relations (with source
    sentences) and their passages; relations paginated. 404 when no entity has the id
    (its documents were deleted), or when it is an integer (ids used to be positions)."""
    context = (await asyncio.to_thread(lambda: workspace.engine.index)).context
    return await asyncio.to_thread(neighbourhood, context, entity, offset, limit)


@router.post("/graph/links", response_model=m.GraphLinks)
async def graph_links(body: m.LinksRequest, workspace: WorkspaceDep) -> m.GraphLinks:
    """The ``describes`` links between the given passages and entities, and the
    entities' descriptions read from those passages: what the UI draws between an
    activated subgraph's entities and the passages retrieved with it."""
    context = (await asyncio.to_thread(lambda: workspace.engine.index)).context
    return await asyncio.to_thread(links, context, body.entities, body.chunk_ids)
