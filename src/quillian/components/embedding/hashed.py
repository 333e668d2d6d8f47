"""Embedders with no model: deterministic vectors for ``--embedder hash|keyword``, demos
and tests.

* :class:`HashEmbedder` - a pseudo-random unit vector per text, seeded by the text's
  SHA-256: equal texts get equal vectors, different texts near-orthogonal ones.
* :class:`KeywordEmbedder` - a bag of hashed words: texts sharing words get a high
  cosine, so retrieval tests can work out similarities by hand.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError

__all__ = ["DEFAULT_STOPWORDS", "HashEmbedder", "KeywordEmbedder"]

_STOPWORDS = "a an and are as at be by for from has in is it its of on or that the to was were with"
DEFAULT_STOPWORDS = frozenset(_STOPWORDS.split())
_WORD = re.compile(r"\w+")


def _digest_int(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _check_dim(dim: int) -> None:
    if dim <= 0:
        raise ConfigError(f"dim must be greater than 0, got {dim}")


class HashEmbedder:
    """Unit vectors drawn from a normal distribution seeded by SHA-256 of the text.

    Deterministic across runs and machines; unrelated texts have cosine near 0
    (about ``1/sqrt(dim)`` in magnitude).
    """

    def __init__(self, dim: int = 64) -> None:
        _check_dim(dim)
        self._dim = dim

    @property
    def model_id(self) -> str:
        """``hash-<dim>``."""
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector width."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One seeded unit vector per text; shape ``(len(texts), dim)``."""
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            vector = np.random.default_rng(_digest_int(text)).standard_normal(self._dim)
            out[i] = vector / np.linalg.norm(vector)
        return out


class KeywordEmbedder:
    """Binary bag of words, each word hashed to one of ``dim`` buckets, L2-normalised.

    Words are ``\\w+`` runs, case-folded, minus ``stopwords``. Barring hash collisions,
    the cosine of two texts with word sets ``A`` and ``B`` is
    ``|A & B| / sqrt(|A| * |B|)``: texts sharing no word score 0, equal word sets 1.
    A text with no words maps to a fixed reserved vector, so every output has unit norm.
    """

    def __init__(self, dim: int = 1024, stopwords: Iterable[str] = DEFAULT_STOPWORDS) -> None:
        _check_dim(dim)
        self._dim = dim
        self._stopwords = frozenset(word.casefold() for word in stopwords)

    @property
    def model_id(self) -> str:
        """``keyword-<dim>``."""
        return f"keyword-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector width."""
        return self._dim

    def words(self, text: str) -> set[str]:
        """The words of ``text`` that count: case-folded, stopwords removed."""
        words = {w.casefold() for w in _WORD.findall(text)}
        return words - self._stopwords

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One bag-of-words unit vector per text; shape ``(len(texts), dim)``."""
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            buckets = {_digest_int(word) % self._dim for word in self.words(text)} or {
                _digest_int("") % self._dim
            }
            out[i, sorted(buckets)] = 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)
