"""Embedder wrappers with the same protocol: a persistent cache and a batcher.

:class:`CachedEmbedder` stores each vector in a
:class:`~quillian.stores.protocols.KeyValueStore` under a key derived from the model id
and the SHA-256 of the text, so re-indexing a corpus only embeds texts it has not seen,
and a question asked again is not embedded again. A call whose texts are all cached
never touches the inner model, so a lazily loaded one (MiniLM, and torch with it) is
not loaded at all.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.errors import ConfigError
from quillian.stores.protocols import KeyValueStore

__all__ = ["BatchingEmbedder", "CachedEmbedder", "embedding_key"]

logger = logging.getLogger(__name__)

EmbedProgress = Callable[[int, int], None]
"""Progress callback: ``(texts done, texts total)``."""


def embedding_key(model_id: str, text: str) -> str:
    """Cache key of ``text`` under ``model_id``: hex SHA-256 of both."""
    return hashlib.sha256(f"{model_id}\x1f{text}".encode()).hexdigest()


def _check_batch_size(batch_size: int) -> None:
    if batch_size <= 0:
        raise ConfigError(f"batch_size must be greater than 0, got {batch_size}")


class _Wrapper:
    """An embedder wrapping ``inner`` without changing its vectors: same model id and width."""

    def __init__(self, inner: Embedder, batch_size: int) -> None:
        _check_batch_size(batch_size)
        self.inner = inner
        self.batch_size = batch_size

    @property
    def model_id(self) -> str:
        """The inner embedder's model id (wrapping does not change vectors)."""
        return self.inner.model_id

    @property
    def dim(self) -> int:
        """The inner embedder's width."""
        return self.inner.dim


class BatchingEmbedder(_Wrapper):
    """Splits large calls into batches of ``batch_size`` and reports progress per batch."""

    def __init__(
        self, inner: Embedder, batch_size: int = 256, on_progress: EmbedProgress | None = None
    ) -> None:
        super().__init__(inner, batch_size)
        self.on_progress = on_progress

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` in batches; same result as ``inner.embed(texts)``."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            end = min(start + self.batch_size, len(texts))
            out[start:end] = self.inner.embed(texts[start:end])
            if self.on_progress is not None:
                self.on_progress(end, len(texts))
        return out


class CachedEmbedder(_Wrapper):
    """Serves vectors from a key-value store; only unseen texts reach ``inner``.

    Vectors are stored as raw float32 bytes in ``namespace``. Unseen texts are
    de-duplicated and embedded in batches of ``batch_size``, shortest first; each batch
    is written to the store as soon as it is embedded, so an interrupted run keeps its
    progress. A stored value of the wrong length (another model, a corrupt write) or
    holding a value that is not finite (a damaged database) is recomputed.
    """

    def __init__(
        self,
        inner: Embedder,
        kv: KeyValueStore,
        *,
        namespace: str = "embeddings",
        batch_size: int = 256,
    ) -> None:
        super().__init__(inner, batch_size)
        self.kv = kv
        self.namespace = namespace

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``, reading cached vectors and embedding only the rest."""
        keys = [embedding_key(self.model_id, text) for text in texts]
        raws = self.kv.get_many(self.namespace, keys)
        dim = _stored_width(raws) or self.dim
        out = np.empty((len(texts), dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, raw in enumerate(raws):
            vector = np.frombuffer(raw, dtype=np.float32) if raw and len(raw) == 4 * dim else None
            if vector is not None and np.isfinite(vector).all():
                out[i] = vector
            else:
                if raw is not None:  # a damaged store: NaN would stop the build for good
                    logger.warning(
                        "cached embedding %s is damaged (%d bytes%s); recomputing",
                        keys[i],
                        len(raw),
                        ", not finite" if vector is not None else "",
                    )
                missing.setdefault(keys[i], []).append(i)
        if missing:
            self._fill(texts, missing, out)
        n_missing = sum(len(rows) for rows in missing.values())
        logger.debug("embedded %d texts, %d from cache", len(texts), len(texts) - n_missing)
        return out

    def _fill(
        self, texts: Sequence[str], missing: dict[str, list[int]], out: npt.NDArray[np.float32]
    ) -> None:
        """Embed one text per missing key, store it and copy it to every row asking for it.

        Texts go to the model shortest first, so each batch holds texts of similar length
        and little compute is spent on padding.
        """
        pending = sorted(missing.items(), key=lambda item: len(texts[item[1][0]]))
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            vectors = np.asarray(
                self.inner.embed([texts[rows[0]] for _, rows in batch]), dtype=np.float32
            )
            self.kv.put_many(
                self.namespace, {key: vectors[j].tobytes() for j, (key, _) in enumerate(batch)}
            )
            for j, (_, rows) in enumerate(batch):
                out[rows] = vectors[j]


def _stored_width(raws: Sequence[bytes | None]) -> int:
    """The vectors' width when every text is cached at one width (0: ask the model).

    A mix of widths (another model's vectors under a colliding key, a corrupt write)
    is left to the model's own width, which then decides what to recompute.
    """
    sizes = {len(raw) if raw is not None else -1 for raw in raws}
    if len(sizes) != 1:
        return 0
    size = sizes.pop()
    return size // 4 if size > 0 and size % 4 == 0 else 0
