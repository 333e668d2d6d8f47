"""Attention keys and values of recent prompts, reused by a prompt that starts the same way.

A method's prompts to a local model share beginnings: the same instructions for every
question, the same passages for a KAG round's memory and its answer. The model's keys and
values for those tokens do not depend on what follows them (attention is causal), so
:class:`PrefixCache` keeps the last prompts' per-layer keys and values and hands a later
prompt the longest stored beginning of it; transformers' ``generate`` then runs the model
over the rest only. vLLM and llama.cpp's server do the same (automatic prefix caching,
``cache_prompt``).

The reply is the one the whole prompt would give up to floating-point rounding (the
prompt is read in two pieces instead of one): on the first 20 HotpotQA questions
(docs/benchmarks.md, "Prompt prefixes reused by the local model") 59 of 60 predictions
were word for word those of the model with no cache, and the share of prompt tokens
reused was 7% (``vanilla-rag``) to 15% (``sa-rag``, ``kag-cr``).

Only transformers' :class:`~transformers.DynamicCache` with full-attention layers is kept;
a model with sliding-window layers (whose cache drops old tokens) is left uncached, with
one log line.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from quillian.errors import ConfigError

__all__ = ["PrefixCache", "PrefixStats", "cache_argument"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Entry:
    ids: Any
    """The prompt's token ids, a 1-D int64 tensor."""
    layers: list[tuple[Any, Any]]
    """Per layer, keys and values of shape (1, heads, tokens, head size)."""
    nbytes: int


@dataclass(slots=True)
class PrefixStats:
    """Counts since the cache was made: prompts seen and tokens they held, and how many of
    those tokens came from the cache."""

    prompts: int = 0
    prompt_tokens: int = 0
    hits: int = 0
    reused_tokens: int = 0

    @property
    def reused_share(self) -> float:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class PrefixCache:
    """The keys and values of the last prompts, at most ``budget_bytes`` of them (least
    recently used dropped first; a prompt that extends a stored one replaces it).

    Args:
        budget_bytes: Memory for stored keys and values. Qwen2.5-0.5B holds 24.6 KB a
            token in float32, so 512 MiB keeps about 21,000 tokens (a dozen long prompts).
        min_reuse: Shorter shared beginnings are not worth copying (every chat shares
            the template's few system tokens).
    """

    def __init__(self, budget_bytes: int, *, min_reuse: int = 64) -> None:
        if budget_bytes <= 0:
            raise ConfigError(f"budget_bytes must be greater than 0, got {budget_bytes}")
        if min_reuse < 1:
            raise ConfigError(f"min_reuse must be at least 1, got {min_reuse}")
        self.budget_bytes, self.min_reuse = budget_bytes, min_reuse
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next_key = 0
        self._disabled = False
        self.stats = PrefixStats()

    @property
    def nbytes(self) -> int:
        return sum(entry.nbytes for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, ids: Any) -> tuple[Any, int]:
        """A fresh ``DynamicCache`` holding the longest stored beginning of the prompt
        ``ids`` (1-D tensor), and its length; ``(None, 0)`` when none reaches
        ``min_reuse``. At least the prompt's last token is left to run, since its
        logits give the first reply token."""
        import torch
        from transformers import DynamicCache

        self.stats.prompts += 1
        self.stats.prompt_tokens += len(ids)
        best, length = None, 0
        for key, entry in self._entries.items():
            shared = _common_prefix(entry.ids, ids)
            if shared > length:
                best, length = key, shared
        length = min(length, len(ids) - 1)
        if best is None or length < self.min_reuse:
            return None, 0
        entry = self._entries[best]
        self._entries.move_to_end(best)
        cache = DynamicCache()
        with torch.inference_mode():
            for i, (keys, values) in enumerate(entry.layers):
                cache.update(keys[:, :, :length].clone(), values[:, :, :length].clone(), i)
        self.stats.hits += 1
        self.stats.reused_tokens += length
        return cache, length

    def keep(self, ids: Any, cache: Any) -> None:
        """Store the keys and values of the prompt ``ids`` from ``cache``, the cache
        ``generate`` returned (it holds the reply's tokens too: they are cut off)."""
        if self._disabled or cache is None:
            return
        layers = getattr(cache, "layers", None)
        if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
            self._disabled = True
            logger.info("prompt prefixes are not reused: the model's cache is not a plain one")
            return
        n = len(ids)
        if any(layer.keys is None or layer.keys.shape[-2] < n for layer in layers):
            return
        kept = [(layer.keys[:, :, :n].clone(), layer.values[:, :, :n].clone()) for layer in layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in kept)
        if nbytes > self.budget_bytes:
            return
        for key in [
            k for k, e in self._entries.items() if _common_prefix(e.ids, ids) == len(e.ids)
        ]:
            del self._entries[key]  # a prefix of this prompt: the new entry covers it
        self._entries[self._next_key] = _Entry(ids.clone(), kept, nbytes)
        self._next_key += 1
        while self.nbytes > self.budget_bytes:
            self._entries.popitem(last=False)


@functools.cache
def cache_argument() -> str:
    """What transformers' ``generate`` calls the key/value cache it takes and returns:
    ``cache`` in recent releases (5.24 warns that ``past_key_values`` goes in 6.0), else
    ``past_key_values`` (the extra allows transformers from 4.56)."""
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    names = {field.name for field in dataclasses.fields(GenerateDecoderOnlyOutput)}
    return "cache" if "cache" in names else "past_key_values"


def _common_prefix(a: Any, b: Any) -> int:
    """How many leading tokens two 1-D id tensors share."""
    n = min(len(a), len(b))
    differ = (a[:n] != b[:n]).nonzero()
    return int(differ[0, 0]) if len(differ) else n
