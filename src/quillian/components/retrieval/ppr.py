"""HippoRAG-style retrieval: personalized PageRank over entities and chunks (baseline).

The walk runs on entities linked by ``related_to`` and on chunks linked to the entities
they mention. The reset distribution puts the seed entities' weight on the entities
and, as HippoRAG 2 does, a small share (``passage_weight``) of each chunk's dense score
on the chunk nodes; chunks are ranked by their PageRank mass.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from quillian.components.graph.ppr import personalized_pagerank, transition_matrix
from quillian.components.retrieval.base import RetrievalResult, RetrievalTrace, top_k_passages
from quillian.components.retrieval.context import RetrievalContext, SeedMode
from quillian.errors import ConfigError
from quillian.stores.snapshot import EdgeKind

__all__ = ["PPRConfig", "PPRRetriever"]


@dataclass(frozen=True)
class PPRConfig:
    damping: float = 0.5
    """Probability of following an edge (HippoRAG: 0.5)."""
    seed_k: int = 5
    """Top-k entity descriptions used as seeds besides the entities named in the query."""
    triple_seeds: int = 0
    """Also seed with the ends of the N relations whose source sentences are nearest
    the question (a dense match of the question against the triples; 0: off)."""
    seeding: SeedMode = "both"
    passage_weight: float = 0.05
    """Share of reset mass on chunks, proportional to their dense score (HippoRAG 2)."""
    dense_candidates: int = 50
    """How many dense top chunks receive reset mass."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"damping must be in [0, 1), got {self.damping}")
        if self.seed_k < 0 or self.dense_candidates < 0 or self.triple_seeds < 0:
            raise ConfigError("seed_k, dense_candidates and triple_seeds must be >= 0")


class PPRRetriever:
    name = "ppr"

    def __init__(self, context: RetrievalContext, config: PPRConfig | None = None) -> None:
        self.context = context
        self.config = config or PPRConfig()

    @cached_property
    def _transition(self) -> sp.csr_matrix:
        kinds = (EdgeKind.RELATED_TO, EdgeKind.DESCRIBES, EdgeKind.DESCRIBED_BY)
        return transition_matrix(self.context.kg.snapshot, kinds)

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        ctx, cfg = self.context, self.config
        q = ctx.embed_query(query) if query_vector is None else query_vector
        kg = ctx.kg
        reset = np.zeros(kg.snapshot.n_nodes, dtype=np.float64)
        seeds = ctx.seeds(query, q, cfg.seeding, cfg.seed_k, cfg.triple_seeds)
        for seed in seeds:
            reset[seed.entity] += max(seed.score, 0.0)
        dense = ctx.dense_ranking(q, cfg.dense_candidates or 1)
        if dense and cfg.passage_weight > 0:
            mass = np.clip(np.array([s for _, s in dense]), 0.0, None)
            total_seed = reset.sum() or 1.0
            if mass.sum() > 0:
                share = cfg.passage_weight * total_seed * mass / mass.sum()
                for (chunk, _), value in zip(dense, share, strict=True):
                    reset[kg.chunk_offset + chunk] += value
        if reset.sum() <= 0:
            ranked = top_k_passages({}, k, [c for c, _ in dense])
        else:
            rank = personalized_pagerank(self._transition, reset, cfg.damping)
            chunk_scores = rank[kg.chunk_offset :]
            top = np.argsort(-chunk_scores, kind="stable")[:k]
            ranked = top_k_passages(
                {int(c): float(chunk_scores[c]) for c in top if chunk_scores[c] > 0},
                k,
                [c for c, _ in dense],
            )
        passages = [ctx.passage(c, s) for c, s in ranked]
        return RetrievalResult(self.name, query, passages, RetrievalTrace(seeds=seeds))
