"""k-hop traversal over a snapshot: neighbour gathering and capped subgraph extraction.

All functions are pure and vectorised over the CSR arrays. Fan-out caps keep a hub
entity (a country, a year) from pulling millions of edges into one query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quillian.components.graph.snapshot import EdgeKind, GraphSnapshot

__all__ = ["Subgraph", "gather_edges", "khop_subgraph"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
#: Maps edge positions (indices into the snapshot's edge arrays) to edge weights.
EdgeWeightFn = Callable[[IntArray], FloatArray]


def gather_edges(
    snapshot: GraphSnapshot, nodes: npt.ArrayLike, kind: EdgeKind | None = None
) -> tuple[IntArray, IntArray, IntArray]:
    """Out-edges of ``nodes``: ``(sources, targets, edge_positions)``, optionally one kind."""
    nodes = np.asarray(nodes, dtype=np.int64)
    starts = np.asarray(snapshot.indptr[nodes], dtype=np.int64)
    ends = np.asarray(snapshot.indptr[nodes + 1], dtype=np.int64)
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    sources = np.repeat(nodes, lengths)
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    positions = np.arange(total, dtype=np.int64) + offsets
    targets = np.asarray(snapshot.indices[positions], dtype=np.int64)
    if kind is not None:
        keep = np.asarray(snapshot.edge_kinds[positions]) == kind
        return sources[keep], targets[keep], positions[keep]
    return sources, targets, positions


def _cap_fanout(
    sources: IntArray, weights: FloatArray, max_fanout: int
) -> npt.NDArray[np.bool_]:
    """Mask keeping, per source, its ``max_fanout`` heaviest edges (ties: first stored)."""
    if len(sources) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((-weights, sources))
    sorted_src = sources[order]
    first = np.searchsorted(sorted_src, sorted_src, side="left")
    rank = np.arange(len(order)) - first
    keep = np.zeros(len(order), dtype=bool)
    keep[order[rank < max_fanout]] = True
    return keep


@dataclass(frozen=True)
class Subgraph:
    """A small induced subgraph in local ids, ready for spreading activation.

    ``nodes[i]`` is the snapshot id of local node ``i``; ``hops[i]`` its distance from
    the seeds. Edges are a local CSR (``indptr``, ``indices``, ``weights``) with the
    snapshot edge position each came from in ``positions`` (for relation look-ups).
    """

    nodes: IntArray
    hops: IntArray
    indptr: IntArray
    indices: IntArray
    weights: FloatArray
    positions: IntArray

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    def local(self, snapshot_ids: npt.ArrayLike) -> IntArray:
        """Local ids of ``snapshot_ids`` (which must be in the subgraph)."""
        order = np.argsort(self.nodes)
        where = np.searchsorted(self.nodes[order], np.asarray(snapshot_ids, dtype=np.int64))
        return order[where]


def khop_subgraph(
    snapshot: GraphSnapshot,
    seeds: npt.ArrayLike,
    hops: int,
    weight_fn: EdgeWeightFn,
    *,
    kind: EdgeKind = EdgeKind.RELATED_TO,
    max_fanout: int = 64,
    max_nodes: int = 5000,
) -> Subgraph:
    """The ``hops``-hop neighbourhood of ``seeds`` over edges of ``kind``.

    Each node expands along at most ``max_fanout`` of its heaviest edges; expansion
    stops adding nodes once ``max_nodes`` are reached (nearest hops first). Parallel
    edges between the same pair collapse to the heaviest. The returned edges are those
    between nodes of the subgraph, each node keeping its ``max_fanout`` heaviest.
    """
    seeds = np.unique(np.asarray(seeds, dtype=np.int64))
    hop_of = {int(s): 0 for s in seeds}
    frontier = seeds
    for hop in range(1, hops + 1):
        if len(frontier) == 0 or len(hop_of) >= max_nodes:
            break
        src, dst, pos = gather_edges(snapshot, frontier, kind)
        keep = _cap_fanout(src, weight_fn(pos), max_fanout)
        new: list[int] = []
        for target in dict.fromkeys(dst[keep].tolist()):
            if target not in hop_of:
                hop_of[target] = hop
                new.append(target)
                if len(hop_of) >= max_nodes:
                    break
        frontier = np.array(new, dtype=np.int64)
    nodes = np.fromiter(hop_of.keys(), dtype=np.int64, count=len(hop_of))
    node_hops = np.fromiter(hop_of.values(), dtype=np.int64, count=len(hop_of))
    return _induced(snapshot, nodes, node_hops, weight_fn, kind, max_fanout)


def _induced(
    snapshot: GraphSnapshot,
    nodes: IntArray,
    node_hops: IntArray,
    weight_fn: EdgeWeightFn,
    kind: EdgeKind,
    max_fanout: int,
) -> Subgraph:
    src, dst, pos = gather_edges(snapshot, nodes, kind)
    order = np.argsort(nodes)
    sorted_nodes = nodes[order]
    where = np.clip(np.searchsorted(sorted_nodes, dst), 0, max(len(nodes) - 1, 0))
    inside = sorted_nodes[where] == dst if len(nodes) else np.zeros(len(dst), dtype=bool)
    src, dst, pos = src[inside], dst[inside], pos[inside]
    local_src = order[np.searchsorted(sorted_nodes, src)]
    local_dst = order[where[inside]]
    weights = weight_fn(pos).astype(np.float32)
    # collapse parallel edges to the heaviest, then cap fan-out
    best = np.lexsort((-weights, local_dst, local_src))
    pair = local_src[best] * len(nodes) + local_dst[best]
    first = np.ones(len(best), dtype=bool)
    first[1:] = pair[1:] != pair[:-1]
    best = best[first]
    local_src, local_dst, weights, pos = local_src[best], local_dst[best], weights[best], pos[best]
    keep = _cap_fanout(local_src, weights, max_fanout)
    local_src, local_dst, weights, pos = local_src[keep], local_dst[keep], weights[keep], pos[keep]
    by_src = np.argsort(local_src, kind="stable")
    indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(local_src, minlength=len(nodes)), out=indptr[1:])
    return Subgraph(
        nodes=nodes,
        hops=node_hops,
        indptr=indptr,
        indices=local_dst[by_src].astype(np.int64),
        weights=weights[by_src],
        positions=pos[by_src],
    )
