"""An entity graph whose every edge is one stored triple, and KAGS's h-hop traversal
over it (both directions, a cap on the nodes explored per hop, hop numbers kept).

Pure functions over immutable arrays: node ``i`` is an entity (by normalised name),
edge ``r`` is triple row ``r`` from ``heads[r]`` to ``tails[r]``. Both adjacency lists
are CSR arrays sorted by row, so every result is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError
from quillian.types import normalize_name

__all__ = ["HopEdge", "HopResult", "TripleGraph", "hop_traversal"]

IntArray = npt.NDArray[np.int64]
#: Scores edges (triple rows) for ranking; higher is better.
EdgeScore = Callable[[IntArray], npt.NDArray[np.float32]]
Direction = Literal["outgoing", "incoming"]


def _csr(keys: IntArray, n: int) -> tuple[IntArray, IntArray]:
    order = np.argsort(keys, kind="stable").astype(np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=indptr[1:])
    return indptr, order


@dataclass(frozen=True, eq=False)
class TripleGraph:
    """Entities and triples as a directed multigraph, the triple row on each edge."""

    names: tuple[str, ...]
    """Each node's name (the first spelling seen)."""
    heads: IntArray
    tails: IntArray
    out_indptr: IntArray
    out_rows: IntArray
    in_indptr: IntArray
    in_rows: IntArray

    @classmethod
    def from_ends(cls, ends: Sequence[tuple[str, str]]) -> TripleGraph:
        """The graph of triples given as ``(subject, object)`` names, row by row."""
        ids: dict[str, int] = {}
        names: list[str] = []

        def node(name: str) -> int:
            key = normalize_name(name) or name
            if key not in ids:
                ids[key] = len(names)
                names.append(name)
            return ids[key]

        heads = np.array([node(s) for s, _ in ends], dtype=np.int64)
        tails = np.array([node(o) for _, o in ends], dtype=np.int64)
        out_indptr, out_rows = _csr(heads, len(names))
        in_indptr, in_rows = _csr(tails, len(names))
        return cls(tuple(names), heads, tails, out_indptr, out_rows, in_indptr, in_rows)

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    def out_edges(self, node: int) -> IntArray:
        """Rows of the triples whose subject is ``node``, in row order."""
        return self.out_rows[self.out_indptr[node] : self.out_indptr[node + 1]]

    def in_edges(self, node: int) -> IntArray:
        """Rows of the triples whose object is ``node``, in row order."""
        return self.in_rows[self.in_indptr[node] : self.in_indptr[node + 1]]


@dataclass(frozen=True, slots=True)
class HopEdge:
    """A triple reached at ``hop`` from an explored node, in ``direction`` from it."""

    row: int
    hop: int
    direction: Direction


@dataclass(frozen=True)
class HopResult:
    """The edges found, in the order found, and the hop at which each node was reached
    (seeds: 0). ``explored`` lists the nodes whose edges were read, per hop."""

    edges: list[HopEdge]
    node_hops: dict[int, int]
    explored: list[list[int]]


def hop_traversal(
    graph: TripleGraph,
    seeds: Sequence[int],
    hops: int,
    max_nodes_per_hop: int = 10,
    *,
    edge_score: EdgeScore | None = None,
    max_edges_per_node: int = 0,
) -> HopResult:
    """Breadth-first traversal from ``seeds`` for ``hops`` hops, along both directions.

    At hop ``i`` the first ``max_nodes_per_hop`` nodes of the frontier are explored:
    every out-edge and in-edge of each is recorded with hop ``i``, and each neighbour
    not yet visited joins the next frontier (the rest of a truncated frontier stays
    visited but unexplored, as in the authors' code). The frontier is ordered by the
    best score of the edge that reached each node (``edge_score``; seeds keep their
    order), ties by discovery order; without ``edge_score``, by discovery order.
    ``max_edges_per_node`` (0: no cap) keeps only a node's best-scoring edges, so one
    hub cannot flood the context.
    """
    if hops < 0 or max_nodes_per_hop < 1 or max_edges_per_node < 0:
        raise ConfigError(
            f"hops must be >= 0, max_nodes_per_hop >= 1 and max_edges_per_node >= 0, "
            f"got {hops}, {max_nodes_per_hop}, {max_edges_per_node}"
        )
    node_hops = {int(s): 0 for s in seeds}
    frontier = list(node_hops)
    reach: dict[int, float] = {}
    edges: list[HopEdge] = []
    explored: list[list[int]] = []
    for hop in range(1, hops + 1):
        if not frontier:
            break
        explore = frontier[:max_nodes_per_hop]
        explored.append(explore)
        found: list[int] = []
        for node in explore:
            found_edges, scores = _edges_of(graph, node, edge_score, max_edges_per_node)
            for i, (row, direction, other) in enumerate(found_edges):
                edges.append(HopEdge(row, hop, direction))
                if other not in node_hops:
                    node_hops[other] = hop
                    found.append(other)
                if scores is not None:
                    reach[other] = max(reach.get(other, -np.inf), float(scores[i]))
        if edge_score is not None:
            position = {n: i for i, n in enumerate(found)}
            found.sort(key=lambda n: (-reach[n], position[n]))
        frontier = found
    return HopResult(edges, node_hops, explored)


def _edges_of(
    graph: TripleGraph, node: int, edge_score: EdgeScore | None, cap: int
) -> tuple[list[tuple[int, Direction, int]], npt.NDArray[np.float32] | None]:
    """``(row, direction, other end)`` of a node's edges (out-edges, then in-edges, each
    in row order) and their scores; with a cap, the ``cap`` best-scoring ones (ties by
    that order; without scores, the first ``cap``)."""
    found: list[tuple[int, Direction, int]] = [
        (int(r), "outgoing", int(graph.tails[r])) for r in graph.out_edges(node)
    ]
    found += [(int(r), "incoming", int(graph.heads[r])) for r in graph.in_edges(node)]
    if edge_score is None:
        return (found[:cap] if cap else found), None
    scores = edge_score(np.array([r for r, _, _ in found], dtype=np.int64))
    if cap and len(found) > cap:
        keep = sorted(np.argsort(-scores, kind="stable")[:cap].tolist())
        return [found[i] for i in keep], scores[keep]
    return found, scores
