"""k-hop traversal over a snapshot: neighbour gathering and capped subgraph extraction.

All functions are pure and vectorised over the CSR arrays. Fan-out caps keep a hub
entity (a country, a year) from pulling millions of edges into one query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quillian.compiled import njit_on_first_call
from quillian.stores.snapshot import EdgeKind, GraphSnapshot

__all__ = ["Subgraph", "gather_edges", "khop_subgraph", "with_edges"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
#: Maps edge positions (indices into the snapshot's edge arrays) to edge weights.
EdgeWeightFn = Callable[[IntArray], FloatArray]


def gather_edges(
    snapshot: GraphSnapshot,
    nodes: npt.ArrayLike,
    kind: EdgeKind | None = None,
    max_scan: int | None = None,
) -> tuple[IntArray, IntArray, IntArray]:
    """Out-edges of ``nodes``: ``(sources, targets, edge_positions)``, optionally one kind.

    ``max_scan`` reads at most that many stored edges per node (in storage order), so a
    hub with millions of links costs no more than any other node.
    """
    nodes = np.asarray(nodes, dtype=np.int64)
    starts = np.asarray(snapshot.indptr[nodes], dtype=np.int64)
    ends = np.asarray(snapshot.indptr[nodes + 1], dtype=np.int64)
    lengths = ends - starts
    if max_scan is not None:
        lengths = np.minimum(lengths, max_scan)
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


def _cap_fanout(sources: IntArray, weights: FloatArray, max_fanout: int) -> npt.NDArray[np.bool_]:
    """Mask keeping, per source, its ``max_fanout`` heaviest edges (ties: first stored).

    ``sources`` must come in runs of equal values, as :func:`gather_edges` returns them.
    """
    return _cap_runs(np.asarray(sources, np.int64), np.asarray(weights, np.float32), max_fanout)


@njit_on_first_call(cache=True)
def _cap_runs(
    sources: IntArray, weights: FloatArray, max_fanout: int
) -> npt.NDArray[np.bool_]:  # pragma: no cover - compiled
    keep = np.zeros(len(sources), dtype=np.bool_)
    start = 0
    while start < len(sources):
        end = start + 1
        while end < len(sources) and sources[end] == sources[start]:
            end += 1
        if end - start <= max_fanout:
            keep[start:end] = True
        else:
            order = np.argsort(-weights[start:end], kind="mergesort")
            for i in range(max_fanout):
                keep[start + order[i]] = True
        start = end
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
    max_scan: int = 256,
) -> Subgraph:
    """The ``hops``-hop neighbourhood of ``seeds`` over edges of ``kind``.

    Each node expands along at most ``max_fanout`` of its heaviest edges; expansion
    stops adding nodes once ``max_nodes`` are reached (nearest hops first). Parallel
    edges between the same pair collapse to the heaviest. The returned edges are those
    between nodes of the subgraph, each node keeping its ``max_fanout`` heaviest. Only
    the first ``max_scan`` stored edges of a node are considered (hub guard).
    """
    seeds = np.unique(np.asarray(seeds, dtype=np.int64))
    hop_of = {int(s): 0 for s in seeds}
    kept: list[tuple[IntArray, IntArray, IntArray, FloatArray]] = []
    frontier = seeds
    for hop in range(1, hops + 2):
        if len(frontier) == 0:
            break
        src, dst, pos = gather_edges(snapshot, frontier, kind, max_scan)
        weights = weight_fn(pos).astype(np.float32)
        keep = _cap_fanout(src, weights, max_fanout)
        kept.append((src[keep], dst[keep], pos[keep], weights[keep]))
        if hop > hops or len(hop_of) >= max_nodes:
            break
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
    return _induced(nodes, node_hops, kept)


def with_edges(
    sub: Subgraph,
    sources: npt.ArrayLike,
    targets: npt.ArrayLike,
    positions: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    max_nodes: int,
) -> Subgraph:
    """``sub`` with extra edges between snapshot ids (edges from outside the snapshot,
    such as links through another graph; give them negative ``positions``).

    A target not yet in ``sub`` joins it one hop further than its source while fewer
    than ``max_nodes`` nodes are held; edges to targets left out are dropped. Parallel
    edges collapse to the heaviest, as in :func:`khop_subgraph`.
    """
    src = np.asarray(sources, dtype=np.int64)
    dst = np.asarray(targets, dtype=np.int64)
    hop_of = dict(zip(sub.nodes.tolist(), sub.hops.tolist(), strict=True))
    for s, t in zip(src.tolist(), dst.tolist(), strict=True):
        if t not in hop_of and s in hop_of and len(hop_of) < max_nodes:
            hop_of[t] = hop_of[s] + 1
    nodes = np.fromiter(hop_of.keys(), dtype=np.int64, count=len(hop_of))
    node_hops = np.fromiter(hop_of.values(), dtype=np.int64, count=len(hop_of))
    rows = np.repeat(np.arange(sub.n_nodes), np.diff(sub.indptr))
    existing = (sub.nodes[rows], sub.nodes[sub.indices], sub.positions, sub.weights)
    extra = (
        src,
        dst,
        np.asarray(positions, dtype=np.int64),
        np.asarray(weights, dtype=np.float32),
    )
    return _induced(nodes, node_hops, [existing, extra])


def _induced(
    nodes: IntArray,
    node_hops: IntArray,
    kept: list[tuple[IntArray, IntArray, IntArray, FloatArray]],
) -> Subgraph:
    """Local CSR of the kept edges whose both ends are subgraph nodes.

    Every node's kept edges were chosen when it was expanded (the last hop's nodes get
    one extra gather), so no node's adjacency is scanned twice.
    """
    empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0, np.float32)
    src = np.concatenate([k[0] for k in kept]) if kept else empty_i
    dst = np.concatenate([k[1] for k in kept]) if kept else empty_i
    pos = np.concatenate([k[2] for k in kept]) if kept else empty_i
    weights = np.concatenate([k[3] for k in kept]) if kept else empty_f
    order = np.argsort(nodes)
    sorted_nodes = nodes[order]
    where_dst = np.clip(np.searchsorted(sorted_nodes, dst), 0, max(len(nodes) - 1, 0))
    where_src = np.clip(np.searchsorted(sorted_nodes, src), 0, max(len(nodes) - 1, 0))
    if len(nodes):
        inside = (sorted_nodes[where_dst] == dst) & (sorted_nodes[where_src] == src)
    else:
        inside = np.zeros(len(dst), dtype=bool)
    local_src, local_dst = order[where_src[inside]], order[where_dst[inside]]
    weights, pos = weights[inside], pos[inside]
    # collapse parallel edges to the heaviest
    best = np.lexsort((-weights, local_dst, local_src))
    pair = local_src[best] * len(nodes) + local_dst[best]
    first = np.ones(len(best), dtype=bool)
    first[1:] = pair[1:] != pair[:-1]
    best = best[first]
    local_src, local_dst, weights, pos = local_src[best], local_dst[best], weights[best], pos[best]
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
