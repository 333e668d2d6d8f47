"""A pinned copy of a pgvector collection answers as the table did when it was read,
also while a build empties and refills the table (what a server replica searches)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("psycopg")
from quillian.errors import UnknownIdError
from quillian.stores.postgres import PgVectorIndex, PinnedVectors

pytestmark = pytest.mark.postgres


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.normal(size=(n, 16)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_pinned_copy_answers_as_the_table_did_while_it_is_rebuilt(postgres_url: str) -> None:
    rng = np.random.default_rng(3)
    old, new = _unit(rng, 300), _unit(rng, 500)
    queries = np.concatenate([old[:10], np.tile(old[:1], (2, 1))])  # a tie of its own
    with PgVectorIndex(postgres_url, "chunks", 16, fresh=True) as table:
        table.add(np.arange(300), np.tile(old[:150], (2, 1)))  # ties: ids i and i + 150
        table.flush()
        expected = table.search(queries, 8)
    pinned = PinnedVectors.read("chunks", PgVectorIndex(postgres_url, "chunks"))
    got = pinned.search(queries, 8)
    np.testing.assert_array_equal(got[0], expected[0])  # ties by the smaller id, as there
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-5)

    with PgVectorIndex(postgres_url, "chunks", 16, fresh=True) as rebuilt:  # emptied
        assert pinned.search(queries, 8)[0].tolist() == expected[0].tolist()
        rebuilt.add(np.arange(500), new)
        assert len(pinned) == 300 and int(pinned.search(new, 5)[0].max()) < 300
    np.testing.assert_array_equal(pinned.get([0, 150]), np.tile(old[:1], (2, 1)))
    with pytest.raises(UnknownIdError):
        pinned.get([300])


def test_an_empty_collection_pins_empty(postgres_url: str) -> None:
    with PgVectorIndex(postgres_url, "texts", 16, fresh=True) as table:
        table.flush()
    pinned = PinnedVectors.read("texts", PgVectorIndex(postgres_url, "texts"))
    ids, scores = pinned.search(np.ones((2, 16), np.float32), 4)
    assert len(pinned) == 0 and ids.shape == (2, 0) and scores.shape == (2, 0)
