"""HippoRAG-style retrieval: personalized PageRank over entities and chunks (baseline).

The walk runs on entities linked by ``related_to`` and on chunks linked to the entities
they mention. The reset distribution puts the seed entities' weight on the entities
(those the query names and those of the nearest descriptions) and, as HippoRAG 2
does, a small share (``passage_weight``) of each chunk's dense score on the chunk
nodes; chunks are ranked by their PageRank mass. Dates and numbers seed nothing
(``literal_seeds``), and from an entity with a chunk about it the walk steps to that
chunk alone, not to every chunk that mentions it (``mention_links``; docs/sections/
lift2.md). HippoRAG 2's fact seeds (the ends of
the relations whose texts with their endpoint names are nearest the query), its
synonym links and node specificity are options, off by default: none helped on every
benchmark set (docs/benchmarks.md, "Retrieval lift").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import TOPIC_WEIGHT
from quillian.components.graph.ppr import Solver, Walk, personalized_pagerank
from quillian.components.graph.synonyms import SYNONYM_THRESHOLD
from quillian.components.retrieval.base import (
    RetrievalResult,
    RetrievalTrace,
    Seed,
    best_k,
    top_k_passages,
)
from quillian.components.retrieval.context import (
    RelationText,
    RetrievalContext,
    SeedMode,
    chunk_links,
)
from quillian.errors import ConfigError
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, NodeKind

__all__ = ["PPRConfig", "PPRRetriever"]


@dataclass(frozen=True)
class PPRConfig:
    damping: float = 0.5
    """Probability of following an edge (HippoRAG: 0.5)."""
    seed_k: int = 5
    """Top-k entity descriptions used as seeds besides the entities named in the query."""
    triple_seeds: int = 0
    """Also seed with the ends of the N relations whose texts are nearest the question
    (a dense match of the question against the triples, as HippoRAG 2 links its top 5
    facts; 0: off). Off by default: 5 on endpoint texts helped 2Wiki, HotpotQA and
    MuSiQue's GPT graph (+0.020, +0.040, +0.010) and hurt MuSiQue's spaCy graph
    (-0.047, 2 won, 7 lost); docs/benchmarks.md, "Retrieval lift"."""
    triple_text: RelationText = "endpoints"
    """What the triple seeds are matched on: ``endpoints``, each relation's ends'
    names, predicate and source sentence (built by ``quillian index --endpoint-texts``;
    an index without them refuses triple seeds on them); ``sentence``, the source
    sentence alone."""
    seeding: SeedMode = "both"
    literal_seeds: bool = False
    """Seed dates, times and numbers too (``is_literal`` in seeding.py). Off: a date
    names no topic, and a walk seeded at "14 January 1729" (a description seed's entity,
    typically) spreads to every passage that shares it. Leaving them out won 3
    questions and lost none over the four dev sets (2Wiki-800 +0.020, MuSiQue spaCy
    +0.007, GPT +0.010, HotpotQA 0; docs/sections/lift2.md)."""
    passage_weight: float = 0.05
    """Share of reset mass on chunks, proportional to their dense score (HippoRAG 2)."""
    dense_candidates: int = 50
    """How many dense top chunks receive reset mass."""
    tolerance: float = 1e-6
    """The walk stops when one more power step would move less than this much
    probability mass (L1): every score is then within about this of the exact one.
    1e-6 ranked 2Wiki's 51 questions on all 6,119 passages exactly as 1e-8 did, in 20
    power iterations instead of 27 (p50 17.2 -> 13.4 ms on a quiet machine)."""
    solver: Solver = "chebyshev"
    """How the walk is solved, to ``tolerance`` either way: ``chebyshev`` semi-iteration
    (about a quarter fewer products on the report's graphs, the same top 8) or
    ``power`` iteration (docs/benchmarks.md, "PPR: Chebyshev semi-iteration")."""
    synonyms: bool = False
    """Walk synonym links too: entities whose names embed at ``synonym_threshold`` or
    more, each entity's ``synonym_k`` nearest, weighted by their cosine (HippoRAG 2)."""
    synonym_threshold: float = SYNONYM_THRESHOLD
    """Name cosine of a synonym link (HippoRAG 2: 0.8)."""
    synonym_k: int = 10
    """At most this many synonym links from each entity."""
    specificity: bool = False
    """Divide each seed's weight by the number of chunks linked to its entity
    (HippoRAG's node specificity, 1 / |P_i|)."""
    mention_links: bool = False
    """Let the walk step from an entity to every chunk that mentions it even when a
    chunk is about it (its title entity). Off: from an entity with a page of its own
    the walk goes to that page only, as a hyperlink in a mention leads to the article
    (the Wikipedia link graph that path retrievers walk, e.g. Asai et al., ICLR 2020);
    an entity with no page of its own (an untitled corpus) still steps to the chunks
    that mention it. A hub such as a country is mentioned by dozens of chunks, and
    with those links its own page got a sliver of the mass that reached it. Off, with
    ``literal_seeds`` off too, won 4 questions and lost none over the four dev sets
    (2Wiki-800 +0.020, MuSiQue spaCy +0.017, GPT +0.007, HotpotQA 0); alone, 3 won
    and none lost (0, +0.017, +0.007, 0; docs/sections/lift2.md)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"damping must be in [0, 1), got {self.damping}")
        if self.seed_k < 0 or self.dense_candidates < 0 or self.triple_seeds < 0:
            raise ConfigError("seed_k, dense_candidates and triple_seeds must be >= 0")
        if not 0.0 < self.tolerance < 1.0:
            raise ConfigError(f"tolerance must be in (0, 1), got {self.tolerance}")
        if self.solver not in ("chebyshev", "power"):
            raise ConfigError(f"solver must be chebyshev or power, got {self.solver!r}")
        if self.synonym_k <= 0:
            raise ConfigError(f"synonym_k must be greater than 0, got {self.synonym_k}")


class PPRRetriever:
    name = "ppr"

    def __init__(self, context: RetrievalContext, config: PPRConfig | None = None) -> None:
        self.context = context
        self.config = config or PPRConfig()

    @cached_property
    def walk(self) -> Walk:
        """The walk every query runs on, prepared once: description nodes hang off
        their entity and never seed, so they are folded out of the iteration, which
        runs in float32 on the nodes in reverse Cuthill-McKee order (the same top 8 on
        the report's five graphs, a third less time: docs/benchmarks.md, "PPR: folded
        walk")."""
        return self.walk_over(fold=True, dtype=np.float32, reorder=True)

    def walk_over(self, fold: bool, dtype: type[np.floating[Any]], reorder: bool) -> Walk:
        """The walk of this retriever's graph, its description nodes folded or not, in
        ``dtype``, its nodes reordered or not (``research/ppr_solvers.py`` checks
        :attr:`walk` against the exact solution of the whole float64 one)."""
        kinds = (EdgeKind.RELATED_TO, EdgeKind.DESCRIBES, EdgeKind.DESCRIBED_BY)
        cfg = self.config
        extra = None
        if cfg.synonyms:
            extra = self.context.synonym_edges(cfg.synonym_threshold, cfg.synonym_k)
        snapshot = self.context.kg.snapshot
        if not cfg.mention_links:
            snapshot = pages_only(snapshot, self.context.kg.chunk_offset)
        folded = (NodeKind.DESCRIPTION,) if fold else ()
        return Walk.over(snapshot, kinds, extra, fold=folded, dtype=dtype, reorder=reorder)

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        ctx, cfg = self.context, self.config
        q = ctx.embed_query(query) if query_vector is None else query_vector
        reset, seeds, dense = self.reset(query, q)
        if reset.sum() <= 0:
            ranked = top_k_passages({}, k, [c for c, _ in dense])
        else:
            rank = personalized_pagerank(
                self.walk, reset, cfg.damping, tol=cfg.tolerance, solver=cfg.solver
            )
            chunk_scores = rank[ctx.kg.chunk_offset :]
            ranked = top_k_passages(
                {int(c): float(chunk_scores[c]) for c in best_k(chunk_scores, k)
                 if chunk_scores[c] > 0},
                k,
                [c for c, _ in dense],
            )  # fmt: skip
        passages = [ctx.passage(c, s) for c, s in ranked]
        return RetrievalResult(self.name, query, passages, RetrievalTrace(seeds=seeds))

    def reset(
        self, query: str, q: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.float64], list[Seed], list[tuple[int, float]]]:
        """The walk's reset distribution for a query (unnormalised, over every node),
        with the seeds and the dense ranking it was made of."""
        ctx, cfg = self.context, self.config
        reset = np.zeros(ctx.kg.snapshot.n_nodes, dtype=np.float64)
        seeds = ctx.seeds(
            query,
            q,
            cfg.seeding,
            cfg.seed_k,
            cfg.triple_seeds,
            cfg.triple_text,
            literals=cfg.literal_seeds,
        )
        for seed in seeds:
            reset[seed.entity] += max(seed.score, 0.0) * self._specificity[seed.entity]
        dense = ctx.dense_ranking(q, cfg.dense_candidates or 1)
        if dense and cfg.passage_weight > 0:
            reset[ctx.kg.chunk_offset :] += self._passage_mass(dense, reset.sum() or 1.0)
        return reset, seeds, dense

    @cached_property
    def _specificity(self) -> npt.NDArray[np.float64]:
        """Each entity's seed-weight factor: 1 / its chunks with ``specificity``."""
        chunks = np.maximum(self.context.entity_chunks, 1).astype(np.float64)
        return 1.0 / chunks if self.config.specificity else np.ones_like(chunks)

    def _passage_mass(
        self, dense: list[tuple[int, float]], seed_mass: float
    ) -> npt.NDArray[np.float64]:
        """Reset mass of every chunk: the dense top chunks share ``passage_weight``
        times the seeds' mass, in proportion to their cosine."""
        out = np.zeros(len(self.context.kg.chunk_ids), dtype=np.float64)
        mass = np.clip(np.array([s for _, s in dense]), 0.0, None)
        if mass.sum() > 0:
            out[[c for c, _ in dense]] = self.config.passage_weight * seed_mass * mass / mass.sum()
        return out


def pages_only(snapshot: GraphSnapshot, chunk_offset: int) -> GraphSnapshot:
    """``snapshot`` with the weight of every entity-to-chunk mention link set to 0 where
    the entity has a chunk about it (a ``described_by`` link of ``TOPIC_WEIGHT``)."""
    n = snapshot.n_nodes
    rows = snapshot.edge_sources()
    to_chunk = chunk_links(snapshot, chunk_offset)
    weights = np.asarray(snapshot.weights)
    page = to_chunk & (weights >= TOPIC_WEIGHT)
    has_page = np.bincount(rows[page], minlength=n) > 0
    drop = to_chunk & ~page & has_page[rows]
    if not drop.any():
        return snapshot
    return replace(snapshot, weights=np.where(drop, 0, weights).astype(weights.dtype))
