"""Algorithm 1 on graphs small enough to work out by hand."""

import numpy as np
import pytest

from quillian.components.graph.activation import (
    rescale_weights,
    spreading_activation,
    spreading_activation_reference,
)


def to_csr(n, arcs):
    arcs = sorted(arcs, key=lambda a: a[0])
    indptr = np.zeros(n + 1, dtype=np.int64)
    for s, _, _ in arcs:
        indptr[s + 1] += 1
    return np.cumsum(indptr), np.array([t for _, t, _ in arcs]), np.array([w for *_, w in arcs])


# 0 -0.5-> 1 -0.5-> 2,  0 -1.0-> 3 -(-0.5)-> 4
CHAIN = [(0, 1, 0.5), (1, 2, 0.5), (0, 3, 1.0), (3, 4, -0.5)]


def test_chain_values_worked_by_hand():
    # seed 0 = 1; 1 = 0.5*1; 3 = 1*1; 2 = 0.5*0.5; 4 = -0.5*1 (inhibition)
    act = spreading_activation(*to_csr(5, CHAIN), seeds=[0])
    np.testing.assert_allclose(act, [1.0, 0.5, 0.25, 1.0, -0.5])


def test_reference_matches_and_threshold_is_strict():
    adjacency = {0: [(1, 0.5), (3, 1.0)], 1: [(2, 0.5)], 2: [], 3: [(4, -0.5)], 4: []}
    values, activated = spreading_activation_reference(adjacency, [0], threshold=0.5)
    assert values == {0: 1.0, 1: 0.5, 2: 0.25, 3: 1.0, 4: -0.5}
    assert activated == {0, 3}  # node 1 sits exactly at 0.5: not above tau_a


def test_activation_is_capped_at_one():
    # triangle with strong links: every node saturates at 1, never above
    arcs = [(a, b, 0.8) for a in range(3) for b in range(3) if a != b]
    act = spreading_activation(*to_csr(3, arcs), seeds=[0])
    np.testing.assert_allclose(act, [1.0, 1.0, 1.0])


def test_second_seed_resets_to_one_and_propagates():
    # 0 -0.2-> 1 <-0.3- 2 ; seeds 0 then 2: 1 = 0.2 + 0.3
    arcs = [(0, 1, 0.2), (2, 1, 0.3)]
    act = spreading_activation(*to_csr(3, arcs), seeds=[0, 2])
    np.testing.assert_allclose(act, [1.0, 0.5, 1.0])


@pytest.mark.parametrize("seed", range(20))
def test_compiled_equals_reference_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    m = int(rng.integers(0, 4 * n))
    arcs = [
        (int(rng.integers(n)), int(rng.integers(n)), float(rng.uniform(-0.5, 1))) for _ in range(m)
    ]
    seeds = [int(s) for s in rng.choice(n, size=min(n, 3), replace=False)]
    adjacency = {i: [] for i in range(n)}
    for s, t, w in arcs:
        adjacency[s].append((t, w))
    indptr, indices, weights = to_csr(n, arcs)
    # to_csr sorts stably by source, preserving each node's arc order as in the dict
    values, _ = spreading_activation_reference(adjacency, seeds)
    act = spreading_activation(indptr, indices, weights.astype(np.float32), seeds)
    np.testing.assert_allclose(act, [values[i] for i in range(n)], atol=1e-5)


def test_rescale_matches_paper_formula():
    np.testing.assert_allclose(
        rescale_weights([1.0, 0.4, 0.7, 0.1], c=0.4), [1.0, 0.0, 0.5, -0.5], atol=1e-6
    )
    with pytest.raises(ValueError, match="c must be"):
        rescale_weights([0.5], c=1.0)


def test_seed_out_of_range_is_rejected():
    with pytest.raises(ValueError, match="seed outside"):
        spreading_activation(*to_csr(2, [(0, 1, 1.0)]), seeds=[5])
