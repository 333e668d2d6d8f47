"""Where models made or assembled locally are kept: the bundled GGUF, the ONNX export."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "model_cache_dir"]

CACHE_ENV = "QUILLIAN_MODEL_CACHE"


def model_cache_dir() -> Path:
    """``$QUILLIAN_MODEL_CACHE`` if set, else ``~/.cache/quillian/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "quillian" / "models"
