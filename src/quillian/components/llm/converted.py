"""A GGUF model's dequantised weights, kept so that the next process loads in seconds.

transformers reads a GGUF file by dequantising every tensor in numpy and building the
tokenizer from the file's metadata: for the bundled 0.5B model about 30 s and 10 s on
the 2-core machine, in every process that answers a question. The first load saves
what it produced (the float32 weights as safetensors, the config, the tokenizer and its
chat template) under the model cache, in a directory named by the GGUF file's SHA-256
and the transformers version that dequantised it; later loads read that directory,
memory-mapped (``python research/llm_local.py --load``).

* The weights are kept in float32 only, as transformers' GGUF reader gives them: a
  Q4_K value is a float16 scale times small integers, which bfloat16 and float16 cannot
  always hold, so a narrower copy would answer differently. A ``bfloat16`` load casts
  the float32 copy, as the GGUF reader casts its float32 output.
* The directory is written under a temporary name and renamed into place once complete
  (:data:`MARKER`, naming the source, written last), so an interrupted save leaves
  nothing that a later load reads; a directory that fails to load is removed and the
  GGUF file read again.
* Nothing is saved when the disk would keep less than the weights' size free after the
  save (a float32 copy is about five times the Q4 file: 2.5 GB for the bundled model);
  the load then goes on from the GGUF file, as before.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "converted_dir", "file_sha256", "load_converted", "save_converted"]

logger = logging.getLogger(__name__)

#: Written last into a complete directory: what it was converted from.
MARKER = "quillian-converted.json"
#: Bumped when what is saved changes; part of the directory's name.
FORMAT = 1


def file_sha256(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def converted_dir(cache_dir: Path, gguf: Path, sha256: str) -> Path:
    """Where ``gguf``'s dequantised weights live under ``cache_dir``: named by the file,
    its SHA-256 and the transformers version (whose reader produced them)."""
    version = importlib.metadata.version("transformers")
    name = f"{gguf.stem}-{sha256[:16]}-transformers-{version}-v{FORMAT}"
    return cache_dir / "converted" / name


def load_converted(directory: Path, dtype: Any) -> tuple[Any, Any] | None:
    """``(model, tokenizer)`` from a complete ``directory`` with weights cast to the
    torch ``dtype``; ``None`` when there is none, or when it does not load (it is then
    removed, with a warning, so the next load converts again)."""
    if not (directory / MARKER).is_file():
        return None
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            str(directory), dtype=dtype, local_files_only=True
        )
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        logger.warning("removing unusable converted weights at %s: %s", directory, exc)
        shutil.rmtree(directory, ignore_errors=True)
        return None
    return model, tokenizer


def save_converted(directory: Path, model: Any, tokenizer: Any, source: dict[str, Any]) -> bool:
    """Save a float32 ``model`` (loaded from a GGUF file) and its ``tokenizer`` into
    ``directory`` atomically; ``source`` (the GGUF file's name and SHA-256) goes into
    :data:`MARKER`. False, with the reason logged, when it was not saved: the disk is
    short of room, the model is not float32, or the save failed (nothing is left)."""
    import torch

    if any(p.dtype != torch.float32 for p in model.parameters()):
        return False
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if free < 2 * size:
        logger.info(
            "not keeping the dequantised weights (%.1f GB) in %s: %.1f GB free; the next "
            "load reads the GGUF file again",
            size / 1e9,
            parent,
            free / 1e9,
        )
        return False
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{directory.name}.", suffix=".tmp"))
    quantizer = getattr(model, "hf_quantizer", None)
    try:
        # the GGUF reader marks the model quantised, which save_pretrained refuses; its
        # weights are plain float32 tensors by now, and the mark is put back after
        model.hf_quantizer = None
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        config = tmp / "config.json"
        settings = json.loads(config.read_text(encoding="utf-8"))
        settings.pop("quantization_config", None)  # it names the GGUF file
        config.write_text(json.dumps(settings, indent=2), encoding="utf-8")
        marker = {"format": FORMAT, "transformers": importlib.metadata.version("transformers")}
        (tmp / MARKER).write_text(json.dumps({**source, **marker}, indent=2), encoding="utf-8")
        tmp.rename(directory)
    except (OSError, ValueError, RuntimeError) as exc:
        if not (directory / MARKER).is_file():  # another process may have won the race
            logger.warning("could not keep the dequantised weights in %s: %s", directory, exc)
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        model.hf_quantizer = quantizer
    logger.info("kept the dequantised weights in %s (%.1f GB)", directory, size / 1e9)
    return True
