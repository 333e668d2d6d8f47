"""KAG's chunk retriever (spec section 4.5 step 5; the authors' ``KAGRetriever`` /
``ppr_chunk_retriever``): personalized PageRank over the entity+chunk graph seeded
with linked entities, fused with dense retrieval, plus a BM25 swap-in.

1. Seeds: the entities named in the query (exact name match, score 1.0) and the
   entities whose descriptions are nearest the query (their cosine), or the entities a
   caller has already bound (the solver's logical-form entities).
2. No seeds: dense retrieval only. Every seed scoring above ``pagerank_threshold``:
   PageRank only. Otherwise ``w * minmax(PPR) + (1 - w) * minmax(dense)`` over the union
   of both candidate lists (``pagerank_weight`` w = 0.5).
3. PageRank runs with the reset on the seeds, and chunks are ranked by their mass. The
   graph walked is a :class:`ChunkWalk`: on an index built with KAG's stage, its typed
   graph (the mutual index, the typed relations and, with ``alignment``, the alignment
   links and concepts; :mod:`quillian.components.kag.walk`), given through the
   constructor; else the index's undirected entity+chunk graph (``related_to`` and the
   entity-chunk links).
4. BM25 top-1 for the query: if missing from the top ``k``, it replaces the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.graph.ppr import Walk, personalized_pagerank
from quillian.components.retrieval.base import (
    RetrievalResult,
    RetrievalTrace,
    Seed,
    best_k,
    check_k,
)
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import ConfigError
from quillian.stores.snapshot import EdgeKind, NodeKind
from quillian.types import normalize_name

__all__ = [
    "ChunkWalk",
    "ChunkWalkSource",
    "KAGChunkConfig",
    "KAGChunkRetriever",
    "minmax_fuse",
    "strongest",
]


@dataclass(frozen=True)
class KAGChunkConfig:
    damping: float = 0.1
    """Probability of following an edge in PageRank (the authors' in-memory graph passes
    0.1 to igraph; HippoRAG uses 0.5)."""
    pagerank_weight: float = 0.5
    """Weight of the PageRank scores in the fusion (the authors': 0.5)."""
    pagerank_threshold: float = 0.9
    """When every seed links above this score, PageRank alone ranks (the authors': 0.9)."""
    seed_k: int = 5
    """Entities linked through their descriptions when the query names none (the
    authors link the entities their NER finds; without a model, names in the query
    stand in for NER, and descriptions for a query that names nothing)."""
    min_seed_score: float = 0.3
    """Description links below this cosine are not seeds."""
    candidates: int = 50
    """How many chunks each of PageRank and dense contributes to the fusion."""
    bm25_swap: bool = True
    """Put the BM25 top-1 in place of the last chunk when it is missing (the authors')."""
    tolerance: float = 1e-6
    """PageRank stops when one more power step would move less than this much
    probability mass (L1), as ``ppr``'s does; at the damping 0.1 every score is then
    within about 1e-7 of the exact one. 1e-6 rather than the solver's 1e-8 for speed
    inside ``fused``; ``fused``'s rankings on the report's five indexes were the same."""
    typed_graph: bool = False
    """Walk the index's KAG graph when it was built with KAG's stage (the typed graph
    and its mutual index, as the authors' retriever does; the retrievers ``kag-typed``
    and ``kag-mi``); False, or an index without that stage: the index's own
    entity+chunk graph. Off by default: on the report's indexes the typed walk scored
    2Wiki-800 perfect@8 0.922 against the index graph's 0.980 (3 lost, none won) and
    HotpotQA R@2 0.68 against 0.71, with MuSiQue's R@5 +0.02 (docs/benchmarks.md,
    "KAG's alignment in chunk retrieval")."""
    alignment: bool = True
    """On the KAG graph (``typed_graph``), also walk its alignment (``synonym`` and
    ``similar`` links, nodes of one name in two classes joined, and ``belongTo``/``isA``
    through the concept nodes): the paper's K_Alignment; False: the mutual index and
    the extracted relations only (M_Indexing)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"damping must be in [0, 1), got {self.damping}")
        if not 0.0 <= self.pagerank_weight <= 1.0:
            raise ConfigError(f"pagerank_weight must be in [0, 1], got {self.pagerank_weight}")
        if self.seed_k < 0 or self.candidates <= 0:
            raise ConfigError("seed_k must be >= 0 and candidates > 0")
        if not 0.0 < self.tolerance < 1.0:
            raise ConfigError(f"tolerance must be in (0, 1), got {self.tolerance}")


def minmax_fuse(
    first: dict[int, float], second: dict[int, float], weight: float
) -> dict[int, float]:
    """``weight * minmax(first) + (1 - weight) * minmax(second)`` over both key sets;
    a key missing from one list scores 0 there. A constant list normalises to 1."""

    def norm(scores: dict[int, float]) -> dict[int, float]:
        if not scores:
            return {}
        lo, hi = min(scores.values()), max(scores.values())
        span = hi - lo
        return {c: (s - lo) / span if span > 0 else 1.0 for c, s in scores.items()}

    a, b = norm(first), norm(second)
    return {c: weight * a.get(c, 0.0) + (1 - weight) * b.get(c, 0.0) for c in {*a, *b}}


def strongest(seeds: Iterable[Seed]) -> list[Seed]:
    """One seed per entity, the highest-scoring one, in the order entities first appear."""
    out: dict[int, Seed] = {}
    for seed in seeds:
        if seed.entity not in out or out[seed.entity].score < seed.score:
            out[seed.entity] = seed
    return list(out.values())


@dataclass(frozen=True)
class ChunkWalk:
    """The graph KAG's PageRank walks: its prepared :class:`Walk`; where an index
    entity's reset mass goes (entity ``e``'s walk nodes are
    ``seed_nodes[seed_indptr[e]:seed_indptr[e + 1]]``, its mass split evenly among
    them); and which walk nodes are chunks (``chunk_nodes``, with their chunk positions
    ``chunk_rows``)."""

    walk: Walk
    seed_indptr: npt.NDArray[np.int64]
    seed_nodes: npt.NDArray[np.int64]
    chunk_nodes: npt.NDArray[np.int64]
    chunk_rows: npt.NDArray[np.int64]
    graph: str
    """Which graph: ``index`` (the entity+chunk graph), ``kag`` or ``kag-aligned``."""

    @classmethod
    def of_index(cls, kg: KnowledgeGraph) -> ChunkWalk:
        """The index's undirected entity+chunk graph (``related_to`` and the
        entity-chunk links), description nodes folded; entities seed themselves."""
        kinds = (EdgeKind.RELATED_TO, EdgeKind.DESCRIBES, EdgeKind.DESCRIBED_BY)
        walk = Walk.over(
            kg.snapshot, kinds, fold=(NodeKind.DESCRIPTION,), dtype=np.float32, reorder=True
        )
        n, chunks = kg.n_entities, len(kg.chunk_ids)
        return cls(
            walk,
            np.arange(n + 1, dtype=np.int64),
            np.arange(n, dtype=np.int64),
            np.arange(chunks, dtype=np.int64) + kg.chunk_offset,
            np.arange(chunks, dtype=np.int64),
            "index",
        )

    def reset(self, seeds: Sequence[Seed]) -> npt.NDArray[np.float64]:
        """The reset vector of ``seeds`` (each at least 1e-6); zero where no seed has a
        walk node."""
        out = np.zeros(self.walk.n_nodes, dtype=np.float64)
        for seed in seeds:
            nodes = self.seed_nodes[
                self.seed_indptr[seed.entity] : self.seed_indptr[seed.entity + 1]
            ]
            if len(nodes):
                out[nodes] += max(seed.score, 1e-6) / len(nodes)
        return out


#: Builds the KAG graph's walk for a context (``alignment`` on or off); None when the
#: index has no KAG graph.
ChunkWalkSource = Callable[[RetrievalContext, bool], ChunkWalk | None]


class KAGChunkRetriever:
    """KAG's hybrid chunk retriever over an index (no LLM). ``typed`` builds the walk
    over the index's KAG graph (:func:`quillian.components.kag.walk.typed_chunk_walk`;
    the factory passes it); without it, or when it finds no KAG graph, PageRank walks
    the index's entity+chunk graph."""

    name = "kag"

    def __init__(
        self,
        context: RetrievalContext,
        config: KAGChunkConfig | None = None,
        *,
        typed: ChunkWalkSource | None = None,
    ) -> None:
        self.context = context
        self.config = config or KAGChunkConfig()
        self.typed = typed

    @cached_property
    def walk(self) -> ChunkWalk:
        """The graph PageRank walks (built on first use)."""
        if self.typed is not None and self.config.typed_graph:
            found = self.typed(self.context, self.config.alignment)
            if found is not None:
                return found
        return ChunkWalk.of_index(self.context.kg)

    @cached_property
    def _entity_by_name(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, e in enumerate(self.context.kg.entities):
            for name in (e.name, *e.aliases):
                out.setdefault(normalize_name(name), i)
        return out

    def link(self, query: str, q: npt.NDArray[np.float32]) -> list[Seed]:
        """Entities the query names (score 1.0); if it names none, the ``seed_k``
        nearest by description (their cosine, when at least ``min_seed_score``)."""
        ctx, conf = self.context, self.config
        seeds = list(ctx.seeds(query, q, "lexical", 0))
        if seeds:
            return seeds
        have: set[int] = set()
        for desc, score in ctx.top_descriptions(q, conf.seed_k):
            entity = int(ctx.description_entity[desc])
            if score >= conf.min_seed_score and entity not in have:
                have.add(entity)
                seeds.append(Seed(entity, ctx.entity_name(entity), score, "description"))
        return seeds

    def mention_seeds(self, names: Sequence[str]) -> list[Seed]:
        """Seeds for entity mentions a model found in a question: an entity of that
        name (score 1.0), else the entity whose description is nearest the mention
        (its cosine, when at least ``min_seed_score``)."""
        ctx = self.context
        found: list[Seed] = []
        unmatched = []
        for name in dict.fromkeys(n for n in names if n.strip()):
            entity = self._entity_by_name.get(normalize_name(name))
            if entity is None:
                unmatched.append(name)
            else:
                found.append(Seed(entity, ctx.entity_name(entity), 1.0, "mention"))
        if unmatched:
            for vector in ctx.embedder.embed(unmatched):
                for desc, score in ctx.top_descriptions(vector, 1):
                    entity = int(ctx.description_entity[desc])
                    if score >= self.config.min_seed_score:
                        found.append(Seed(entity, ctx.entity_name(entity), score, "mention"))
        return strongest(found)

    def seeds_for(self, names: Sequence[tuple[str, float]]) -> list[Seed]:
        """Seeds for entities bound elsewhere (by name, with their link scores)."""
        found = []
        for name, score in names:
            entity = self._entity_by_name.get(normalize_name(name))
            if entity is not None:
                found.append(Seed(entity, self.context.entity_name(entity), score, "bound"))
        return strongest(found)

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        check_k(k)
        q = self.context.embed_query(query) if query_vector is None else query_vector
        return self.retrieve_seeded(query, k, self.link(query, q), q)

    def retrieve_seeded(
        self,
        query: str,
        k: int,
        seeds: Sequence[Seed],
        query_vector: npt.NDArray[np.float32] | None = None,
        also: Sequence[npt.NDArray[np.float32]] = (),
    ) -> RetrievalResult:
        """The top ``k`` chunks for ``query`` with PageRank reset on ``seeds``; the
        dense half scores each chunk by its best cosine to the query and to the vectors
        ``also`` (the solver passes the original question beside a sub-question)."""
        check_k(k)
        ctx, cfg = self.context, self.config
        q = ctx.embed_query(query) if query_vector is None else query_vector
        dense: dict[int, float] = {}
        for vector in (q, *also):
            for chunk, score in ctx.dense_ranking(vector, max(cfg.candidates, k)):
                dense[chunk] = max(score, dense.get(chunk, score))
        mode = "dense"
        scores = dense
        if seeds:
            ppr = self._pagerank(seeds, max(cfg.candidates, k))
            if all(s.score > cfg.pagerank_threshold for s in seeds) and ppr:
                mode, scores = "ppr", ppr
            elif ppr:
                mode, scores = "fused", minmax_fuse(ppr, dense, cfg.pagerank_weight)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        if cfg.bm25_swap and ctx.bm25 is not None and ranked:
            ids, _ = ctx.bm25.search(query, 1)
            top = int(ids[0]) if len(ids) and ids[0] >= 0 else -1
            if top >= 0 and top not in {c for c, _ in ranked}:
                score = ranked[-1][1] if len(ranked) == k else 0.0
                ranked = (
                    [*ranked[:-1], (top, score)] if len(ranked) == k else [*ranked, (top, score)]
                )
        passages = [ctx.passage(c, s) for c, s in ranked]
        trace = RetrievalTrace(seeds=list(seeds), timings_ms={}, subgraph_nodes=0)
        return RetrievalResult(f"{self.name}:{mode}", query, passages, trace)

    def _pagerank(self, seeds: Sequence[Seed], n: int) -> dict[int, float]:
        walk = self.walk
        reset = walk.reset(seeds)
        if not reset.any():
            return {}
        rank = personalized_pagerank(
            walk.walk, reset, self.config.damping, tol=self.config.tolerance
        )
        chunk_scores = np.zeros(len(self.context.kg.chunk_ids), dtype=rank.dtype)
        chunk_scores[walk.chunk_rows] = rank[walk.chunk_nodes]
        top = best_k(chunk_scores, n)
        return {int(c): float(chunk_scores[c]) for c in top if chunk_scores[c] > 0}
