"""The hash-seeded and keyword fakes: deterministic, unit-norm, hand-checkable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quillian.components.embedding import Embedder
from quillian.components.embedding.hashed import HashEmbedder, KeywordEmbedder
from quillian.errors import ConfigError


@pytest.mark.parametrize("embedder", [HashEmbedder(), KeywordEmbedder()])
def test_fakes_follow_the_embedder_contract(embedder: Embedder) -> None:
    vectors = embedder.embed(["alpha beta", "gamma", ""])
    assert isinstance(embedder, Embedder)
    assert vectors.shape == (3, embedder.dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert embedder.embed([]).shape == (0, embedder.dim)


def test_hash_embedder_is_deterministic_and_spreads_texts() -> None:
    a = HashEmbedder(dim=64).embed(["cat", "dog"])
    b = HashEmbedder(dim=64).embed(["dog", "cat"])
    np.testing.assert_array_equal(a[0], b[1])
    assert abs(float(a[0] @ a[1])) < 0.5
    assert HashEmbedder(dim=8).model_id == "hash-8"


def test_hash_embedder_vectors_are_stable_across_versions() -> None:
    # Pinned so that a change of seeding (which would silently change tests) is noticed.
    vector = HashEmbedder(dim=4).embed(["quillian"])[0]
    assert vector.tolist() == pytest.approx([-0.0741, -0.2062, 0.4665, 0.8570], abs=1e-4)


def test_keyword_embedder_cosine_is_word_overlap() -> None:
    embedder = KeywordEmbedder()
    vectors = embedder.embed(
        ["Paris is the capital of France", "France capital city", "Bananas grow on trees"]
    )
    # {paris, capital, france} vs {france, capital, city}: 2 / sqrt(3 * 3)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(2 / 3, abs=1e-6)
    assert float(vectors[0] @ vectors[2]) == pytest.approx(0.0, abs=1e-6)
    assert embedder.words("The Cat, the cat!") == {"cat"}


def test_keyword_embedder_ignores_stopwords_case_and_repeats() -> None:
    embedder = KeywordEmbedder(dim=256)
    a, b = embedder.embed(["the Beatles and the Stones", "beatles beatles STONES"])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-6)
    custom = KeywordEmbedder(stopwords=["beatles"])
    assert custom.words("the Beatles") == {"the"}
    assert math.isclose(float(np.linalg.norm(custom.embed(["beatles"])[0])), 1.0, rel_tol=1e-6)


@pytest.mark.parametrize("cls", [HashEmbedder, KeywordEmbedder])
def test_fakes_reject_a_non_positive_dim(cls: type) -> None:
    with pytest.raises(ConfigError, match="dim must be greater than 0, got 0"):
        cls(dim=0)
