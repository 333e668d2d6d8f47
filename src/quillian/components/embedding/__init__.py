"""Embedders: the protocol, sentence-transformers models, and cache/batching wrappers.

Importing this package loads neither torch nor sentence-transformers.
"""

from quillian.components.embedding.base import Embedder
from quillian.components.embedding.cache import BatchingEmbedder, CachedEmbedder, embedding_key
from quillian.components.embedding.sentence_transformers import (
    DEFAULT_MODEL,
    SentenceTransformerEmbedder,
    l2_normalize,
)

__all__ = [
    "DEFAULT_MODEL",
    "BatchingEmbedder",
    "CachedEmbedder",
    "Embedder",
    "SentenceTransformerEmbedder",
    "embedding_key",
    "l2_normalize",
]
