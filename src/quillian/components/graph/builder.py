"""Merge extractions into SA-RAG's heterogeneous knowledge graph (paper section 5.3).

Nodes: entities, entity descriptions and chunks (SA-RAG's "documents"). Links:
``describes`` from a chunk or a description to an entity (stored with its reverse
``described_by``), and ``related_to`` between entities (stored in both directions),
each carrying the index of the relation whose text and provenance explain it.

An extracted entity is merged into an existing one when its normalised name or any
alias matches the existing entity's name or aliases, exactly as SA-RAG does; the
merged entity gains the new aliases and a new description node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.stores.protocols import GraphStore, SnapshotWriter
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, IdMap, NodeKind
from quillian.types import Triple, entity_id, normalize_name, stable_id

__all__ = [
    "DescriptionRecord",
    "EntityRecord",
    "GraphBuilder",
    "GraphEdges",
    "GraphIndexes",
    "GraphShape",
    "KnowledgeGraph",
    "description_node_id",
    "graph_edges",
    "write_graph",
]

#: ``described_by`` weight of a chunk that is about the entity (its title entity) versus
#: one that merely mentions it; rankers use it to prefer a passage about an entity.
TOPIC_WEIGHT = 1.0
MENTION_WEIGHT = 0.5


@dataclass
class EntityRecord:
    """An entity node under construction: name, type and the aliases merged into it."""

    name: str
    type: str = ""
    aliases: list[str] = field(default_factory=list)

    @property
    def node_id(self) -> str:
        return entity_id(self.name)


@dataclass(frozen=True, slots=True)
class DescriptionRecord:
    """An entity-description node: what one chunk says about one entity."""

    entity: int
    text: str
    chunk_id: str


def description_node_id(entity_node: str, chunk_id: str, text: str) -> str:
    """The snapshot node id of a description: a hash of its entity's node id, its chunk
    id and its text, never of a position, so a description an update leaves alone
    keeps its id wherever its entity moves."""
    return stable_id("desc", entity_node, chunk_id, text)


class GraphIndexes(Protocol):
    """What an index's build derived from its graph and stored (see
    :mod:`quillian.index.tables`), so a reader need not pass over every relation,
    entity or chunk to derive it again."""

    def array(self, name: str) -> npt.NDArray[Any] | None:
        """The stored array ``name`` (memory-mapped), or None where none is stored."""
        ...

    def entity_by_alias(self, alias_id: str) -> int | None:
        """The position of the first entity with an alias whose id is ``alias_id``."""
        ...

    def names(self, titled: bool) -> Callable[[str], Sequence[int]] | None:
        """The entities a normalised name key names (an entity lexicon's resolver), with
        or without the pages' base titles; None where none is stored."""
        ...


@dataclass(frozen=True)
class KnowledgeGraph:
    """The built graph: the snapshot plus the tables its node and edge ids point into.

    Node layout in the snapshot: entities first (``0..n_entities-1``, in the order of
    ``entities``), then descriptions, then chunks. ``relations[i]`` is the triple carried
    by edges whose ``edge_relations`` is ``i``; ``relation_subject``/``relation_object``
    are the entity indices of its endpoints.

    The tables are read-only sequences: lists for a graph just built, rows of an
    index's tables database read on demand for an opened one, whose ``indexes`` hold
    what its build derived from them.
    """

    snapshot: GraphSnapshot
    entities: Sequence[EntityRecord]
    descriptions: Sequence[DescriptionRecord]
    chunk_ids: Sequence[str]
    relations: Sequence[Triple]
    relation_subject: npt.NDArray[np.int32]
    relation_object: npt.NDArray[np.int32]
    indexes: GraphIndexes | None = field(default=None, compare=False)

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def description_offset(self) -> int:
        return len(self.entities)

    @property
    def chunk_offset(self) -> int:
        return len(self.entities) + len(self.descriptions)

    def entity_id(self, entity: int) -> str:
        """The content-derived id of the entity at position ``entity`` (``ent-`` and a
        hash of its normalised name, its snapshot node id): the same in every build,
        whatever position the entity takes there."""
        return self.entities[entity].node_id

    def find_entity(self, entity_id: str) -> int | None:
        """The position of the entity ``entity_id`` names, or None when none does.

        The id of an entity's name is found in the snapshot's id map (a binary search);
        failing that, the id of a name the entity carries as an alias finds it, so an id
        outlives a change of name (the document that named the entity first deleted)."""
        node = self.snapshot.ids.index_of(entity_id)
        if 0 <= node < self.n_entities and self.entities[node].node_id == entity_id:
            return node
        if self.indexes is not None:
            return self.indexes.entity_by_alias(entity_id)
        return self._alias_ids.get(entity_id)

    @cached_property
    def _alias_ids(self) -> dict[str, int]:
        """Entity position by the id of each alias (the first entity holding it), built
        once per opened graph."""
        found: dict[str, int] = {}
        for index, record in enumerate(self.entities):
            for alias in record.aliases:
                if normalize_name(alias):
                    found.setdefault(entity_id(alias), index)
        return found


class GraphBuilder:
    """Accumulates extractions and builds a :class:`KnowledgeGraph`.

    ``max_entities_per_chunk`` bounds the ``describes`` links one chunk may add, so a
    list-like passage cannot make itself a hub; the topic entity is always kept.
    """

    def __init__(self, max_entities_per_chunk: int = 64) -> None:
        self._max_per_chunk = max_entities_per_chunk
        self._by_key: dict[str, int] = {}
        self.entities: list[EntityRecord] = []
        self.descriptions: list[DescriptionRecord] = []
        self._seen_descriptions: set[tuple[int, str, str]] = set()
        self.relations: list[Triple] = []
        self._rel_ends: list[tuple[int, int]] = []
        self._seen_relations: set[str] = set()
        self._mentions: dict[tuple[str, int], float] = {}
        self._chunks: dict[str, None] = {}

    @classmethod
    def of(
        cls,
        entities: list[EntityRecord],
        descriptions: list[DescriptionRecord],
        relations: list[Triple],
        relation_ends: list[tuple[int, int]],
        mentions: dict[tuple[str, int], float],
        chunk_ids: Sequence[str],
    ) -> GraphBuilder:
        """A builder holding parts resolved elsewhere (by
        :mod:`~quillian.components.graph.incremental`), in the order :meth:`add` would
        have made them, ready to :meth:`build`."""
        builder = cls()
        builder.entities, builder.descriptions = entities, descriptions
        builder.relations, builder._rel_ends = relations, relation_ends
        builder._mentions = mentions
        builder._chunks = dict.fromkeys(chunk_ids)
        return builder

    def resolve(self, entity: ExtractedEntity) -> int:
        """Index of the entity matching ``entity`` by name or alias, creating it if new."""
        pairs = [
            (n.strip(), key) for n in (entity.name, *entity.aliases) if (key := normalize_name(n))
        ]
        if not pairs:
            raise ValueError(f"entity without a usable name: {entity.name!r}")
        index = next((self._by_key[k] for _, k in pairs if k in self._by_key), None)
        if index is None:
            index = len(self.entities)
            self.entities.append(EntityRecord(entity.name.strip(), entity.type))
        record = self.entities[index]
        if not record.type and entity.type:
            record.type = entity.type
        known = {normalize_name(n) for n in (record.name, *record.aliases)}
        for name, key in pairs:
            if key not in known:
                record.aliases.append(name)
                known.add(key)
            self._by_key.setdefault(key, index)
        return index

    def add(self, extraction: Extraction) -> None:
        """Merge one chunk's extraction into the graph."""
        chunk_id = extraction.chunk_id
        self._chunks.setdefault(chunk_id, None)
        ordered = sorted(extraction.entities, key=lambda e: not e.is_topic)
        for rank, entity in enumerate(ordered):
            if not normalize_name(entity.name):
                continue
            index = self.resolve(entity)
            if entity.is_topic or rank < self._max_per_chunk:
                weight = TOPIC_WEIGHT if entity.is_topic else MENTION_WEIGHT
                key = (chunk_id, index)
                self._mentions[key] = max(weight, self._mentions.get(key, 0.0))
            if entity.description:
                self._add_description(index, entity.description, chunk_id)
        for triple in extraction.triples:
            self._add_relation(triple)

    def add_all(self, extractions: Iterable[Extraction]) -> None:
        for extraction in extractions:
            self.add(extraction)

    def _add_description(self, entity: int, text: str, chunk_id: str) -> None:
        key = (entity, chunk_id, text)
        if key not in self._seen_descriptions:
            self._seen_descriptions.add(key)
            self.descriptions.append(DescriptionRecord(entity, text, chunk_id))

    def _add_relation(self, triple: Triple) -> None:
        if not (normalize_name(triple.subject) and normalize_name(triple.object)):
            return  # an end with no usable name is no node (as in ``add``): drop the link
        subject = self._by_key.get(normalize_name(triple.subject))
        obj = self._by_key.get(normalize_name(triple.object))
        if subject is None:
            subject = self.resolve(ExtractedEntity(triple.subject))
        if obj is None:
            obj = self.resolve(ExtractedEntity(triple.object))
        if subject == obj or triple.id in self._seen_relations:
            return
        self._seen_relations.add(triple.id)
        self.relations.append(triple)
        self._rel_ends.append((subject, obj))

    def entity_index(self, name: str) -> int | None:
        """Index of the entity with this name or alias, if any."""
        return self._by_key.get(normalize_name(name))

    def build(
        self, chunk_ids: Sequence[str] | None = None, store: GraphStore | None = None
    ) -> KnowledgeGraph:
        """Freeze the graph. ``chunk_ids`` fixes the chunk node order (default: first seen).
        Given an empty ``store``, the nodes and edges are written to it and the snapshot
        is the store's; otherwise the snapshot is built in memory."""
        chunks = list(chunk_ids) if chunk_ids is not None else list(self._chunks)
        chunk_index = {c: i for i, c in enumerate(chunks)}
        node_ids = [e.node_id for e in self.entities]
        node_ids += [
            description_node_id(self.entities[d.entity].node_id, d.chunk_id, d.text)
            for d in self.descriptions
        ]
        node_ids += chunks
        mentions = [
            (chunk_index[c], e, wt) for (c, e), wt in self._mentions.items() if c in chunk_index
        ]
        m = np.array(mentions, dtype=np.float64).reshape(-1, 3)
        ends = np.array(self._rel_ends, dtype=np.int64).reshape(-1, 2)
        edges = graph_edges(
            GraphShape(len(self.entities), len(self.descriptions), len(chunks)),
            m[:, 0].astype(np.int64),
            m[:, 1].astype(np.int64),
            m[:, 2].astype(np.float32),
            np.array([d.entity for d in self.descriptions], dtype=np.int64),
            ends[:, 0],
            ends[:, 1],
        )
        snapshot = write_graph(node_ids, edges, store)
        return KnowledgeGraph(
            snapshot=snapshot,
            entities=list(self.entities),
            descriptions=list(self.descriptions),
            chunk_ids=chunks,
            relations=list(self.relations),
            relation_subject=ends[:, 0].astype(np.int32),
            relation_object=ends[:, 1].astype(np.int32),
        )


@dataclass(frozen=True, slots=True)
class GraphShape:
    """How many entity, description and chunk nodes a graph has (in that node order)."""

    entities: int
    descriptions: int
    chunks: int

    @property
    def kinds(self) -> npt.NDArray[np.int8]:
        """Each node's kind."""
        return np.concatenate(
            [
                np.full(self.entities, NodeKind.ENTITY, np.int8),
                np.full(self.descriptions, NodeKind.DESCRIPTION, np.int8),
                np.full(self.chunks, NodeKind.CHUNK, np.int8),
            ]
        )


@dataclass(frozen=True, slots=True)
class GraphEdges:
    """A graph's nodes' kinds and its edges, in the order :meth:`GraphBuilder.build`
    emits them (a snapshot sorts them by source, stably)."""

    kinds: npt.NDArray[np.int8]
    sources: npt.NDArray[np.int64]
    targets: npt.NDArray[np.int64]
    edge_kinds: npt.NDArray[np.int8]
    weights: npt.NDArray[np.float32]
    relations: npt.NDArray[np.int32]

    def snapshot(self, node_ids: Sequence[str] | IdMap) -> GraphSnapshot:
        """The snapshot of these edges between ``node_ids`` (the ids, or their map)."""
        return GraphSnapshot.from_edges(
            node_ids,
            self.kinds,
            self.sources,
            self.targets,
            self.edge_kinds,
            self.weights,
            self.relations,
        )


def graph_edges(
    shape: GraphShape,
    mention_chunks: npt.NDArray[np.int64],
    mention_entities: npt.NDArray[np.int64],
    mention_weights: npt.NDArray[np.float32],
    description_entities: npt.NDArray[np.int64],
    relation_subjects: npt.NDArray[np.int64],
    relation_objects: npt.NDArray[np.int64],
    rows: npt.NDArray[np.bool_] | None = None,
) -> GraphEdges:
    """The edges of a graph of ``shape``: each mention (a chunk's position, its entity
    and weight, in the order the chunks were added) linked both ways, each
    description to its entity both ways, each relation between its ends both ways.
    ``rows``: where given (by node), only the edges that leave a node where it is True,
    in the same order (the rows a snapshot carried from another graph makes again,
    :meth:`~quillian.stores.snapshot.GraphSnapshot.carried`)."""
    desc_base, chunk_base = shape.entities, shape.entities + shape.descriptions
    src: list[npt.NDArray[np.int64]] = []
    dst: list[npt.NDArray[np.int64]] = []
    ek: list[npt.NDArray[np.int8]] = []
    w: list[npt.NDArray[np.float32]] = []
    rel: list[npt.NDArray[np.int32]] = []

    def emit(
        s: npt.NDArray[np.int64],
        d: npt.NDArray[np.int64],
        kind: EdgeKind,
        weight: npt.NDArray[np.float32],
        relation: npt.NDArray[np.int32],
    ) -> None:
        if rows is not None:
            leaving = rows[s]
            s, d, weight, relation = s[leaving], d[leaving], weight[leaving], relation[leaving]
        src.append(s)
        dst.append(d)
        ek.append(np.full(len(s), kind, np.int8))
        w.append(weight)
        rel.append(relation)

    if len(mention_chunks):
        c_nodes = mention_chunks + chunk_base
        none = np.full(len(c_nodes), -1, np.int32)
        emit(c_nodes, mention_entities, EdgeKind.DESCRIBES, mention_weights, none)
        emit(mention_entities, c_nodes, EdgeKind.DESCRIBED_BY, mention_weights, none)
    n_desc = len(description_entities)
    if n_desc:
        d_nodes = np.arange(n_desc, dtype=np.int64) + desc_base
        ones = np.ones(n_desc, np.float32)
        none = np.full(n_desc, -1, np.int32)
        emit(d_nodes, description_entities, EdgeKind.DESCRIBES, ones, none)
        emit(description_entities, d_nodes, EdgeKind.DESCRIBED_BY, ones, none)
    if len(relation_subjects):
        ids = np.arange(len(relation_subjects), dtype=np.int32)
        ones = np.ones(len(ids), np.float32)
        emit(relation_subjects, relation_objects, EdgeKind.RELATED_TO, ones, ids)
        emit(relation_objects, relation_subjects, EdgeKind.RELATED_TO, ones, ids)

    def cat(parts: Sequence[npt.NDArray[Any]], dtype: type) -> npt.NDArray[Any]:
        return np.concatenate(parts, dtype=dtype) if parts else np.zeros(0, dtype)

    return GraphEdges(
        shape.kinds,
        cat(src, np.int64),
        cat(dst, np.int64),
        cat(ek, np.int8),
        cat(w, np.float32),
        cat(rel, np.int32),
    )


def write_graph(
    node_ids: Sequence[str] | IdMap, edges: GraphEdges, store: GraphStore | None = None
) -> GraphSnapshot:
    """The snapshot of ``edges`` between ``node_ids`` (the ids, or their map): given an
    empty ``store``, written to it and read back from it (whole, where it can take a
    snapshot whole); otherwise built in memory."""
    if store is None or isinstance(store, SnapshotWriter):
        snapshot = edges.snapshot(node_ids)
        return snapshot if store is None else store.write_snapshot(snapshot)
    if isinstance(node_ids, IdMap):
        node_ids = node_ids.ids_of(range(len(node_ids)))
    store.add_nodes(node_ids, edges.kinds)
    store.add_edges(
        [node_ids[i] for i in edges.sources.tolist()],
        [node_ids[i] for i in edges.targets.tolist()],
        edges.edge_kinds,
        edges.weights,
        edges.relations,
    )
    return store.snapshot()
