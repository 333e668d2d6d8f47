"""Browsing a workspace's knowledge graph for the UI: entities found by name, an
entity's neighbourhood (related entities, the relations with their source sentences,
the passages they come from), and the links between entities and passages on screen,
as pure functions over the opened retrieval context."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.context import RetrievalContext
from quillian.server import models as m
from quillian.server.failures import NotFound
from quillian.stores.snapshot import EdgeKind

__all__ = ["links", "neighbourhood", "search_entities"]


def _degrees(context: RetrievalContext) -> npt.NDArray[np.int64]:
    kg = context.kg
    ends = np.concatenate([kg.relation_subject, kg.relation_object]).astype(np.int64)
    return np.bincount(ends, minlength=kg.n_entities)


def _hit(context: RetrievalContext, entity: int, degrees: npt.NDArray[np.int64]) -> m.EntityHit:
    record = context.kg.entities[entity]
    return m.EntityHit(
        id=entity,
        name=record.name,
        type=record.type,
        aliases=list(record.aliases),
        degree=int(degrees[entity]),
    )


def search_entities(
    context: RetrievalContext, query: str, offset: int, limit: int
) -> tuple[int, list[m.EntityHit]]:
    """Entities whose name or an alias contains ``query`` (case-insensitive): exact
    matches first, then prefixes, then the rest, each by degree (most related first)."""
    needle = query.casefold().strip()
    degrees = _degrees(context)
    ranked: list[tuple[int, int, str, int]] = []
    for index, record in enumerate(context.kg.entities):
        names = [record.name.casefold(), *(a.casefold() for a in record.aliases)]
        if not any(needle in name for name in names):
            continue
        rank = 0 if needle in names else 1 if any(n.startswith(needle) for n in names) else 2
        ranked.append((rank, -int(degrees[index]), record.name, index))
    ranked.sort()
    page = ranked[offset : offset + limit]
    return len(ranked), [_hit(context, index, degrees) for *_, index in page]


def neighbourhood(
    context: RetrievalContext, entity: int, offset: int, limit: int
) -> m.Neighbourhood:
    """The entity, its descriptions, and a page of the relations it takes part in with
    the entities at their other ends and the passages they were read from."""
    kg = context.kg
    if not 0 <= entity < kg.n_entities:
        raise NotFound(f"no entity {entity} in this workspace (0..{kg.n_entities - 1})")
    degrees = _degrees(context)
    touching = np.flatnonzero((kg.relation_subject == entity) | (kg.relation_object == entity))
    page = [int(i) for i in touching[offset : offset + limit]]
    edges = []
    for index in page:
        triple = kg.relations[index]
        provenance = triple.provenance
        edges.append(
            m.GraphEdge(
                relation=index,
                source=int(kg.relation_subject[index]),
                target=int(kg.relation_object[index]),
                predicate=triple.predicate,
                description=triple.description,
                sentence=provenance.sentence if provenance else "",
                chunk_id=provenance.chunk_id if provenance else "",
            )
        )
    others = sorted({e.source for e in edges} | {e.target for e in edges} - {entity})
    descriptions = [
        m.EntityDescription(text=d.text, chunk_id=d.chunk_id)
        for d in kg.descriptions
        if d.entity == entity
    ]
    wanted = {d.chunk_id for d in descriptions} | {e.chunk_id for e in edges if e.chunk_id}
    positions = {cid: i for i, cid in enumerate(kg.chunk_ids) if cid in wanted}
    passages = [
        m.SourcePassage(
            chunk_id=cid, title=context.chunk_titles[pos], text=context.chunk_texts[pos]
        )
        for cid, pos in sorted(positions.items(), key=lambda item: item[1])
    ]
    return m.Neighbourhood(
        entity=_hit(context, entity, degrees),
        descriptions=descriptions,
        nodes=[_hit(context, other, degrees) for other in others],
        edges=edges,
        passages=passages,
        total_edges=len(touching),
        offset=offset,
        limit=limit,
    )


def links(context: RetrievalContext, entities: list[int], chunk_ids: list[str]) -> m.GraphLinks:
    """Which of ``chunk_ids`` describe which of ``entities`` (the graph's ``describes``
    links), and the entities' description nodes read from those passages."""
    kg = context.kg
    snapshot = kg.snapshot
    wanted = set(entities)
    outside = sorted(e for e in wanted if not 0 <= e < kg.n_entities)
    if outside:
        raise NotFound(f"no entities {outside} in this workspace (0..{kg.n_entities - 1})")
    position = {cid: i for i, cid in enumerate(kg.chunk_ids)}
    unknown = [cid for cid in chunk_ids if cid not in position]
    if unknown:
        raise NotFound(f"no passages {unknown} in this workspace")

    def out_edges(node: int, kind: EdgeKind) -> list[int]:
        start, end = int(snapshot.indptr[node]), int(snapshot.indptr[node + 1])
        keep = snapshot.edge_kinds[start:end] == kind
        return [int(t) for t in snapshot.indices[start:end][keep]]

    mentions = [
        m.Mention(chunk_id=cid, entity=target)
        for cid in dict.fromkeys(chunk_ids)
        for target in out_edges(kg.chunk_offset + position[cid], EdgeKind.DESCRIBES)
        if target in wanted
    ]
    shown = set(chunk_ids)
    descriptions = []
    for entity in sorted(wanted):
        for node in out_edges(entity, EdgeKind.DESCRIBED_BY):
            index = node - kg.description_offset
            if not 0 <= index < len(kg.descriptions):
                continue  # a chunk, not a description
            record = kg.descriptions[index]
            if record.chunk_id in shown:
                descriptions.append(
                    m.DescriptionNode(
                        id=index, entity=entity, text=record.text, chunk_id=record.chunk_id
                    )
                )
    return m.GraphLinks(mentions=mentions, descriptions=descriptions)
