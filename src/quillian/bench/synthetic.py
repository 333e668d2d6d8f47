"""Synthetic graphs shaped like Wikidata5M, for scale benchmarks.

Power-law (Zipf-like) degrees: edge endpoints are drawn from a Pareto-weighted
distribution over nodes, so a few hubs carry most links, as in Wikidata. Generation is
vectorised and seeded, so the same arguments give the same graph.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quillian.stores.snapshot import EdgeKind, GraphSnapshot, IdMap, NodeKind

__all__ = ["power_law_edges", "synthetic_snapshot"]


def power_law_edges(
    n_nodes: int, n_edges: int, n_relations: int = 810, exponent: float = 1.1, seed: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """``(heads, tails, relation ids)`` with power-law node popularity, no self-loops."""
    rng = np.random.default_rng(seed)
    rank_weight = 1.0 / np.arange(1, n_nodes + 1, dtype=np.float64) ** exponent
    cdf = np.cumsum(rank_weight)
    cdf /= cdf[-1]
    perm = rng.permutation(n_nodes)
    heads = perm[np.searchsorted(cdf, rng.random(n_edges))]
    # tails mix popular and uniform nodes so the long tail gets links too
    popular = perm[np.searchsorted(cdf, rng.random(n_edges))]
    uniform = rng.integers(0, n_nodes, n_edges)
    tails = np.where(rng.random(n_edges) < 0.5, popular, uniform)
    loops = heads == tails
    tails[loops] = (tails[loops] + 1) % n_nodes
    relations = rng.integers(0, n_relations, n_edges).astype(np.int32)
    return heads.astype(np.int64), tails.astype(np.int64), relations


def synthetic_snapshot(
    n_nodes: int, n_edges: int, n_relations: int = 810, seed: int = 0
) -> GraphSnapshot:
    """An entity graph of ``n_nodes`` and ``2 * n_edges`` directed ``related_to`` edges
    (each triple stored both ways), edge weights uniform in [0, 1)."""
    heads, tails, relations = power_law_edges(n_nodes, n_edges, n_relations, seed=seed)
    width = len(str(n_nodes))
    ids = IdMap.from_ids([f"Q{i:0{width}d}" for i in range(n_nodes)])
    rng = np.random.default_rng(seed + 1)
    weights = rng.random(n_edges, dtype=np.float32)
    return GraphSnapshot.from_arrays(
        ids,
        np.full(n_nodes, NodeKind.ENTITY, np.int8),
        np.concatenate([heads, tails]),
        np.concatenate([tails, heads]),
        EdgeKind.RELATED_TO,
        np.concatenate([weights, weights]),
        np.concatenate([relations, relations]),
    )
