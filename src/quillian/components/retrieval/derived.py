"""What retrieval derives from a whole graph: pure functions of a
:class:`~quillian.components.graph.builder.KnowledgeGraph` (and its chunk titles).

A :class:`~quillian.components.retrieval.context.RetrievalContext` over a graph built in
memory computes these on first use; an index's build computes them once and stores them
(:mod:`quillian.index.tables`), so opening an index and its first query read them from
disk instead of passing over every relation, entity and chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import TOPIC_WEIGHT, KnowledgeGraph
from quillian.components.graph.incremental import EntityFacts
from quillian.components.retrieval.seeding import is_literal, lexicon_keys, page_aliases
from quillian.components.retrieval.seeding import name_keys as entity_name_keys
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, stable_order

__all__ = [
    "ENTITY_FACTS",
    "HOP_ARRAYS",
    "chunk_links",
    "chunk_pages",
    "description_entities",
    "entity_chunk_counts",
    "entity_chunks",
    "grouped",
    "hop_arrays",
    "literal_entities",
    "name_keys",
    "page_entities",
    "relation_chunks",
    "relation_hops",
    "text_rows",
]

#: What the entity-resolution state keeps of each entity for the tables derived here:
#: :func:`literal_entities`'s flag and the lexicon keys of :func:`name_keys`.
ENTITY_FACTS = EntityFacts("lexicon-1", is_literal, entity_name_keys)

#: The arrays of :func:`hop_arrays`, by name.
HOP_ARRAYS = (
    "relation_chunks",
    "by_chunk_indptr",
    "by_chunk_order",
    "by_entity_indptr",
    "by_entity_order",
    "pages_indptr",
    "pages_order",
)


def chunk_links(snapshot: GraphSnapshot, chunk_offset: int) -> npt.NDArray[np.bool_]:
    """Per edge of ``snapshot``, whether it leads from an entity to a chunk (a
    ``described_by`` link to a node at or after ``chunk_offset``)."""
    return (np.asarray(snapshot.edge_kinds) == EdgeKind.DESCRIBED_BY) & (
        np.asarray(snapshot.indices) >= chunk_offset
    )


def grouped(keys: npt.NDArray[np.int64], n: int) -> tuple[npt.NDArray[np.int64], ...]:
    """CSR of the positions of ``keys`` by key (``-1`` keys left out): those of key
    ``k`` are ``order[indptr[k]:indptr[k + 1]]``, in position order."""
    if len(keys) and keys.min() >= 0:  # every position has a key (the relations' ends)
        order = stable_order(keys, n)
        present = keys
    else:
        kept = np.flatnonzero(keys >= 0)
        present = keys[kept]
        order = kept[stable_order(present, n)]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(present, minlength=n), out=indptr[1:])
    return indptr, order


def text_rows(rows: npt.NDArray[np.int64], n: int) -> tuple[npt.NDArray[np.int64], ...]:
    """CSR of the items (descriptions or relations) whose text sits in each of ``n``
    text rows, given each item's row: ``(indptr, order)``."""
    order = stable_order(rows, n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, order


def page_entities(kg: KnowledgeGraph) -> npt.NDArray[np.int64]:
    """Per chunk, the entity it is about (its title entity: a chunk-to-entity link of
    ``TOPIC_WEIGHT``), or -1."""
    return chunk_pages(kg.snapshot, kg.n_entities, kg.chunk_offset, len(kg.chunk_ids))


def chunk_pages(
    snapshot: GraphSnapshot, n_entities: int, chunk_offset: int, n_chunks: int
) -> npt.NDArray[np.int64]:
    """:func:`page_entities` of a snapshot whose ``n_chunks`` chunk nodes start at
    ``chunk_offset``, after ``n_entities`` entity nodes."""
    out = np.full(n_chunks, -1, dtype=np.int64)
    rows = snapshot.edge_sources()
    targets = np.asarray(snapshot.indices)
    topic = (
        (np.asarray(snapshot.edge_kinds) == EdgeKind.DESCRIBES)
        & (rows >= chunk_offset)
        & (targets < n_entities)
        & (np.asarray(snapshot.weights) >= TOPIC_WEIGHT)
    )
    out[rows[topic][::-1] - chunk_offset] = targets[topic][::-1]  # first link wins
    return out


def relation_chunks(kg: KnowledgeGraph) -> npt.NDArray[np.int64]:
    """Per relation, the position of the chunk holding its source sentence, or -1."""
    position = {chunk_id: i for i, chunk_id in enumerate(kg.chunk_ids)}
    return np.fromiter(
        (
            position.get(t.provenance.chunk_id, -1) if t.provenance is not None else -1
            for t in kg.relations
        ),
        dtype=np.int64,
        count=len(kg.relations),
    )


def hop_arrays(
    kg: KnowledgeGraph,
    pages: npt.NDArray[np.int64],
    chunks: npt.NDArray[np.int64] | None = None,
) -> dict[str, npt.NDArray[np.int64]]:
    """The arrays of :class:`~quillian.components.retrieval.context.HopLinks`: each
    relation's chunk (``chunks``, computed when not given), the relations in each chunk,
    those naming each entity, and each entity's pages (CSR, :func:`grouped`)."""
    if chunks is None:
        chunks = relation_chunks(kg)
    return relation_hops(
        np.asarray(kg.relation_subject),
        np.asarray(kg.relation_object),
        kg.n_entities,
        len(kg.chunk_ids),
        pages,
        chunks,
    )


def relation_hops(
    subjects: npt.NDArray[np.integer],
    objects: npt.NDArray[np.integer],
    n_entities: int,
    n_chunks: int,
    pages: npt.NDArray[np.int64],
    chunks: npt.NDArray[np.int64],
) -> dict[str, npt.NDArray[np.int64]]:
    """:func:`hop_arrays` of the relations between ``subjects`` and ``objects`` (entity
    positions), read in ``chunks`` (positions, or -1), over ``n_entities`` entities
    with their ``pages`` and ``n_chunks`` chunks."""
    ends = np.concatenate([subjects, objects]).astype(np.int64)
    by_entity_indptr, by_entity_order = grouped(ends, n_entities)
    by_chunk_indptr, by_chunk_order = grouped(chunks, n_chunks)
    pages_indptr, pages_order = grouped(np.asarray(pages, dtype=np.int64), n_entities)
    return {
        "relation_chunks": chunks,
        "by_chunk_indptr": by_chunk_indptr,
        "by_chunk_order": by_chunk_order,
        "by_entity_indptr": by_entity_indptr,
        "by_entity_order": by_entity_order % max(len(subjects), 1),
        "pages_indptr": pages_indptr,
        "pages_order": pages_order,
    }


def description_entities(kg: KnowledgeGraph) -> npt.NDArray[np.int32]:
    """Per description, the entity it describes."""
    return np.fromiter(
        (d.entity for d in kg.descriptions), dtype=np.int32, count=len(kg.descriptions)
    )


def literal_entities(kg: KnowledgeGraph) -> npt.NDArray[np.bool_]:
    """Per entity, whether it is a date, time or number rather than a name
    (:func:`~quillian.components.retrieval.seeding.is_literal`)."""
    return np.fromiter(
        (is_literal(e.name, e.type) for e in kg.entities), dtype=np.bool_, count=kg.n_entities
    )


def entity_chunks(kg: KnowledgeGraph) -> npt.NDArray[np.int64]:
    """Per entity, how many chunks are linked to it (about it or mentioning it)."""
    return entity_chunk_counts(kg.snapshot, kg.n_entities, kg.chunk_offset)


def entity_chunk_counts(
    snapshot: GraphSnapshot, n_entities: int, chunk_offset: int
) -> npt.NDArray[np.int64]:
    """:func:`entity_chunks` of a snapshot whose first ``n_entities`` nodes are the
    entities and whose chunk nodes start at ``chunk_offset``."""
    to_chunk = chunk_links(snapshot, chunk_offset)
    return np.bincount(snapshot.edge_sources()[to_chunk], minlength=snapshot.n_nodes)[:n_entities]


def entity_names(kg: KnowledgeGraph) -> Iterable[tuple[int, list[str]]]:
    """``(entity, [name, *aliases])`` for every entity, streamed."""
    for i, e in enumerate(kg.entities):
        yield i, [e.name, *e.aliases]


def name_keys(
    kg: KnowledgeGraph, pages: npt.NDArray[np.int64], titles: Sequence[str]
) -> tuple[Mapping[str, int], Mapping[str, int]]:
    """The lexicon's keys: those of the entity names and aliases, then those only the
    pages' base titles add (:func:`page_aliases`), each with the entity keeping it."""
    names = lexicon_keys(entity_names(kg))
    titled = [(int(e), t) for e, t in zip(pages.tolist(), titles, strict=True) if e >= 0]
    extra = lexicon_keys(page_aliases(titled))
    return names, {k: v for k, v in extra.items() if k not in names}
