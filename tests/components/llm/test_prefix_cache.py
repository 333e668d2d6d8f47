"""The prompt-prefix cache, on a tiny randomly initialised Qwen2 model built in the test."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from quillian.components.llm.base import ChatMessage, Decoding
from quillian.components.llm.local import LocalChatModel, _Loaded
from quillian.components.llm.prefix_cache import PrefixCache, cache_argument
from quillian.errors import ConfigError
from quillian.testing.tiny_qwen import tiny_qwen2

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 64


@pytest.fixture(scope="module")
def tiny() -> Any:
    return tiny_qwen2(VOCAB)


def prompt(*tail: int, length: int = 40, seed: int = 1) -> Any:
    head = torch.randint(1, VOCAB, (length,), generator=torch.Generator().manual_seed(seed))
    return torch.cat([head, torch.tensor(tail, dtype=torch.long)])


def generate(model: Any, ids: Any, cache: PrefixCache | None) -> tuple[list[int], int]:
    """Greedy reply ids to ``ids``, and how many prompt tokens came from ``cache``."""
    past, reused = cache.take(ids) if cache is not None else (None, 0)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids[None],
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=8,
            do_sample=False,
            pad_token_id=0,
            **{cache_argument(): past},
            return_dict_in_generate=True,
        )
    if cache is not None:
        cache.keep(ids, getattr(out, cache_argument()))
    return out.sequences[0, len(ids) :].tolist(), reused


def test_a_reused_prefix_gives_the_reply_of_the_whole_prompt(tiny: Any) -> None:
    cache = PrefixCache(1 << 20, min_reuse=4)
    prompts = [prompt(5, 6, 7), prompt(5, 6, 8, 9), prompt(1, 2), prompt(5, 6, 7)]
    replies = [generate(tiny, ids, cache) for ids in prompts]
    assert [reused for _, reused in replies] == [0, 42, 40, 42]
    assert [reply for reply, _ in replies] == [generate(tiny, ids, None)[0] for ids in prompts]
    stats = cache.stats
    assert (stats.prompts, stats.hits, stats.reused_tokens) == (4, 3, 124)
    assert stats.prompt_tokens == 43 + 44 + 42 + 43
    assert stats.reused_share == pytest.approx(124 / 172)


def test_the_same_prompt_again_runs_only_its_last_token(tiny: Any) -> None:
    cache = PrefixCache(1 << 20, min_reuse=4)
    ids = prompt(3)
    first, _ = generate(tiny, ids, cache)
    again, reused = generate(tiny, ids, cache)
    assert (again, reused) == (first, len(ids) - 1)


def test_a_short_shared_beginning_is_not_reused(tiny: Any) -> None:
    cache = PrefixCache(1 << 20, min_reuse=64)
    generate(tiny, prompt(5), cache)
    assert generate(tiny, prompt(6), cache)[1] == 0  # 40 shared tokens < 64
    assert cache.stats.hits == 0 and len(cache) == 2


def test_an_extended_prompt_replaces_its_prefix_and_the_budget_drops_the_oldest(
    tiny: Any,
) -> None:
    cache = PrefixCache(1 << 20, min_reuse=4)
    generate(tiny, prompt(1), cache)
    generate(tiny, prompt(1, 2, 3), cache)  # extends the first: one entry left
    assert len(cache) == 1
    per_prompt = cache.nbytes
    small = PrefixCache(int(per_prompt * 2.5), min_reuse=4)  # room for two
    for seed in (10, 20, 30):
        generate(tiny, prompt(1, length=42, seed=seed), small)
    assert len(small) == 2 and small.nbytes <= small.budget_bytes
    # 10 was dropped; using 20 leaves 30 the least recently used, dropped next
    assert generate(tiny, prompt(2, length=42, seed=20), small)[1] == 42
    assert generate(tiny, prompt(2, length=42, seed=30), small)[1] == 0
    assert generate(tiny, prompt(2, length=42, seed=10), small)[1] == 0


def test_a_cache_that_is_not_plain_turns_reuse_off() -> None:
    cache = PrefixCache(1 << 20, min_reuse=1)
    sliding = SimpleNamespace(layers=[SimpleNamespace(keys=None, values=None)])
    cache.keep(torch.arange(5), sliding)
    cache.keep(torch.arange(5), None)
    assert len(cache) == 0 and cache.take(torch.arange(6)) == (None, 0)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="budget_bytes must be greater than 0, got 0"):
        PrefixCache(0)
    with pytest.raises(ConfigError, match="min_reuse must be at least 1"):
        PrefixCache(10, min_reuse=0)
    with pytest.raises(ConfigError, match="prefix_cache_mb must be 0 or more, got -1"):
        LocalChatModel(prefix_cache_mb=-1)
    assert LocalChatModel(prefix_cache_mb=0).prefix_cache is None


class WordTokenizer:
    """One token per word, ids by hash, as torch tensors (what ``generate`` reads)."""

    pad_token_id = 0
    eos_token_id = VOCAB - 1
    chat_template = "words"

    def apply_chat_template(self, chat: list[dict[str, str]], **_: Any) -> dict[str, Any]:
        words = " ".join(m["content"] for m in chat).split()
        ids = torch.tensor([[1 + sum(map(ord, w)) % (VOCAB - 2) for w in words]])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return " ".join(f"w{i}" for i in ids)


def test_the_local_model_reuses_prefixes_across_chats(tiny: Any) -> None:
    """Through :meth:`LocalChatModel.chat`: the second question over the same passage runs
    only its own words, and answers as a model with no cache does."""
    passage = " ".join(f"fact{i} holds" for i in range(60))

    def model(mb: int) -> LocalChatModel:
        local = LocalChatModel(prefix_cache_mb=mb)
        local._loaded = _Loaded(tiny, WordTokenizer(), 512, frozenset({VOCAB - 1}))
        return local

    def replies(local: LocalChatModel) -> list[str]:
        asks = (f"{passage} question {q}" for q in ("one", "two"))
        decoding = Decoding(max_tokens=6)
        return [
            asyncio.run(local.chat([ChatMessage("user", text)], decoding=decoding)).text
            for text in asks
        ]

    cached, plain = model(16), model(0)
    assert replies(cached) == replies(plain)
    assert cached.prefix_cache is not None
    assert cached.prefix_cache.stats.reused_tokens == 121  # 120 passage words + "question"
