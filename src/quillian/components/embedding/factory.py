"""Embedders by name: ``minilm`` (all-MiniLM-L6-v2, shipped on PyPI), and the model-free
``hash`` and ``keyword`` embedders."""

from __future__ import annotations

from quillian.components.embedding.base import Embedder
from quillian.components.embedding.hashed import HashEmbedder, KeywordEmbedder
from quillian.components.embedding.sentence_transformers import SentenceTransformerEmbedder
from quillian.errors import ConfigError

__all__ = ["EMBEDDERS", "make_embedder"]

EMBEDDERS = ("minilm", "hash", "keyword")


def make_embedder(name: str) -> Embedder:
    """An embedder by name (loading MiniLM is deferred to its first use)."""
    if name == "minilm":
        return SentenceTransformerEmbedder()
    if name == "hash":
        return HashEmbedder()
    if name == "keyword":
        return KeywordEmbedder()
    raise ConfigError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")
