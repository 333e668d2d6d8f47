"""A small pgvector collection is searched exactly, ties ranked by id: two builds of the
same vectors, written in different orders, answer alike (the crash campaign's control
saw ``ppr``'s seeds differ between two clean builds on PostgreSQL)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgVectorIndex, vectors
from quillian.testing.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def _collection(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """400 unit vectors of 16 dimensions, each of the first 100 repeated four times
    under four ids: ties everywhere."""
    base = rng.normal(size=(100, 16)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    return np.arange(400, dtype=np.int64), np.tile(base, (4, 1))


def test_two_builds_written_in_other_orders_answer_alike(postgres_server: PostgresServer, tmp_path):
    rng = np.random.default_rng(7)
    ids, rows = _collection(rng)
    queries = rows[:20] + rng.normal(scale=0.05, size=(20, 16)).astype(np.float32)
    answers = []
    for build, order in enumerate([np.arange(400), rng.permutation(400)]):
        url = postgres_server.url(f"exact_{build}", tmp_path / f"cache{build}")
        with PgVectorIndex(url, "chunks", 16, fresh=True) as store:
            for part in np.array_split(order, 8):  # several writes, another physical order
                store.add(ids[part], rows[part])
            store.flush()  # the HNSW index exists, and is not used at this size
            answers.append(store.search(queries, 8))
    (ids_a, scores_a), (ids_b, scores_b) = answers
    np.testing.assert_array_equal(ids_a, ids_b)
    np.testing.assert_allclose(scores_a, scores_b, rtol=1e-6)
    # the four copies' scores computed once, so they tie exactly (BLAS may round one
    # row's product apart from an equal row's in another block)
    scores = np.tile(queries @ rows[:100].T, (1, 4))
    exact = np.argsort(-scores, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(ids_a, exact)  # the true top 8, ties by id
    assert len(rows) <= vectors.EXACT_LIMIT
