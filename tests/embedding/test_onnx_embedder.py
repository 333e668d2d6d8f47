"""OnnxEmbedder: MiniLM on ONNX Runtime with int8 weights, exported locally once.

Checks that need no model run everywhere; the export and the vectors are marked
``model`` (the export loads torch once, about 10 s, into a per-session cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quillian.components.embedding import onnx as onnx_module
from quillian.components.embedding.factory import make_embedder
from quillian.components.embedding.onnx import OnnxEmbedder, export_onnx, onnx_cache_dir
from quillian.components.embedding.sentence_transformers import (
    SentenceTransformerEmbedder,
    resolve_model,
)
from quillian.errors import ConfigError


def test_constructor_validates_its_arguments() -> None:
    with pytest.raises(ConfigError, match="threads must be greater than 0, got -1"):
        OnnxEmbedder(threads=-1)


def test_its_vectors_have_their_own_cache_namespace() -> None:
    onnx_id = make_embedder("minilm-int8").model_id
    assert onnx_id == "sentence-transformers/all-MiniLM-L6-v2:onnx-int8-r2:norm"
    assert onnx_id != SentenceTransformerEmbedder().model_id


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("QUILLIAN_MODEL_CACHE", str(tmp_path))
    assert onnx_cache_dir() == tmp_path / "onnx"


def _model_dir(root: Path, pooling: dict[str, object]) -> Path:
    """A sentence-transformers layout (no weights): Transformer then Pooling."""
    root.mkdir()
    kind = "sentence_transformers.models."
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": f"{kind}Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": f"{kind}Pooling"},
    ]
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 8, **pooling})
    )
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    return root


def test_width_is_read_from_the_model_files_without_loading(tmp_path: Path) -> None:
    model = _model_dir(tmp_path / "m", {"pooling_mode_mean_tokens": True})
    embedder = OnnxEmbedder(str(model))
    assert embedder.dim == 8
    assert embedder._session is None


def test_a_model_not_mean_pooled_is_refused_with_its_reason(tmp_path: Path) -> None:
    model = _model_dir(tmp_path / "cls", {"pooling_mode_cls_token": True})
    with pytest.raises(ConfigError, match="not a mean-pooled sentence-transformers encoder"):
        OnnxEmbedder(str(model)).embed(["x"])


def test_the_export_is_named_by_the_weights_and_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = _model_dir(tmp_path / "m", {"pooling_mode_mean_tokens": True})
    (model / "model.safetensors").write_bytes(b"weights v1")
    exports: list[Path] = []

    def fake_export(model_dir: Path, staging: Path) -> None:
        exports.append(model_dir)
        (staging / "model-int8.onnx").write_bytes(b"onnx")
        (staging / "model.onnx").write_bytes(b"intermediate")

    hashed: list[Path] = []
    digest = onnx_module._digest

    def counted_digest(model_dir: Path) -> str:
        hashed.append(model_dir)
        return digest(model_dir)

    monkeypatch.setattr(onnx_module, "_export", fake_export)
    monkeypatch.setattr(onnx_module, "_digest", counted_digest)
    first = export_onnx(model, tmp_path / "cache")
    assert export_onnx(model, tmp_path / "cache") == first
    assert len(exports) == 1
    assert len(hashed) == 1  # the weights' digest kept beside the export, not read again
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        first.name,
        "m.digest.json",
    ]
    (model / "model.safetensors").write_bytes(b"weights v2")  # same size, a new time
    assert export_onnx(model, tmp_path / "cache") != first
    assert len(exports) == 2 and len(hashed) == 2


def test_a_failed_export_leaves_no_file_behind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = _model_dir(tmp_path / "m", {"pooling_mode_mean_tokens": True})

    def failing_export(model_dir: Path, staging: Path) -> None:
        (staging / "model.onnx").write_bytes(b"half")
        raise RuntimeError("export failed")

    monkeypatch.setattr(onnx_module, "_export", failing_export)
    with pytest.raises(RuntimeError, match="export failed"):
        export_onnx(model, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_unwritable_cache_is_a_clear_error(tmp_path: Path) -> None:
    model = _model_dir(tmp_path / "m", {"pooling_mode_mean_tokens": True})
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ConfigError, match="set QUILLIAN_MODEL_CACHE to a writable directory"):
        export_onnx(model, tmp_path / "file" / "cache")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("onnx-cache")
    export_onnx(Path(resolve_model(None)[0]), cache)
    return cache


SENTENCES = [
    "Herbert A. Simon was born in Milwaukee, Wisconsin.",
    "M. Ross Quillian proposed semantic networks in his 1966 thesis.",
    "Spreading activation retrieves related concepts in a network.",
    "The Eiffel Tower is in Paris.",
    "",
    "Milwaukee",
]


@pytest.mark.model
def test_vectors_are_unit_rows_close_to_the_float32_model(exported: Path) -> None:
    embedder = OnnxEmbedder(cache_dir=exported)
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reference = SentenceTransformerEmbedder().embed(SENTENCES)
    cosines = (vectors * reference).sum(axis=1)
    assert cosines.min() > 0.95 and cosines.mean() > 0.98
    # The nearest sentence to each query is the float32 model's nearest too.
    queries = ["Where was Herbert Simon born?", "Who invented semantic networks?"]
    ranked = np.argmax(embedder.embed(queries) @ vectors[:4].T, axis=1)
    expected = np.argmax(SentenceTransformerEmbedder().embed(queries) @ reference[:4].T, axis=1)
    assert ranked.tolist() == expected.tolist() == [0, 1]


@pytest.mark.model
def test_a_text_gets_the_same_vector_alone_and_among_others(exported: Path) -> None:
    embedder = OnnxEmbedder(cache_dir=exported)
    together = embedder.embed(SENTENCES)
    alone = np.vstack([embedder.embed([text]) for text in SENTENCES])
    assert np.array_equal(together, alone)
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.model
def test_embedders_of_one_model_share_its_session(exported: Path) -> None:
    """A process that builds again (a server's adds, each a new embedder) loads the
    model once."""
    first, second = OnnxEmbedder(cache_dir=exported), OnnxEmbedder(cache_dir=exported)
    assert first._load()[0] is second._load()[0]
    assert np.array_equal(first.embed(SENTENCES[:2]), second.embed(SENTENCES[:2]))


@pytest.mark.model
def test_embedding_with_an_exported_model_never_imports_torch(exported: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from quillian.components.embedding.onnx import OnnxEmbedder\n"
        f"vectors = OnnxEmbedder(cache_dir=Path({str(exported)!r})).embed(['a question'])\n"
        "assert vectors.shape == (1, 384)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'sentence_transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
