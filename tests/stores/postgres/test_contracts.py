"""Every store contract suite against a real PostgreSQL server (marked ``postgres``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quillian.testing.contracts import (
    ChangeLogContract,
    DocumentStoreContract,
    GraphStoreContract,
    KeyValueStoreContract,
    StatusStoreContract,
    VectorIndexContract,
)

pytest.importorskip("psycopg")
from quillian.stores.postgres import (
    PgChangeLog,
    PgDocumentStore,
    PgGraphStore,
    PgKeyValueStore,
    PgStatusStore,
    PgVectorIndex,
)

pytestmark = pytest.mark.postgres


class TestPgDocumentStore(DocumentStoreContract):
    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgDocumentStore]:
        with PgDocumentStore(postgres_url) as store:
            yield store

    def reopen(self, store: PgDocumentStore) -> PgDocumentStore:  # type: ignore[override]
        store.close()
        return PgDocumentStore(store.workspace.location.url)


class TestPgChangeLog(ChangeLogContract):
    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgChangeLog]:
        with PgChangeLog(postgres_url) as log:
            yield log

    @pytest.fixture
    def writers(self, store: PgChangeLog) -> Iterator[tuple[PgDocumentStore, PgStatusStore]]:
        with PgDocumentStore(store.workspace) as docs, PgStatusStore(store.workspace) as status:
            yield docs, status

    def reopen(self, store: PgChangeLog) -> PgChangeLog:  # type: ignore[override]
        store.close()
        return PgChangeLog(store.workspace.location.url)


class TestPgStatusStore(StatusStoreContract):
    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgStatusStore]:
        with PgStatusStore(postgres_url) as store:
            yield store

    def reopen(self, store: PgStatusStore) -> PgStatusStore:  # type: ignore[override]
        store.close()
        return PgStatusStore(store.workspace.location.url)


class TestPgKeyValueStore(KeyValueStoreContract):
    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgKeyValueStore]:
        with PgKeyValueStore(postgres_url) as store:
            yield store

    def reopen(self, store: PgKeyValueStore) -> PgKeyValueStore:  # type: ignore[override]
        store.close()
        return PgKeyValueStore(store.workspace.location.url)


class TestPgVectorIndex(VectorIndexContract):
    recall_threshold = 0.95  # HNSW is approximate

    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgVectorIndex]:
        with PgVectorIndex(postgres_url, "chunks", self.dim) as store:
            yield store

    def reopen(self, store: PgVectorIndex) -> PgVectorIndex:  # type: ignore[override]
        store.close()
        return PgVectorIndex(store.workspace.location.url, store.name)


class TestPgVectorIndexFloat16(TestPgVectorIndex):
    atol = 1e-3  # halfvec rounds each value to float16

    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[PgVectorIndex]:
        with PgVectorIndex(postgres_url, "chunks", self.dim, dtype="float16") as store:
            assert store.dtype == "float16"
            yield store


class TestPgGraphStore(GraphStoreContract):
    @pytest.fixture
    def store(self, postgres_url: str, tmp_path: Path) -> Iterator[PgGraphStore]:
        with PgGraphStore(postgres_url, tmp_path / "graph") as store:
            yield store

    def reopen(self, store: PgGraphStore) -> PgGraphStore:  # type: ignore[override]
        store.close()
        return PgGraphStore(store.workspace.location.url, store.cache)
