"""Int8 linear layers with per-channel weights and per-token activations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

from quillian.components.llm.quantize import (  # noqa: E402
    Int8Linear,
    int8_kernel,
    quantize_linear_layers,
)


@pytest.fixture(autouse=True)
def _no_grad() -> Iterator[None]:
    with torch.no_grad():
        yield


def relative_error(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    return (got - want).norm(dim=-1) / want.norm(dim=-1)


def test_an_int8_layer_matches_its_float_layer_within_int8_precision() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    x = torch.randn(3, 5, 64)
    layer = Int8Linear(linear)
    got, want = layer(x), linear(x)
    assert got.shape == want.shape == (3, 5, 48) and got.dtype == torch.float32
    assert float(relative_error(got, want).max()) < 0.02
    assert layer.weight_int8.dtype == torch.int8 and layer.weight_int8.shape == (48, 64)
    # every weight row reaches 127 in absolute value: the scale is the row's own
    assert bool((layer.weight_int8.abs().amax(dim=1) == 127).all())


def test_a_token_with_huge_activations_costs_the_other_tokens_nothing() -> None:
    """The reason for per-token scales: one token's outlier (as the first token of an
    LLM prompt carries) must not coarsen the quantization of the others."""
    torch.manual_seed(1)
    linear = torch.nn.Linear(32, 16, bias=False)
    layer = Int8Linear(linear)
    quiet = torch.randn(4, 32)
    loud = torch.cat([quiet[:1] * 5000.0, quiet[1:]])
    alone, together = layer(quiet[1:]), layer(loud)[1:]
    assert torch.equal(alone, together)
    assert float(relative_error(together, linear(quiet[1:])).max()) < 0.02


def test_zero_rows_and_no_bias_stay_exact() -> None:
    linear = torch.nn.Linear(8, 4, bias=False)
    with torch.no_grad():
        linear.weight[1] = 0.0
    layer = Int8Linear(linear)
    out = layer(torch.zeros(2, 8))
    assert torch.equal(out, torch.zeros(2, 4))
    assert torch.equal(layer(torch.ones(1, 8))[:, 1], torch.zeros(1))
    assert layer.bias is None


def test_every_linear_layer_of_a_network_is_replaced_in_place() -> None:
    torch.manual_seed(2)
    net = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(32, 8))
    )
    x = torch.randn(6, 16)
    want = net(x)
    assert quantize_linear_layers(net) == 2
    assert [type(m).__name__ for m in net.modules()].count("Int8Linear") == 2
    assert not any(isinstance(m, torch.nn.Linear) for m in net.modules())
    assert float(relative_error(net(x), want).max()) < 0.05
    assert "int8" in repr(net[0])


@pytest.mark.parametrize("kernel", ["int", "float"])
def test_both_kernels_give_the_int32_sum_of_the_same_int8_values(kernel: str) -> None:
    """The float kernel multiplies the int8 values as float32 numbers: below 2^24 every
    partial sum is an exact integer, so a layer 896 wide (the bundled model's: at most
    127 * 127 * 896 < 2^24) gives what the int32 product gives, bit for bit."""
    torch.manual_seed(3)
    linear = torch.nn.Linear(896, 40)
    x = torch.randn(2, 7, 896) * torch.logspace(-2, 3, 7)[:, None]  # tokens of every size
    want = Int8Linear(linear, "int")(x)
    layer = Int8Linear(linear, kernel)
    assert torch.equal(layer(x), want)
    assert f"({kernel} kernel)" in repr(layer)
    assert (layer.weight_float is None) == (kernel == "int")
    assert quantize_linear_layers(torch.nn.Sequential(linear), kernel) == 1


def test_the_kernel_is_chosen_once_by_timing_both_products() -> None:
    assert int8_kernel() in ("int", "float")
    assert int8_kernel() is int8_kernel()  # timed once per process
