"""The paths along which spreading activation reached a node: why a passage came up.

Spreading activation sums what every in-arc delivers, so a node has no single cause;
its *best path* follows, from the node back towards the seeds, the in-arc that
delivered the most (``weight * activation[source]``) from a node one hop nearer the
seeds. The walk ends at a seed (hop 0), or where no arc from a nearer node delivered
anything (the node was reached only through inhibiting links).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["best_paths"]


def best_paths(
    indptr: npt.ArrayLike,
    indices: npt.ArrayLike,
    weights: npt.ArrayLike,
    hops: npt.ArrayLike,
    activation: npt.ArrayLike,
    targets: Sequence[int],
) -> list[list[int]]:
    """Per target (local node id), the arc positions of its best path, seed first.

    ``indptr``/``indices``/``weights`` are the subgraph's CSR arcs with the weights the
    activation ran on (rescaled); ``hops`` each node's distance from the seeds. A seed,
    or a target nothing positive reached, gets an empty path.
    """
    ptr = np.asarray(indptr, dtype=np.int64)
    dst = np.asarray(indices, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    hop = np.asarray(hops, dtype=np.int64)
    act = np.asarray(activation, dtype=np.float64)
    src = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    delivered = w * act[src]
    nearer = (hop[src] == hop[dst] - 1) & (delivered > 0)
    best_arc = np.full(len(ptr) - 1, -1, dtype=np.int64)
    arcs = np.flatnonzero(nearer)
    # sorted by target, then by what was delivered: each target's last arc is its best
    # (ties go to the later arc in CSR order)
    order = arcs[np.lexsort((arcs, delivered[arcs], dst[arcs]))]
    last = np.r_[dst[order][1:] != dst[order][:-1], True] if len(order) else order
    best_arc[dst[order[last]]] = order[last]
    paths = []
    for target in targets:
        path: list[int] = []
        node = int(target)
        while best_arc[node] >= 0:  # hops fall by one per step: no cycle
            path.append(int(best_arc[node]))
            node = int(src[best_arc[node]])
        paths.append(path[::-1])
    return paths
