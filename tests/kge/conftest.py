"""Shared fixtures of the KG-embedding tests: one torch thread, a tiny functional graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quillian.components.kge.triples import TripleSet

torch.set_num_threads(1)

N_ENTITIES = 24


def functional_graph() -> TripleSet:
    """24 entities on a ring, three bijective relations: r0 steps by 1, r1 by 5, r2
    multiplies by 5 (coprime to 24), so every question has exactly one answer."""
    e = np.arange(N_ENTITIES)
    rows = [
        np.stack([e, np.full_like(e, r), tail], axis=1)
        for r, tail in enumerate([(e + 1) % N_ENTITIES, (e + 5) % N_ENTITIES, (5 * e) % N_ENTITIES])
    ]
    return TripleSet.from_array(np.concatenate(rows), N_ENTITIES, 3)


@pytest.fixture
def ring() -> TripleSet:
    return functional_graph()
