"""Held-out triples for early stopping on a graph with no validation split of its own."""

from __future__ import annotations

import numpy as np
import pytest

from quillian.components.kge.triples import HELD_OUT_MAX, HELD_OUT_MIN, TripleSet, hold_out
from quillian.errors import InputError


def ring_graph(n: int, steps: int) -> TripleSet:
    """``n`` entities on a ring, relation ``s`` stepping by ``s + 1``: ``n * steps``
    triples, each entity the head of ``steps`` and the tail of ``steps``."""
    e = np.arange(n)
    rows = [np.stack([e, np.full_like(e, s), (e + s + 1) % n], axis=1) for s in range(steps)]
    return TripleSet.from_array(np.concatenate(rows), n, steps)


def rows(triples: TripleSet) -> set[tuple[int, int, int]]:
    return {tuple(int(x) for x in row) for row in triples.as_array()}


def test_the_share_is_held_out_apart_from_training():
    graph = ring_graph(100, 8)
    train, held = hold_out(graph, 0.25, seed=0)
    assert len(held) == 200 and len(train) == 600
    assert rows(train) | rows(held) == rows(graph) and not rows(train) & rows(held)
    assert (held.n_entities, held.n_relations) == (graph.n_entities, graph.n_relations)
    # every held-out triple's ends are still named by some training triple
    named = set(train.heads.tolist()) | set(train.tails.tolist())
    assert set(held.heads.tolist()) <= named and set(held.tails.tolist()) <= named
    again, held_again = hold_out(graph, 0.25, seed=0)
    assert rows(held_again) == rows(held) and again.fingerprint == train.fingerprint
    assert rows(hold_out(graph, 0.25, seed=1)[1]) != rows(held)


def test_a_fact_and_its_inverse_are_held_out_together():
    """WordNet states each fact with its inverse (hypernym, hyponym): a held-out triple
    whose reverse stayed in training measured nothing (held-out MRR 0.987)."""
    forward = ring_graph(200, 4).as_array()
    inverse = np.stack([forward[:, 2], forward[:, 1] + 4, forward[:, 0]], axis=1)
    graph = TripleSet.from_array(np.concatenate([forward, inverse]), 200, 8)
    train, held = hold_out(graph, 0.1, seed=0)
    assert len(held) == 160 and len(train) == 1440
    pairs = {(int(h), int(t)) for h, t in zip(train.heads, train.tails, strict=True)}
    assert not any((int(t), int(h)) in pairs for h, t in zip(held.heads, held.tails, strict=True))
    assert all(len(rows(held) & {(h, r, t), (t, r + 4, h)}) != 1 for h, r, t in forward.tolist())


def test_an_entity_keeps_a_training_triple_even_on_a_sparse_graph():
    # a star: the leaves appear in one triple each and can never be held out
    hub = np.zeros(300, dtype=np.int64)
    leaves = np.arange(1, 301)
    star = TripleSet.from_array(np.stack([hub, hub, leaves], axis=1), 301, 1)
    train, held = hold_out(star, 0.4, seed=0)
    assert len(held) == 0 and len(train) == 300


def test_too_few_to_measure_holds_none_out_and_many_are_capped():
    small = ring_graph(40, 4)  # 160 triples: 10% would be 16 < HELD_OUT_MIN
    train, held = hold_out(small, 0.1, seed=0)
    assert len(held) == 0 and train.fingerprint == small.fingerprint
    assert len(hold_out(small, 0.0)[1]) == 0
    big = ring_graph(5000, 10)
    assert len(hold_out(big, 0.2, seed=0)[1]) == HELD_OUT_MAX
    assert HELD_OUT_MIN <= HELD_OUT_MAX


@pytest.mark.parametrize("share", [-0.1, 1.0, 2.0])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(InputError, match="held-out share"):
        hold_out(ring_graph(10, 2), share)
