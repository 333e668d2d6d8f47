"""The narrow embedder protocol: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Embeds texts into unit-length vectors (so inner product is cosine similarity).

    ``model_id`` names the model and its settings; it keys the on-disk cache.
    ``embed`` returns an array of shape ``(len(texts), dim)``, dtype float32.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
