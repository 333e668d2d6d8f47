"""Spreading activation, SA-RAG's Algorithm 1 (paper section 5.5).

``spreading_activation`` runs the algorithm exactly as the paper's box states it, over
a local CSR subgraph, compiled with numba: for each initially activated entity, its
activation is set to 1 and a breadth-first walk from it propagates
``a[target] = min(1, a[target] + w * a[node])`` along every arc, visiting each node once
per seed. ``spreading_activation_reference`` is the same box in plain Python over an
adjacency dict, kept as the readable specification the compiled one is tested against.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from quillian.compiled import njit_on_first_call

__all__ = ["rescale_weights", "spreading_activation", "spreading_activation_reference"]


def rescale_weights(weights: npt.ArrayLike, c: float = 0.4) -> npt.NDArray[np.float32]:
    """SA-RAG's linear rescaling ``w' = (w - c) / (1 - c)`` against over-activation.

    Weights below ``c`` become negative and inhibit their targets, as in the paper.
    """
    if not 0.0 <= c < 1.0:
        raise ValueError(f"rescaling constant c must be in [0, 1), got {c}")
    w = np.asarray(weights, dtype=np.float32)
    return ((w - c) / (1.0 - c)).astype(np.float32)


def spreading_activation_reference(
    adjacency: Mapping[int, Sequence[tuple[int, float]]],
    initially_activated: Iterable[int],
    threshold: float = 0.5,
) -> tuple[dict[int, float], set[int]]:
    """Algorithm 1 verbatim: returns all activation values and the activated set R_a."""
    activation: dict[int, float] = dict.fromkeys(adjacency, 0.0)
    for seed in initially_activated:
        activation[seed] = 1.0
        visited: set[int] = set()
        queue = deque([seed])
        while queue:
            node = queue.popleft()
            if node in visited:
                continue
            visited.add(node)
            for target, weight in adjacency.get(node, ()):
                value = activation.get(target, 0.0) + weight * activation.get(node, 0.0)
                activation[target] = min(1.0, value)
                if target not in visited:
                    queue.append(target)
    activated = {node for node, value in activation.items() if value > threshold}
    return activation, activated


@njit_on_first_call(cache=True)
def _activate(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float32],
    seeds: npt.NDArray[np.int64],
    initial: npt.NDArray[np.float64],
    cap: float,
) -> npt.NDArray[np.float64]:  # pragma: no cover - compiled
    n = len(indptr) - 1
    activation = np.zeros(n, dtype=np.float64)
    stamp = np.full(n, -1, dtype=np.int64)
    queue = np.empty(len(indices) + 1, dtype=np.int64)
    for s in range(len(seeds)):
        seed = seeds[s]
        activation[seed] = initial[s]
        head = 0
        tail = 1
        queue[0] = seed
        while head < tail:
            node = queue[head]
            head += 1
            if stamp[node] == s:
                continue
            stamp[node] = s
            for e in range(indptr[node], indptr[node + 1]):
                target = indices[e]
                # read per arc, as the paper does: a self-loop changes the node's own value
                value = activation[target] + weights[e] * activation[node]
                activation[target] = value if value < cap else cap
                if stamp[target] != s:
                    queue[tail] = target
                    tail += 1
    return activation


def spreading_activation(
    indptr: npt.ArrayLike,
    indices: npt.ArrayLike,
    weights: npt.ArrayLike,
    seeds: npt.ArrayLike,
    cap: float = 1.0,
    initial: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float64]:
    """Algorithm 1 over a CSR graph; returns the activation value of every node.

    ``seeds`` are processed in the order given (the algorithm is order-dependent, as in
    the paper). Nodes whose value exceeds the activation threshold form R_a. Each seed
    starts at 1, as in the paper, or at its ``initial`` value when given (a graded seed).
    """
    seed_arr = np.asarray(seeds, dtype=np.int64)
    start = np.ones(len(seed_arr)) if initial is None else np.asarray(initial, dtype=np.float64)
    if len(start) != len(seed_arr):
        raise ValueError(f"{len(seed_arr)} seeds but {len(start)} initial values")
    ptr = np.asarray(indptr, dtype=np.int64)
    n = len(ptr) - 1
    if len(seed_arr) and (seed_arr.min() < 0 or seed_arr.max() >= n):
        raise ValueError(f"seed outside 0..{n - 1}")
    return _activate(
        ptr,
        np.asarray(indices, dtype=np.int64),
        np.asarray(weights, dtype=np.float32),
        seed_arr,
        start,
        float(cap),
    )
