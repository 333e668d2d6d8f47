"""Browsing a workspace's knowledge graph for the UI: entities found by name, an
entity's neighbourhood (related entities, the relations with their source sentences,
the passages they come from), and the links between entities and passages on screen,
as pure functions over the opened retrieval context.

Entities are named by their content-derived ids (:mod:`quillian.server.ids`), resolved
to their positions in the opened graph through its snapshot's id map; an id whose
entity is gone is a :class:`NotFound`, never the entity now at its old position."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.retrieval.context import RetrievalContext
from quillian.server import models as m
from quillian.server.failures import NotFound
from quillian.server.ids import description_id, refuse_position, relation_id
from quillian.stores.snapshot import EdgeKind
from quillian.types import Triple

__all__ = ["links", "neighbourhood", "resolve_entity", "search_entities"]

#: Ids a refusal names at most.
_NAMED = 5


def resolve_entity(kg: KnowledgeGraph, value: str) -> int:
    """The position of the entity ``value`` names; :class:`NotFound` (a 404) when it
    names none, saying that ids changed when it is an old integer id."""
    try:
        refuse_position(value)
    except ValueError as exc:
        raise NotFound(str(exc)) from None
    found = kg.find_entity(value)
    if found is None:
        raise NotFound(
            f"no entity {value!r} in this workspace (its documents were deleted, or it "
            "never was): find entities by name with GET /api/workspaces/WS/entities?q=NAME"
        )
    return found


def _resolve_all(kg: KnowledgeGraph, values: list[str]) -> dict[str, int]:
    """Each id's entity position; :class:`NotFound` naming the ids that find none."""
    found = {value: kg.find_entity(value) for value in dict.fromkeys(values)}
    missing = [value for value, position in found.items() if position is None]
    if missing:
        more = f" and {len(missing) - _NAMED} more" if len(missing) > _NAMED else ""
        raise NotFound(
            f"no entities {missing[:_NAMED]}{more} in this workspace (deleted, or never there)"
        )
    return {value: position for value, position in found.items() if position is not None}


def _chunk_position(kg: KnowledgeGraph, chunk_id: str) -> int | None:
    """The position of passage ``chunk_id`` among ``kg.chunk_ids`` (its node id is the
    chunk id: a binary search in the snapshot's id map), or None."""
    position = kg.snapshot.ids.index_of(chunk_id) - kg.chunk_offset
    ok = 0 <= position < len(kg.chunk_ids) and kg.chunk_ids[position] == chunk_id
    return position if ok else None


def _out_edges(kg: KnowledgeGraph, node: int, kind: EdgeKind) -> list[int]:
    """The targets of ``node``'s out-edges of one kind, in the order they were added."""
    snapshot = kg.snapshot
    start, end = int(snapshot.indptr[node]), int(snapshot.indptr[node + 1])
    keep = snapshot.edge_kinds[start:end] == kind
    return [int(t) for t in snapshot.indices[start:end][keep]]


def _description_rows(kg: KnowledgeGraph, entity: int) -> list[int]:
    """The rows of ``kg.descriptions`` about ``entity``, in order (its ``described_by``
    links that end at a description node rather than a chunk)."""
    rows = (node - kg.description_offset for node in _out_edges(kg, entity, EdgeKind.DESCRIBED_BY))
    return sorted(row for row in rows if 0 <= row < len(kg.descriptions))


#: Per opened index, each entity's degree and its name and aliases casefolded: one pass
#: over the entity table (read lazily from the index's tables database) per opened index,
#: not one per request; dropped with the index.
_SEARCHED: weakref.WeakKeyDictionary[
    RetrievalContext, tuple[npt.NDArray[np.int64], list[tuple[str, ...]]]
] = weakref.WeakKeyDictionary()
_SEARCHED_LOCK = threading.Lock()


def _degrees(context: RetrievalContext) -> npt.NDArray[np.int64]:
    return _searched(context)[0]


def _searched(
    context: RetrievalContext,
) -> tuple[npt.NDArray[np.int64], list[tuple[str, ...]]]:
    with _SEARCHED_LOCK:
        found = _SEARCHED.get(context)
    if found is None:
        kg = context.kg
        ends = np.concatenate([kg.relation_subject, kg.relation_object]).astype(np.int64)
        names = [tuple(n.casefold() for n in (r.name, *r.aliases)) for r in kg.entities]
        found = (np.bincount(ends, minlength=kg.n_entities), names)
        with _SEARCHED_LOCK:
            _SEARCHED[context] = found
    return found


def _hit(context: RetrievalContext, entity: int, degrees: npt.NDArray[np.int64]) -> m.EntityHit:
    record = context.kg.entities[entity]
    return m.EntityHit(
        id=record.node_id,
        name=record.name,
        type=record.type,
        aliases=list(record.aliases),
        degree=int(degrees[entity]),
    )


def _relation_id(triple: Triple) -> str:
    """The API's id of ``triple``, as :func:`quillian.server.views.retrieval_view` gives
    it for the same relation in a retrieval's subgraph."""
    sentence = triple.provenance.sentence if triple.provenance else ""
    return relation_id(
        triple.subject, triple.predicate, triple.object, sentence or triple.description
    )


def search_entities(
    context: RetrievalContext, query: str, offset: int, limit: int
) -> tuple[int, list[m.EntityHit]]:
    """Entities whose name or an alias contains ``query`` (case-insensitive): exact
    matches first, then prefixes, then the rest, each by degree (most related first)."""
    needle = query.casefold().strip()
    degrees, all_names = _searched(context)
    ranked: list[tuple[int, int, str, int]] = []
    for index, names in enumerate(all_names):
        if not any(needle in name for name in names):
            continue
        rank = 0 if needle in names else 1 if any(n.startswith(needle) for n in names) else 2
        ranked.append((rank, -int(degrees[index]), context.kg.entities[index].name, index))
    ranked.sort()
    page = ranked[offset : offset + limit]
    return len(ranked), [_hit(context, index, degrees) for *_, index in page]


def neighbourhood(
    context: RetrievalContext, entity_id: str, offset: int, limit: int
) -> m.Neighbourhood:
    """The entity ``entity_id`` names, its descriptions, and a page of the relations it
    takes part in with the entities at their other ends and the passages they were
    read from."""
    kg = context.kg
    entity = resolve_entity(kg, entity_id)
    degrees = _degrees(context)
    touching = np.flatnonzero((kg.relation_subject == entity) | (kg.relation_object == entity))
    page = [int(i) for i in touching[offset : offset + limit]]
    edges: list[m.GraphEdge] = []
    others: set[int] = set()
    for index in page:
        triple = kg.relations[index]
        provenance = triple.provenance
        ends = int(kg.relation_subject[index]), int(kg.relation_object[index])
        others.update(e for e in ends if e != entity)
        edges.append(
            m.GraphEdge(
                relation=_relation_id(triple),
                source=kg.entity_id(ends[0]),
                target=kg.entity_id(ends[1]),
                predicate=triple.predicate,
                description=triple.description,
                sentence=provenance.sentence if provenance else "",
                chunk_id=provenance.chunk_id if provenance else "",
            )
        )
    own_id = kg.entity_id(entity)
    descriptions = [
        m.EntityDescription(
            id=description_id(own_id, d.chunk_id, d.text), text=d.text, chunk_id=d.chunk_id
        )
        for d in (kg.descriptions[row] for row in _description_rows(kg, entity))
    ]
    wanted = {d.chunk_id for d in descriptions} | {e.chunk_id for e in edges if e.chunk_id}
    positions = sorted(p for p in (_chunk_position(kg, cid) for cid in wanted) if p is not None)
    passages = [
        m.SourcePassage(
            chunk_id=kg.chunk_ids[pos],
            title=context.chunk_titles[pos],
            text=context.chunk_texts[pos],
        )
        for pos in positions
    ]
    return m.Neighbourhood(
        entity=_hit(context, entity, degrees),
        descriptions=descriptions,
        nodes=[_hit(context, other, degrees) for other in sorted(others)],
        edges=edges,
        passages=passages,
        total_edges=len(touching),
        offset=offset,
        limit=limit,
    )


def links(context: RetrievalContext, entities: list[str], chunk_ids: list[str]) -> m.GraphLinks:
    """Which of ``chunk_ids`` describe which of ``entities`` (the graph's ``describes``
    links), and the entities' description nodes read from those passages; entities are
    named in the answer by the ids the request gave."""
    kg = context.kg
    given = {position: value for value, position in _resolve_all(kg, entities).items()}
    position = {cid: _chunk_position(kg, cid) for cid in dict.fromkeys(chunk_ids)}
    unknown = [cid for cid, found in position.items() if found is None]
    if unknown:
        raise NotFound(f"no passages {unknown[:_NAMED]} in this workspace")
    mentions = [
        m.Mention(chunk_id=cid, entity=given[target])
        for cid, found in position.items()
        if found is not None
        for target in _out_edges(kg, kg.chunk_offset + found, EdgeKind.DESCRIBES)
        if target in given
    ]
    shown = set(chunk_ids)
    descriptions = []
    for entity in sorted(given):
        for row in _description_rows(kg, entity):
            record = kg.descriptions[row]
            if record.chunk_id in shown:
                descriptions.append(
                    m.DescriptionNode(
                        id=description_id(kg.entity_id(entity), record.chunk_id, record.text),
                        entity=given[entity],
                        text=record.text,
                        chunk_id=record.chunk_id,
                    )
                )
    return m.GraphLinks(mentions=mentions, descriptions=descriptions)
