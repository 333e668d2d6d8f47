"""A pgvector collection's ``get`` reads only the ids asked for (no whole-collection
read at first use), keeps the order asked and names unknown ids; HNSW search beyond
``exact_limit`` returns ``k`` rows even past ``ef_search``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("psycopg")
from quillian.errors import ConfigError, UnknownIdError
from quillian.stores.postgres import PgVectorIndex, vectors

pytestmark = pytest.mark.postgres

DIM = 8
N = 5000


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.normal(size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def collection(postgres_url: str) -> Iterator[tuple[PgVectorIndex, np.ndarray]]:
    rows = _unit(np.random.default_rng(3), N)
    with PgVectorIndex(postgres_url, "chunks", DIM) as store:
        store.add(np.arange(N), rows)
        store.flush()
    with PgVectorIndex(postgres_url, "chunks") as store:  # a reader, as retrieval opens it
        yield store, rows


class _Counting:
    """Wraps ``store._conn`` to count the rows its statements return to this process."""

    def __init__(self, store: PgVectorIndex, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        self.statements: list[str] = []
        opened = store._conn

        def conn(*args: Any, **kwargs: Any) -> Any:
            return _Scope(self, opened(*args, **kwargs))

        monkeypatch.setattr(store, "_conn", conn)


class _Scope:
    def __init__(self, counter: _Counting, scope: Any) -> None:
        self.counter = counter
        self.scope = scope

    def __enter__(self) -> Any:
        return _Conn(self.counter, self.scope.__enter__())

    def __exit__(self, *exc: Any) -> Any:
        return self.scope.__exit__(*exc)


class _Conn:
    def __init__(self, counter: _Counting, conn: Any) -> None:
        self.counter = counter
        self.conn = conn

    def execute(self, statement: Any, params: Any = None) -> Any:
        cursor = self.conn.execute(statement, params)
        self.counter.statements.append(statement.as_string(self.conn))
        return _Cursor(self.counter, cursor)

    def cursor(self) -> Any:  # a COPY (a whole-collection read went through one)
        self.counter.statements.append("cursor")
        return self.conn.cursor()


class _Cursor:
    def __init__(self, counter: _Counting, cursor: Any) -> None:
        self.counter = counter
        self.cursor = cursor

    def fetchall(self) -> list[Any]:
        rows = self.cursor.fetchall()
        self.counter.rows += len(rows)
        return rows

    def fetchone(self) -> Any:
        row = self.cursor.fetchone()
        self.counter.rows += row is not None
        return row


def test_get_reads_only_the_ids_asked_for(collection, monkeypatch) -> None:
    store, rows = collection
    counting = _Counting(store, monkeypatch)
    asked = np.array([4321, 7, 7, 2500, 0], dtype=np.int64)
    np.testing.assert_array_equal(store.get(asked), rows[asked])
    assert counting.rows == 4  # the distinct ids, not the 5,000 vectors
    assert len(counting.statements) == 1  # one round trip
    assert "ANY" in counting.statements[0]
    np.testing.assert_array_equal(store.get(asked[::-1]), rows[asked[::-1]])
    assert counting.rows == 4  # held from the first call: read nothing more
    np.testing.assert_array_equal(store.get([7, 8]), rows[[7, 8]])
    assert counting.rows == 5  # only id 8 was new


def test_get_keeps_order_and_names_every_unknown_id(collection) -> None:
    store, rows = collection
    with pytest.raises(UnknownIdError) as raised:
        store.get([3, N + 7, 12, N + 1])
    assert set(raised.value.ids.tolist()) == {N + 1, N + 7}
    np.testing.assert_array_equal(store.get([12, 3]), rows[[12, 3]])  # known ones still served
    assert store.get(np.zeros(0, dtype=np.int64)).shape == (0, DIM)


def test_the_cache_is_bounded_and_forgotten_on_write(collection, monkeypatch) -> None:
    store, rows = collection
    monkeypatch.setattr(vectors, "CACHE_VECTORS", 100)
    store.get(np.arange(300))
    assert len(store._cache) == 100
    np.testing.assert_array_equal(store.get([299, 250]), rows[[299, 250]])
    changed = _unit(np.random.default_rng(9), 1)
    store.add([299], changed)
    np.testing.assert_allclose(store.get([299]), changed, rtol=1e-6)  # not the cached vector


def test_hnsw_beyond_the_exact_limit_answers_k_rows_past_ef(postgres_url: str) -> None:
    rows = _unit(np.random.default_rng(5), 3000)
    with PgVectorIndex(postgres_url, "chunks", DIM) as store:
        store.add(np.arange(3000), rows)
        store.flush()
    with PgVectorIndex(postgres_url, "chunks", exact_limit=100, ef_search=10) as store:
        ids, scores = store.search(rows[:3], 1500)  # past the largest ef_search (1,000)
        assert ids.shape == (3, 1500) and (ids >= 0).all()
        assert all(len(set(r.tolist())) == 1500 for r in ids)
        assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first
        top, _ = store.search(rows[:20], 5)
        assert (top[:, 0] == np.arange(20)).mean() >= 0.9  # each finds itself, mostly


@pytest.mark.parametrize("field", ["ef_search", "exact_limit"])
def test_bad_search_settings_are_refused(postgres_url: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        settings: dict[str, Any] = {field: 0}
        PgVectorIndex(postgres_url, "chunks", DIM, **settings)
    with pytest.raises(ConfigError, match="ef_search"):
        PgVectorIndex(postgres_url, "chunks", DIM, ef_search=1001)


def test_hyphenated_names_get_tables_of_their_own(postgres_url: str) -> None:
    """KAGS's and KAG's collections (``kags-triples``, ``kag-names``) work on PostgreSQL,
    apart from a collection spelled with ``_``; ambiguous names are refused."""
    rows = _unit(np.random.default_rng(1), 4)
    with PgVectorIndex(postgres_url, "kags-triples", DIM) as dashed:
        dashed.add(np.arange(2), rows[:2])
    with PgVectorIndex(postgres_url, "kags_triples", DIM) as plain:
        plain.add(np.arange(2), rows[2:])
    with PgVectorIndex(postgres_url, "kags-triples") as dashed:  # reopened: its HNSW index
        np.testing.assert_array_equal(dashed.get([0, 1]), rows[:2])
        assert dashed.search(rows[:1], 1)[0][0, 0] == 0
    for bad in ("kags__triples", "kags-_triples", "Kags", "-kags", "k" * 60):
        with pytest.raises(ConfigError, match="collection name"):
            PgVectorIndex(postgres_url, bad, DIM)


def test_a_float16_collection_is_halfvec_kept_and_searched_through_hnsw(
    postgres_url: str,
) -> None:
    """A float16 collection stores pgvector's ``halfvec`` (half the bytes of ``vector``,
    in the table and in its HNSW index); a reader finds its dtype in the table, another
    dtype asked of it is refused, and HNSW searches it as a float32 one."""
    rows = _unit(np.random.default_rng(7), 3000)
    sizes = {}
    for dtype, name in (("float32", "chunks"), ("float16", "texts")):
        with PgVectorIndex(postgres_url, name, DIM, dtype=dtype) as store:
            store.add(np.arange(3000), rows)
            store.flush()
            with store._conn("sizes", transaction=False) as conn:
                sizes[dtype] = conn.execute(
                    "SELECT pg_column_size(embedding) FROM vectors_" + name + " LIMIT 1"
                ).fetchone()[0]
    assert sizes["float32"] - sizes["float16"] == 2 * DIM  # two bytes a value fewer
    with PgVectorIndex(postgres_url, "texts", exact_limit=100) as store:
        assert store.dtype == "float16"
        np.testing.assert_allclose(store.get([5]), rows[[5]], atol=1e-3)
        top, scores = store.search(rows[:20], 5)  # through the HNSW index on halfvec
        assert (top[:, 0] == np.arange(20)).mean() >= 0.9
        assert (np.diff(scores, axis=1) <= 1e-6).all()
    with pytest.raises(ConfigError, match="stores float16, asked for float32"):
        PgVectorIndex(postgres_url, "texts", DIM, dtype="float32")
    with PgVectorIndex(postgres_url, "texts", DIM, fresh=True, dtype="float32") as store:
        assert store.dtype == "float32" and len(store) == 0  # a collection written anew
        store.add([1], rows[:1])
        np.testing.assert_allclose(store.get([1]), rows[:1], rtol=1e-6)
    with pytest.raises(ConfigError, match="dtype must be one of"):
        PgVectorIndex(postgres_url, "other", DIM, dtype="bfloat16")


class _Versioned:
    """A connection whose server has pgvector ``version`` (None: none installable)."""

    def __init__(self, version: str | None) -> None:
        self.version, self.asked = version, 0

    def execute(self, sql: str) -> Any:
        self.asked += 1
        return self

    def fetchone(self) -> tuple[str | None]:
        return (self.version,)


@pytest.mark.parametrize("version", ["0.5.1", "0.6.2", "0.6.9-dev"])
def test_float16_needs_pgvector_0_7(version: str) -> None:
    with pytest.raises(ConfigError, match=rf"pgvector {version} on this server cannot store"):
        vectors.check_dtype(_Versioned(version), "float16", "w")


@pytest.mark.parametrize("version", ["0.7.0", "0.8.1", "1.0", None])
def test_float16_is_taken_from_pgvector_0_7_on(version: str | None) -> None:
    vectors.check_dtype(_Versioned(version), "float16", "w")
    unasked = _Versioned("0.5.0")
    vectors.check_dtype(unasked, "float32", "w")
    assert unasked.asked == 0  # float32 needs no look


def test_a_collection_is_not_retyped_to_float16_on_a_pgvector_without_it(
    postgres_url: str, monkeypatch
) -> None:
    rows = _unit(np.random.default_rng(7), 10)
    with PgVectorIndex(postgres_url, "old", DIM, dtype="float32") as store:
        store.add(np.arange(10), rows)
    monkeypatch.setattr(vectors, "HALFVEC_SINCE", (99, 0, 0))  # every pgvector too old
    with pytest.raises(ConfigError, match="cannot store float16 vectors"):
        PgVectorIndex(postgres_url, "old", DIM, fresh=True, dtype="float16")
    with PgVectorIndex(postgres_url, "old") as store:  # neither emptied nor retyped
        assert store.dtype == "float32" and len(store) == 10
