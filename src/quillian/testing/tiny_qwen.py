"""A tiny randomly initialised Qwen2 model, built in a test (no weights to download):
the architecture of the bundled local model at a few thousand parameters."""

from __future__ import annotations

from typing import Any

__all__ = ["tiny_qwen2"]


def tiny_qwen2(vocab_size: int, *, context: int = 512, seed: int = 0) -> Any:
    """A ``Qwen2ForCausalLM`` with 2 layers of width 32, in eval mode; the same ``seed``
    gives the same weights."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
    )
    return transformers.Qwen2ForCausalLM(config).eval()
