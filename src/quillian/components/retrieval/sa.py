"""SA-RAG retrieval: seeds, subgraph fetching, spreading activation, document retrieval.

The flow follows the paper (sections 5.4-5.5) step by step:

1. seed entities: the entities of the top-``seed_k`` entity descriptions by cosine;
2. the ``hops``-hop subgraph of ``related_to`` links around them, each link weighted by
   the cosine between the query and the link's text, rescaled ``(w - c) / (1 - c)``;
3. Algorithm 1 from the seeds; entities above ``activation_threshold`` are activated;
4. documents linked by ``describes`` to activated entities, pruned below
   ``document_threshold`` cosine, plus relations between activated entities whose
   cosine exceeds ``relation_threshold``.

``SAConfig.paper()`` is exactly that. The default adds what we measured to help on
multi-hop QA (docs/benchmarks.md): entities named in the query join the seeds, and
documents are ranked by the activation of the entity they are about (their title
entity) or mention, fused with their cosine to the query, so every query gets exactly k
passages ranked by graph evidence rather than an unordered set. Its trace also keeps
the paths that carried the activation to the returned passages' entities (each entity's
best path back to a seed, :func:`~quillian.components.graph.paths.best_paths`): a
passage reached over two hops shows both relations, with their sentences, even when a
sentence names its subject only as "he" and so scores below tau_r (the relations of
step 4, which answering methods read, are unchanged).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from quillian.components.graph.activation import rescale_weights, spreading_activation
from quillian.components.graph.builder import TOPIC_WEIGHT
from quillian.components.graph.paths import best_paths
from quillian.components.graph.traversal import (
    Subgraph,
    gather_edges,
    khop_subgraph,
    with_edges,
)
from quillian.components.retrieval.base import (
    ActivatedEntity,
    ActivationPath,
    RetrievalResult,
    RetrievalTrace,
    Seed,
    UsedRelation,
    top_k_passages,
)
from quillian.components.retrieval.context import RelationText, RetrievalContext, SeedMode
from quillian.errors import ConfigError
from quillian.stores.snapshot import EdgeKind

__all__ = ["BridgeLike", "Bridges", "SAConfig", "SARetriever"]

#: Bridge-text embeddings an SA retriever keeps (about 150 MB at 384 dimensions).
BRIDGE_CACHE = 100_000


class BridgeLike(Protocol):
    """An edge between two entities of the index through another graph."""

    @property
    def source(self) -> int: ...

    @property
    def target(self) -> int: ...

    @property
    def subject(self) -> str: ...

    @property
    def predicate(self) -> str: ...

    @property
    def object(self) -> str: ...

    @property
    def confidence(self) -> float:
        """Scales the edge weight (the link scores that justify the bridge)."""
        ...


class Bridges(Protocol):
    """Edges from outside the index (:class:`quillian.components.kg.linked.LinkBridges`)."""

    name: str

    def bridges(self, entities: npt.ArrayLike) -> Sequence[BridgeLike]: ...


@dataclass(frozen=True)
class SAConfig:
    """Settings of SA-RAG retrieval.

    The defaults are Quillian's tuned variant (see the module docstring and
    docs/benchmarks.md); :meth:`paper` gives the paper's algorithm and values.
    """

    seed_k: int = 3
    """Top-k entity descriptions that seed the activation (paper: 3 MuSiQue, 10 2Wiki)."""
    triple_seeds: int = 0
    """Also seed with the ends of the N relations whose source sentences are nearest
    the question (a dense match of the question against the triples; 0: off)."""
    triple_text: RelationText = "sentence"
    """What the triple seeds are matched on: ``sentence``, the relation's source
    sentence; ``endpoints``, its ends' names, predicate and sentence."""
    hops: int = 2
    """Subgraph radius n (paper: 4 MuSiQue, 3 2Wiki)."""
    c: float = 0.2
    """Edge-weight rescaling constant in w' = (w - c) / (1 - c) (paper: 0.4, tuned for
    bge-large, whose cosines run higher than MiniLM's)."""
    activation_threshold: float = 0.5
    """tau_a: entities whose activation exceeds it are activated."""
    document_threshold: float = 0.45
    """tau_d: documents below this cosine to the query are pruned (paper ranking)."""
    relation_threshold: float = 0.5
    """tau_r: relations between activated entities above this cosine join the context."""
    seeding: SeedMode = "auto"
    """Paper: description. auto: entities named in the query, else description seeds."""
    literal_seeds: bool = True
    """Seed dates, times and numbers too (``is_literal`` in seeding.py). On, unlike
    ``ppr``: with ``auto`` seeding, descriptions (where the dates came from) seed only
    questions that name nothing, and leaving literals out changed no ``sa`` figure on
    the four dev sets."""
    ranking: Literal["paper", "fused"] = "fused"
    """paper: the activated documents by cosine; fused: activation-weighted fusion."""
    graded_seeds: bool = True
    """Seeds start at their weight instead of 1: a named entity at its specificity
    (rare entities 1, ubiquitous ones near 0), a description seed at its cosine."""
    dense_weight: float = 1.0
    """fused ranking: weight of the document's query cosine added to its graph score."""
    bm25_weight: float = 0.0
    """fused ranking: weight of the document's BM25 score (scaled to the best = 1)."""
    candidates: int = 0
    """fused ranking: the dense (and, with bm25_weight, BM25) top-N chunks join the
    graph's candidates (0: graph candidates only)."""
    mention_weight: float = 0.5
    """fused ranking: share of activation a document gets for mentioning an entity
    rather than being about it."""
    max_fanout: int = 64
    """At most this many heaviest related_to links per entity (hub guard)."""
    max_nodes: int = 5000
    """At most this many entities in the fetched subgraph."""
    max_relations: int = 20
    """At most this many relations returned in the trace and context."""
    max_bridges: int = 256
    """With bridges to another graph: at most this many crossing edges per query."""

    def __post_init__(self) -> None:
        for name in ("seed_k", "max_fanout", "max_nodes"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be greater than 0, got {getattr(self, name)}")
        if self.hops < 0 or self.triple_seeds < 0:
            raise ConfigError("hops and triple_seeds must be >= 0")
        if not 0.0 <= self.c < 1.0:
            raise ConfigError(f"c must be in [0, 1), got {self.c}")

    @classmethod
    def paper(cls, **overrides: Any) -> SAConfig:
        """The paper's algorithm and settings (MuSiQue: k=3, n=4; pass seed_k=10, hops=3
        for 2WikiMultihopQA)."""
        paper = cls(
            seed_k=3, hops=4, c=0.4, seeding="description", ranking="paper", graded_seeds=False
        )
        return replace(paper, **overrides)


class SARetriever:
    """Spreading-activation retrieval over a :class:`RetrievalContext`."""

    def __init__(
        self,
        context: RetrievalContext,
        config: SAConfig | None = None,
        *,
        bridges: Bridges | None = None,
    ) -> None:
        self.context = context
        self.config = config or SAConfig()
        self.bridges = bridges
        self._bridge_cache: dict[str, npt.NDArray[np.float32]] = {}
        self.name = "sa" if self.config.ranking == "fused" else "sa-paper"
        if bridges is not None:
            self.name += f"+{bridges.name}"

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        timings: dict[str, float] = {}
        start = time.perf_counter()
        q = self.context.embed_query(query) if query_vector is None else query_vector
        timings["embed"] = _ms(start)
        t = time.perf_counter()
        seeds = self.seeds(query, q)
        timings["seed"] = _ms(t)
        t = time.perf_counter()
        seed_entities = [s.entity for s in seeds]
        sub = self._subgraph(seed_entities, q)
        crossed: list[BridgeLike] = []
        if self.bridges is not None:
            sub, crossed = self._cross(sub, q)
        activation = (
            spreading_activation(
                sub.indptr,
                sub.indices,
                rescale_weights(sub.weights, self.config.c),
                sub.local(seed_entities),
                initial=self._initial(seeds),
            )
            if len(seeds)
            else np.zeros(0)
        )
        timings["activate"] = _ms(t)
        t = time.perf_counter()
        ranked = self._rank(query, sub, activation, q, k)
        passages = [self.context.passage(c, s) for c, s in ranked]
        timings["rank"] = _ms(t)
        fused = self.config.ranking == "fused"
        trace = RetrievalTrace(
            seeds=seeds,
            activated=self._activated(sub, activation),
            relations=self._relations(sub, activation, crossed),
            paths=self._paths(sub, activation, ranked, crossed) if fused else [],
            subgraph_nodes=sub.n_nodes,
            subgraph_edges=len(sub.indices),
            timings_ms=timings,
        )
        return RetrievalResult(self.name, query, passages, trace)

    def seeds(self, query: str, q: npt.NDArray[np.float32]) -> list[Seed]:
        return self.context.seeds(
            query,
            q,
            self.config.seeding,
            self.config.seed_k,
            self.config.triple_seeds,
            self.config.triple_text,
            literals=self.config.literal_seeds,
        )

    def _initial(self, seeds: list[Seed]) -> npt.NDArray[np.float64] | None:
        if not self.config.graded_seeds:
            return None
        spec = self.context.entity_specificity
        return np.array(
            [spec[s.entity] if s.source == "lexical" else max(s.score, 0.0) for s in seeds]
        )

    def _subgraph(self, seeds: list[int], q: npt.NDArray[np.float32]) -> Subgraph:
        """The seeds' neighbourhood; ``weights`` are the raw query-relation cosines."""
        snapshot = self.context.kg.snapshot

        def weight(positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
            rel = np.asarray(snapshot.edge_relations[positions], dtype=np.int64)
            return self.context.relation_similarity(q, rel)

        return khop_subgraph(
            snapshot,
            seeds,
            self.config.hops,
            weight,
            max_fanout=self.config.max_fanout,
            max_nodes=self.config.max_nodes,
        )

    def _cross(
        self, sub: Subgraph, q: npt.NDArray[np.float32]
    ) -> tuple[Subgraph, list[BridgeLike]]:
        """``sub`` with the bridges of its nodes within ``hops`` of the seeds, each
        weighted like a relation (query cosine of its text) times its confidence.
        Bridge ``i`` sits at edge position ``-(i + 1)``."""
        assert self.bridges is not None
        inner = sub.nodes[sub.hops < self.config.hops]
        found = list(self.bridges.bridges(inner))[: self.config.max_bridges]
        if not found:
            return sub, []
        cosine = self._bridge_vectors([_bridge_text(b) for b in found]) @ q
        weights = cosine * np.array([b.confidence for b in found], dtype=np.float32)
        crossed = with_edges(
            sub,
            [b.source for b in found],
            [b.target for b in found],
            -(np.arange(len(found)) + 1),
            weights,
            max_nodes=self.config.max_nodes,
        )
        return crossed, found

    def _bridge_vectors(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embeddings of bridge texts, each text embedded once per retriever (bridges
        come in both directions and recur across queries); the cache is bounded."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._bridge_cache]
        if missing:
            if len(self._bridge_cache) + len(missing) > BRIDGE_CACHE:
                self._bridge_cache.clear()
            self._bridge_cache.update(
                zip(missing, self.context.embedder.embed(missing), strict=True)
            )
        return np.stack([self._bridge_cache[t] for t in texts])

    def _rank(
        self,
        query: str,
        sub: Subgraph,
        activation: npt.NDArray[np.float64],
        q: npt.NDArray[np.float32],
        k: int,
    ) -> list[tuple[int, float]]:
        cfg, ctx = self.config, self.context
        paper = cfg.ranking == "paper"
        live = activation > (cfg.activation_threshold if paper else 0.0)
        entities, values = sub.nodes[live], activation[live]
        src, dst, pos = gather_edges(ctx.kg.snapshot, entities, EdgeKind.DESCRIBED_BY)
        is_chunk = dst >= ctx.kg.chunk_offset
        src, dst, pos = src[is_chunk], dst[is_chunk], pos[is_chunk]
        chunks = dst - ctx.kg.chunk_offset
        extra, bm25 = self._hybrid(query, q) if not paper else ([], {})
        unique = np.unique(np.concatenate([chunks, np.asarray(extra, dtype=np.int64)]))
        cosine = ctx.chunk_similarity(q, unique).astype(np.float64)
        if paper:
            kept = cosine >= cfg.document_threshold
            scores = dict(zip(unique[kept].tolist(), cosine[kept].tolist(), strict=True))
        else:
            # each chunk's best share of an activated entity's value (the topic's whole
            # value, a mention's ``mention_weight`` of it), plus its weighted cosine and
            # BM25 score: numpy in the order the per-edge loop added them, so the same
            # floats
            order = np.argsort(entities, kind="stable")
            value = values[order[np.searchsorted(entities, src, sorter=order)]]
            topic = np.asarray(ctx.kg.snapshot.weights[pos]) >= TOPIC_WEIGHT
            graph = np.zeros(len(unique))
            np.maximum.at(
                graph,
                np.searchsorted(unique, chunks),
                value * np.where(topic, 1.0, cfg.mention_weight),
            )
            lexical = np.array([bm25.get(c, 0.0) for c in unique.tolist()]) if bm25 else 0.0
            total = graph + cfg.dense_weight * cosine + cfg.bm25_weight * lexical
            scores = dict(zip(unique.tolist(), total.tolist(), strict=True))
        # the dense ranking only fills a list the graph left short (a search saved)
        short = len(scores) < k
        fallback = [c for c, _ in ctx.dense_ranking(q, k)] if short else []
        return top_k_passages(scores, k, fallback)

    def _hybrid(self, query: str, q: npt.NDArray[np.float32]) -> tuple[list[int], dict[int, float]]:
        """Dense and BM25 top-N chunks (the extra candidates) and scaled BM25 scores."""
        cfg = self.config
        if cfg.candidates <= 0 and cfg.bm25_weight <= 0:
            return [], {}
        extra = (
            [c for c, _ in self.context.dense_ranking(q, cfg.candidates)]
            if cfg.candidates > 0
            else []
        )
        bm25: dict[int, float] = {}
        index = self.context.bm25
        if cfg.bm25_weight > 0 and index is not None:
            ids, scores = index.search(query, max(cfg.candidates, 50))
            if len(scores) and scores[0] > 0:
                bm25 = dict(zip(ids.tolist(), (scores / scores[0]).tolist(), strict=True))
            if cfg.candidates > 0:
                extra += ids[: cfg.candidates].tolist()
        return extra, bm25

    def _activated(
        self, sub: Subgraph, activation: npt.NDArray[np.float64]
    ) -> list[ActivatedEntity]:
        ctx, tau = self.context, self.config.activation_threshold
        order = np.argsort(-activation, kind="stable")
        return [
            ActivatedEntity(
                int(sub.nodes[i]),
                ctx.entity_name(int(sub.nodes[i])),
                float(activation[i]),
                int(sub.hops[i]),
            )
            for i in order.tolist()
            if activation[i] > tau
        ]

    def _relations(
        self,
        sub: Subgraph,
        activation: npt.NDArray[np.float64],
        crossed: Sequence[BridgeLike] = (),
    ) -> list[UsedRelation]:
        """Relations between activated entities whose cosine exceeds tau_r, best first;
        a bridge to another graph is reported with relation id -1 and its text."""
        ctx, cfg = self.context, self.config
        if sub.n_nodes == 0:
            return []
        raw = sub.weights
        rows = np.repeat(np.arange(sub.n_nodes), np.diff(sub.indptr))
        active = activation > cfg.activation_threshold
        keep = active[rows] & active[sub.indices] & (raw > cfg.relation_threshold)
        positions = sub.positions[keep]
        rel_ids = np.full(len(positions), -1, dtype=np.int64)
        inside = positions >= 0
        rel_ids[inside] = ctx.kg.snapshot.edge_relations[positions[inside]]
        weights = raw[keep]
        out: dict[int | str, UsedRelation] = {}
        for i in np.argsort(-weights, kind="stable").tolist():
            if positions[i] < 0:
                bridge = crossed[-int(positions[i]) - 1]
                if _bridge_text(bridge) not in out:
                    out[_bridge_text(bridge)] = self._bridge_relation(bridge, float(weights[i]))
            elif rel_ids[i] >= 0 and int(rel_ids[i]) not in out:
                out[int(rel_ids[i])] = ctx.used_relation(int(rel_ids[i]), float(weights[i]))
            if len(out) >= cfg.max_relations:
                break
        return list(out.values())

    def _paths(
        self,
        sub: Subgraph,
        activation: npt.NDArray[np.float64],
        ranked: Sequence[tuple[int, float]],
        crossed: Sequence[BridgeLike],
    ) -> list[ActivationPath]:
        """The best activation paths from the seeds to the entities of the returned
        passages: passage by passage, the entity it is about first, then those it
        mentions by activation; at most ``max_relations`` paths."""
        ctx = self.context
        reached = np.flatnonzero((activation > 0) & (sub.hops > 0))
        if not len(reached) or not ranked:
            return []
        src, dst, pos = gather_edges(ctx.kg.snapshot, sub.nodes[reached], EdgeKind.DESCRIBED_BY)
        rank_of = {ctx.kg.chunk_offset + chunk: r for r, (chunk, _) in enumerate(ranked)}
        returned = np.isin(dst, np.fromiter(rank_of, dtype=np.int64))
        src, dst, pos = src[returned], dst[returned], pos[returned]
        local = dict(zip(sub.nodes[reached].tolist(), reached.tolist(), strict=True))
        topic = np.asarray(ctx.kg.snapshot.weights[pos]) >= TOPIC_WEIGHT
        order = sorted(
            (rank_of[d], not t, -activation[local[s]], local[s], d)
            for s, d, t in zip(src.tolist(), dst.tolist(), topic.tolist(), strict=True)
        )
        about: dict[int, int] = {}  # target -> the chunk node it is the topic of
        for _, not_topic, _, target, chunk in order:
            if not not_topic:
                about.setdefault(target, chunk)
        targets = list(dict.fromkeys(entry[3] for entry in order))[: self.config.max_relations]
        rescaled = rescale_weights(sub.weights, self.config.c)
        arcs = best_paths(sub.indptr, sub.indices, rescaled, sub.hops, activation, targets)
        paths = []
        for target, path in zip(targets, arcs, strict=True):
            relations = [self._arc_relation(sub, arc, crossed) for arc in path]
            kept = tuple(r for r in relations if r is not None)
            if kept:
                name = ctx.entity_name(int(sub.nodes[target]))
                chunk = about.get(target)
                if chunk is None:
                    paths.append(ActivationPath(name, kept))
                    continue
                position = chunk - ctx.kg.chunk_offset
                title, chunk_id = ctx.chunk_titles[position], ctx.kg.chunk_ids[position]
                paths.append(ActivationPath(name, kept, title, chunk_id))
        return paths

    def _arc_relation(
        self, sub: Subgraph, arc: int, crossed: Sequence[BridgeLike]
    ) -> UsedRelation | None:
        """The relation (or bridge) behind a subgraph arc, with the hop it reaches."""
        position, weight = int(sub.positions[arc]), float(sub.weights[arc])
        hop = int(sub.hops[sub.indices[arc]])
        if position < 0:
            return replace(self._bridge_relation(crossed[-position - 1], weight), hop=hop)
        rel = int(self.context.kg.snapshot.edge_relations[position])
        return self.context.used_relation(rel, weight, hop) if rel >= 0 else None

    def _bridge_relation(self, bridge: BridgeLike, weight: float) -> UsedRelation:
        source = self.bridges.name if self.bridges is not None else "another graph"
        return UsedRelation(
            -1, bridge.subject, bridge.predicate, bridge.object, f"from {source}", weight
        )


def _bridge_text(bridge: BridgeLike) -> str:
    """The text a bridge is weighed by, like a relation: ``subject predicate object``."""
    return f"{bridge.subject} {bridge.predicate} {bridge.object}"


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
