"""The in-memory store fakes pass the same contract suites as the real backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quillian.testing.contracts import (
    DocumentStoreContract,
    KeyValueStoreContract,
    StatusStoreContract,
)
from quillian.testing.memory import MemoryDocumentStore, MemoryKeyValueStore, MemoryStatusStore


class TestMemoryDocumentStore(DocumentStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[MemoryDocumentStore]:
        yield MemoryDocumentStore()

    def reopen(self, store: MemoryDocumentStore) -> MemoryDocumentStore:  # type: ignore[override]
        store.close()
        return store.reopen()


class TestMemoryStatusStore(StatusStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[MemoryStatusStore]:
        yield MemoryStatusStore()

    def reopen(self, store: MemoryStatusStore) -> MemoryStatusStore:  # type: ignore[override]
        store.close()
        return store.reopen()


class TestMemoryKeyValueStore(KeyValueStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[MemoryKeyValueStore]:
        yield MemoryKeyValueStore()

    def reopen(self, store: MemoryKeyValueStore) -> MemoryKeyValueStore:  # type: ignore[override]
        store.close()
        return store.reopen()
