"""CachedEmbedder and BatchingEmbedder: same vectors as the inner embedder, less work."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from quillian.components.embedding import (
    BatchingEmbedder,
    CachedEmbedder,
    Embedder,
    embedding_key,
)
from quillian.components.embedding.hashed import HashEmbedder
from quillian.errors import ConfigError
from quillian.testing.memory import MemoryKeyValueStore


class CountingEmbedder:
    """Wraps HashEmbedder and records every batch it is asked to embed."""

    def __init__(self, dim: int = 16, model_id: str = "hash-16") -> None:
        self.inner = HashEmbedder(dim)
        self.calls: list[list[str]] = []
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_cached_embedder_matches_inner_and_only_embeds_unseen_texts() -> None:
    inner, kv = CountingEmbedder(), MemoryKeyValueStore()
    cached = CachedEmbedder(inner, kv)
    assert isinstance(cached, Embedder)
    first = cached.embed(["a", "b"])
    second = cached.embed(["b", "c", "a"])
    np.testing.assert_array_equal(second, HashEmbedder(16).embed(["b", "c", "a"]))
    np.testing.assert_array_equal(first[1], second[0])
    assert inner.calls == [["a", "b"], ["c"]]
    assert cached.model_id == inner.model_id and cached.dim == 16


def test_cached_embedder_deduplicates_and_batches_misses() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, MemoryKeyValueStore(), batch_size=2)
    vectors = cached.embed(["x", "y", "x", "z", "w"])
    assert inner.calls == [["x", "y"], ["z", "w"]]
    np.testing.assert_array_equal(vectors[0], vectors[2])


def test_cache_persists_across_instances_and_separates_models() -> None:
    kv = MemoryKeyValueStore()
    CachedEmbedder(CountingEmbedder(), kv).embed(["a"])
    again, other = CountingEmbedder(), CountingEmbedder(model_id="other")
    CachedEmbedder(again, kv).embed(["a"])
    CachedEmbedder(other, kv, namespace="embeddings").embed(["a"])
    assert again.calls == [] and other.calls == [["a"]]
    assert set(kv.keys("embeddings")) == {
        embedding_key("hash-16", "a"),
        embedding_key("other", "a"),
    }
    raw = kv.get_many("embeddings", [embedding_key("hash-16", "a")])[0]
    assert raw is not None and len(raw) == 16 * 4  # float32 bytes


def test_cache_recomputes_a_corrupt_entry() -> None:
    kv, inner = MemoryKeyValueStore(), CountingEmbedder()
    kv.put_many("embeddings", {embedding_key("hash-16", "a"): b"short"})
    vector = CachedEmbedder(inner, kv).embed(["a"])
    assert inner.calls == [["a"]]
    np.testing.assert_array_equal(vector, HashEmbedder(16).embed(["a"]))


def test_cache_of_nothing_is_empty() -> None:
    assert CachedEmbedder(CountingEmbedder(), MemoryKeyValueStore()).embed([]).shape == (0, 16)


def test_batching_embedder_splits_calls_and_reports_progress() -> None:
    inner, progress = CountingEmbedder(), []
    batching = BatchingEmbedder(
        inner, batch_size=2, on_progress=lambda d, t: progress.append((d, t))
    )
    vectors = batching.embed(["a", "b", "c"])
    assert inner.calls == [["a", "b"], ["c"]]
    assert progress == [(2, 3), (3, 3)]
    np.testing.assert_array_equal(vectors, HashEmbedder(16).embed(["a", "b", "c"]))


@pytest.mark.parametrize("size", [0, -1])
def test_wrappers_reject_a_non_positive_batch_size(size: int) -> None:
    with pytest.raises(ConfigError, match=f"got {size}"):
        CachedEmbedder(CountingEmbedder(), MemoryKeyValueStore(), batch_size=size)
    with pytest.raises(ConfigError, match=f"got {size}"):
        BatchingEmbedder(CountingEmbedder(), batch_size=size)
