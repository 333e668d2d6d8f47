"""Int8 linear layers for the local model: weights per output channel, activations per token.

Each weight row is scaled by its own absolute maximum (symmetric int8), and each token's
input row by its own, at run time; the int8 product accumulates exactly in int32
(``torch._int_mm``) and is scaled back to float32. This is the vector-wise scheme of
LLM.int8() (Dettmers et al., NeurIPS 2022) and the per-token / per-channel W8A8 of
SmoothQuant (Xiao et al., ICML 2023), without their outlier handling.

Why not torch's dynamic quantization (``torch.ao.quantization.quantize_dynamic``, used
before; deprecated in torch): it gives all tokens of a call one activation scale (and
each weight matrix one scale). LLMs
put activations thousands of times larger than the rest on a few tokens, the first one
above all ("massive activations", Sun et al., COLM 2024), so one scale leaves every
other token of a prompt a handful of int8 levels. On the bundled model
(``python research/llm_local.py``), the token it predicts next at each prompt
position agrees with float32's at 68% of positions with one scale per call and at 97%
with a scale per token, for 7% slower prompt reading, 22% slower generation (still 3.5
times float32's) and 1.1 GB less peak memory.

That speed needs a CPU with an int8 dot-product instruction (AVX512-VNNI, AVX-VNNI,
AMX). Without one, torch's ``_int_mm`` is far slower than a float32 product (on a 2-core
AVX2 AMD EPYC here: 12.8 s against 0.33 s for a 1,664-token prompt through one MLP
projection, 39x); oneDNN's fast AVX2 path adds pairs of u8 x s8 products in int16 and
saturates on 8-bit activations. So :func:`int8_kernel` times both products once per
process, and where ``_int_mm`` loses, the layers multiply the same int8 values as
float32 numbers (``float`` kernel): each product and every partial sum up to 2^24 is an
exact integer in float32, so the result is the int32 sum but for rounding beyond 2^24
(which the int32 result meets too, converted to float32), at float32's speed.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

__all__ = ["Int8Linear", "int8_kernel", "quantize_linear_layers"]

logger = logging.getLogger(__name__)

Kernel = Literal["int", "float"]


@functools.cache
def int8_kernel() -> Kernel:
    """``int`` where torch's int8 product (``torch._int_mm``) beats float32's on this
    CPU for a 64-token input to a 896-wide layer (the bundled model's), else ``float``;
    timed once per process (best of 3; under 0.1 s where int8 is fast)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-127, 128, (64, 896), dtype=torch.int8, generator=gen)
    b = torch.randint(-127, 128, (896, 896), dtype=torch.int8, generator=gen)
    a_float, b_float = a.float(), b.float()

    def best(product: Callable[[], torch.Tensor]) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            product()
            times.append(time.perf_counter() - start)
        return min(times)

    int_s, float_s = best(lambda: torch._int_mm(a, b)), best(lambda: a_float @ b_float)
    kernel: Kernel = "int" if int_s <= float_s else "float"
    logger.info(
        "int8 product %.2f ms, float32 %.2f ms: %s kernel", int_s * 1e3, float_s * 1e3, kernel
    )
    return kernel


class Int8Linear(nn.Module):
    """A frozen :class:`torch.nn.Linear` with int8 weights (one scale per output row) and
    int8 inputs (one scale per token, computed per call); float32 in and out. ``kernel``
    multiplies the int8 values with ``torch._int_mm`` (``int``) or as float32 numbers
    (``float``, which keeps a float32 copy of the int8 weights); None: :func:`int8_kernel`."""

    weight_int8: torch.Tensor
    weight_scale: torch.Tensor
    bias: torch.Tensor | None
    weight_float: torch.Tensor | None

    def __init__(self, linear: nn.Linear, kernel: Kernel | None = None) -> None:
        super().__init__()
        self.kernel: Kernel = kernel or int8_kernel()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127.0
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("weight_int8", torch.round(weight / scale[:, None]).to(torch.int8))
        self.register_buffer("weight_scale", scale)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias)
        # integer values as float32, laid out for x @ w (the float kernel's operand)
        as_float = self.weight_int8.t().float().contiguous() if self.kernel == "float" else None
        self.register_buffer("weight_float", as_float)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, int8 "
            f"({self.kernel} kernel)"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        # a row's largest value maps to 127, so the rounded values need no clamp
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=torch.finfo(torch.float32).tiny)
        scale = scale / 127.0
        quantized = torch.round(rows / scale).to(torch.int8)
        if self.weight_float is not None:
            out = quantized.float() @ self.weight_float
        else:
            out = torch._int_mm(quantized, self.weight_int8.t()).float()
        out.mul_(scale).mul_(self.weight_scale)
        if self.bias is not None:
            out.add_(self.bias)
        return out.reshape(*x.shape[:-1], self.out_features)


def quantize_linear_layers(model: nn.Module, kernel: Kernel | None = None) -> int:
    """Replace every :class:`torch.nn.Linear` inside ``model`` by an :class:`Int8Linear`
    with ``kernel`` (None: :func:`int8_kernel`), in place (each float weight is freed as
    its layer is replaced, unless something else, a tied embedding, holds it); returns
    how many were replaced."""
    kernel = kernel or int8_kernel()
    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, Int8Linear(child, kernel))
                replaced += 1
    return replaced
