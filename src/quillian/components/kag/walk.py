"""KAG's typed graph as its chunk retriever walks it (spec section 4.5 step 5, over the
mutual index of paper section 2.2 and the alignment of section 2.4): the paper measures
its M_Indexing / K_Alignment ablation in chunk retrieval, so the walk is where the
alignment has to show.

Nodes are the typed graph's (entities, concept nodes, chunks), every edge walked both
ways with these weights:

- ``source`` edges (entity to chunk: the mutual index): 1 from the entity the chunk is
  about (its title entity in the index's graph), 0.5 from one it mentions, as the
  index's own graph weighs them (the authors' igraph walk is unweighted; on HotpotQA's
  50 bench questions the unweighted walk lost 8 questions' R@2 to the index graph's
  and won none, docs/sections/kag-alignment.md);
- the extracted relations (typed triples, ``officialName`` from the extraction's
  aliases): 1;
- with ``alignment``, ``synonym`` and ``similar`` links between entities: 1 (both are
  thresholded already: WordNet's same first sense, a name cosine of at least 0.8, so
  HippoRAG 2's cosine weight would only move them between 0.8 and 1), and a link of
  weight 1 between the nodes of one name in two classes (:func:`same_name_links`: on
  2Wiki-800, 0.882 -> 0.922 perfect@8, 2 won, none lost, the other sets unchanged);
- with ``alignment``, ``belongTo`` (entity to concept) and ``isA`` (concept to concept,
  up to the schema's class): divided by the degree of each concept node it touches.
  A concept's edges then weigh 1 in all, as one ordinary neighbour: a concept two
  entities share joins them with half an edge each way, while ``city`` with 172
  members (MuSiQue's largest) or a schema class at the top of every chain hands each
  member 1/172 of what passes through it. That is the inverse document frequency of
  the concept, and it keeps a hub from draining its members' mass into every entity of
  its kind; an ``isA`` step between two concepts is divided by both degrees, so the
  chains carry mass only between small concepts.

Without ``alignment`` (M_Indexing) the alignment edges are dropped as the solver drops
them (:func:`~quillian.components.kag.alignment.without_alignment`); concept nodes are
then isolated and never reached. An index entity seeds the typed entities of its name
or aliases (its mass split evenly among them: one name may be two classes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from quillian.components.graph.builder import MENTION_WEIGHT, TOPIC_WEIGHT
from quillian.components.graph.ppr import Walk
from quillian.components.kag.alignment import without_alignment
from quillian.components.kag.graph import GRAPH_FILE, SOURCE, TypedGraph
from quillian.components.kag.schema import CHUNK, CONCEPT
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.kag import ChunkWalk
from quillian.types import normalize_name

__all__ = ["chunk_topics", "chunk_walk", "same_name_links", "typed_chunk_walk", "walk_edges"]


def walk_edges(
    graph: TypedGraph, *, alignment: bool, topics: Mapping[str, frozenset[str]] | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The edges the walk takes, ``(subjects, objects, weights)``, each once (the walk
    goes both ways), self-loops left out; weights as the module describes. With
    ``topics`` (chunk id to the normalised names of the entity the chunk is about), a
    ``source`` edge weighs ``TOPIC_WEIGHT`` from the chunk's own entity and
    ``MENTION_WEIGHT`` from one it only mentions, as in the index's graph."""
    edges = graph.edges if alignment else without_alignment(graph).edges
    n = len(graph.nodes)
    subjects = np.fromiter((e.subject for e in edges), dtype=np.int64, count=len(edges))
    objects = np.fromiter((e.object for e in edges), dtype=np.int64, count=len(edges))
    keep = subjects != objects
    subjects, objects = subjects[keep], objects[keep]
    concept = np.fromiter((node.label == CONCEPT for node in graph.nodes), dtype=bool, count=n)
    degree = np.bincount(subjects, minlength=n) + np.bincount(objects, minlength=n)
    weights = np.ones(len(subjects), dtype=np.float64)
    if topics is not None:
        kept = [e for e, k in zip(edges, keep.tolist(), strict=True) if k]
        for i, e in enumerate(kept):
            if e.predicate == SOURCE:
                about = topics.get(graph.nodes[e.object].name, frozenset())
                named = normalize_name(graph.nodes[e.subject].name) in about
                weights[i] = TOPIC_WEIGHT if named else MENTION_WEIGHT
    for end in (subjects, objects):
        at = concept[end]
        weights[at] /= degree[end[at]]
    if alignment:
        a, b = same_name_links(graph)
        subjects, objects = np.concatenate([subjects, a]), np.concatenate([objects, b])
        weights = np.concatenate([weights, np.ones(len(a))])
    return subjects, objects, weights


def same_name_links(graph: TypedGraph) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Edges joining the entity nodes that share a normalised name in different classes
    (each to the first of its name): the typed graph keeps one node per name and class,
    as KAG's ids are, and NER types one person ``Person`` in one chunk and ``Others`` in
    another, which cuts the bridge a multi-hop walk crosses. Joining them is the
    alignment's entity disambiguation in its simplest form (one name, one entity)."""
    first: dict[str, int] = {}
    a: list[int] = []
    b: list[int] = []
    for i, node in enumerate(graph.nodes):
        if node.label in (CHUNK, CONCEPT):
            continue
        key = normalize_name(node.name)
        if key in first:
            a.append(first[key])
            b.append(i)
        else:
            first[key] = i
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)


def chunk_walk(
    graph: TypedGraph,
    chunk_ids: Sequence[str],
    entity_names: Sequence[Sequence[str]],
    *,
    alignment: bool,
    topics: Mapping[str, frozenset[str]] | None = None,
) -> ChunkWalk:
    """The walk over ``graph`` for an index whose chunks are ``chunk_ids`` and whose
    entity ``i`` is named ``entity_names[i]`` (its name and aliases)."""
    n = len(graph.nodes)
    subjects, objects, weights = walk_edges(graph, alignment=alignment, topics=topics)
    matrix = sp.csr_matrix(
        (
            np.concatenate([weights, weights]),
            (np.concatenate([subjects, objects]), np.concatenate([objects, subjects])),
        ),
        shape=(n, n),
    )
    matrix.sum_duplicates()
    out = np.asarray(matrix.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros_like(out), where=out > 0)
    transition = sp.csr_matrix(sp.diags(inv) @ matrix)
    is_chunk = np.fromiter((node.label == CHUNK for node in graph.nodes), dtype=bool, count=n)
    walk = Walk.of(transition, fold=is_chunk, reorder=True)
    position = {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}
    chunks = [
        (i, position[node.name])
        for i, node in enumerate(graph.nodes)
        if is_chunk[i] and node.name in position
    ]
    indptr = [0]
    nodes: list[int] = []
    for names in entity_names:
        nodes.extend(dict.fromkeys(node for name in names for node in graph.by_name(name)))
        indptr.append(len(nodes))
    return ChunkWalk(
        walk,
        np.array(indptr, dtype=np.int64),
        np.array(nodes, dtype=np.int64),
        np.array([c for c, _ in chunks], dtype=np.int64),
        np.array([r for _, r in chunks], dtype=np.int64),
        "kag-aligned" if alignment else "kag",
    )


def typed_chunk_walk(context: RetrievalContext, alignment: bool) -> ChunkWalk | None:
    """The walk over the KAG graph of the index ``context`` was opened from, with or
    without its alignment; None when the index was built without KAG's stage."""
    if context.directory is None:
        return None
    path = context.directory / GRAPH_FILE
    if not path.is_file():
        return None
    graph = _graph(str(path), path.stat().st_mtime)
    kg = context.kg
    names = [[e.name, *e.aliases] for e in kg.entities]
    return chunk_walk(graph, kg.chunk_ids, names, alignment=alignment, topics=chunk_topics(context))


def chunk_topics(context: RetrievalContext) -> dict[str, frozenset[str]]:
    """Per chunk id, the normalised names (and aliases) of the entity the chunk is about
    in the index's graph (its title entity), for chunks that have one."""
    out: dict[str, frozenset[str]] = {}
    for chunk, entity in enumerate(context.page_entities.tolist()):
        if entity >= 0:
            e = context.kg.entities[entity]
            out[context.kg.chunk_ids[chunk]] = frozenset(
                normalize_name(n) for n in (e.name, *e.aliases)
            )
    return out


@lru_cache(maxsize=2)
def _graph(path: str, stamp: float) -> TypedGraph:
    """The graph file, read once while it stays the same (both arms read one file)."""
    return TypedGraph.load(Path(path))
