"""Entity rows in int8 for the all-entities scan of a large graph.

Ranking every entity as the tail of ``(h, r, ?)`` reads the whole entity matrix: over
Wikidata5M's 4.6M entities at dim 128 that is 2.2 GB of float32 per query, so the scan
is bound by memory, not arithmetic. :class:`Int8Rows` keeps a copy of the rows in int8
with one scale per row (a quarter of the bytes) and scans it with torch's int8-weight
matrix product (bfloat16 queries; the kernel torch uses for int8 language-model weights
on a CPU). Scores then carry a relative error of about 0.3%, so the exact ranking is
recovered by rescoring the best candidates in float32 (:meth:`ComplEx.top_tails
<quillian.components.kge.scoring.ComplEx.top_tails>`).

The kernel crashes the process when the row width is not a multiple of 16 (torch
2.13), so rows and queries are padded with zero columns to one; zeros change no dot
product. Without torch, or where the kernel is missing, the scan stays float32.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Int8Rows"]

logger = logging.getLogger(__name__)

Floats = npt.NDArray[np.float32]
_BLOCK = 1 << 20
_WIDTH_MULTIPLE = 16


class Int8Rows:
    """Rows quantised to int8 with one scale per row: ``values`` ``(n, width)`` int8,
    zero-padded to a width the kernel takes, and ``scales`` ``(n,)`` float32, such that
    row ``i`` is about ``values[i, :dim] * scales[i]``. :meth:`quantize` makes them from
    float32 rows; the constructor takes arrays made before (memory-mapped from a saved
    model, so a process does not quantise 4.3M rows again: 4.7 s)."""

    def __init__(self, values: npt.NDArray[np.int8], scales: Floats) -> None:
        import torch

        kernel = getattr(torch.ops.aten, "_weight_int8pack_mm", None)
        if kernel is None:
            raise RuntimeError("this torch has no int8-weight matrix product")
        if values.ndim != 2 or values.shape[1] % _WIDTH_MULTIPLE or len(scales) != len(values):
            raise ValueError(
                f"int8 rows of shape {values.shape} with {len(scales)} scales: expected "
                f"one scale per row and a width that is a multiple of {_WIDTH_MULTIPLE}"
            )
        self._torch: Any = torch
        self._kernel = kernel
        self.width = int(values.shape[1])
        self.values, self.scales = values, scales
        self._values = torch.from_numpy(values)
        self._scales = torch.from_numpy(np.asarray(scales, dtype=np.float32)).to(torch.bfloat16)

    @classmethod
    def quantize(cls, rows: Floats) -> Int8Rows:
        """``rows`` (n, dim) float32 in int8, quantised in blocks of a million rows, so a
        memory-mapped matrix is read once and never held whole in float32."""
        n, dim = rows.shape
        width = -(-dim // _WIDTH_MULTIPLE) * _WIDTH_MULTIPLE
        values = np.zeros((n, width), dtype=np.int8)
        scales = np.empty(n, dtype=np.float32)
        for start in range(0, n, _BLOCK):
            block = np.asarray(rows[start : start + _BLOCK], dtype=np.float32)
            peak = np.abs(block).max(axis=1)
            scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
            values[start : start + len(block), :dim] = np.rint(block / scale[:, None])
            scales[start : start + len(block)] = scale
        return cls(values, scales)

    @property
    def nbytes(self) -> int:
        return int(self._values.numel() + 2 * self._scales.numel())

    def scores(self, queries: Floats) -> Floats:
        """Approximate ``queries @ rows.T``: shape ``(len(queries), n)``."""
        torch = self._torch
        padded = np.zeros((len(queries), self.width), dtype=np.float32)
        padded[:, : queries.shape[1]] = queries
        with torch.inference_mode():
            out = self._kernel(
                torch.from_numpy(padded).to(torch.bfloat16), self._values, self._scales
            )
        return np.asarray(out.float().numpy(), dtype=np.float32)
