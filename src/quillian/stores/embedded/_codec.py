"""How an :class:`~quillian.stores.embedded.vectors.ExactVectorIndex` stores its rows.

A float codec stores each vector as it is, in float32 or float16 (``dim`` values a
row). The ``int8`` codec stores each as int8 codes with the row's own scale, the
quantisation of :class:`~quillian.stores.embedded.sketch.Int8Sketch`
(:func:`~quillian.stores.embedded.sketch.quantise`: ``s = max|x| / 127``, ``c = round(x
/ s)``), read back as ``s c``. A row is ``dim + 4`` int8 columns,
the scale's four float32 bytes first, so a segment stays one matrix of rows (merges,
dead rows, the unflushed tail and the bulk writer move rows without knowing what they
hold) and half a float16 row's bytes at 384 dimensions. Scores are computed on the
rows read back, in float32 and then float64 for the best candidates, as for the other
dtypes: the index ranks its rows as read back exactly, and an id added twice, or a
vector added under two ids, reads back the same wherever its rows lie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import InputError
from quillian.stores.embedded.sketch import Int8Sketch, quantise

__all__ = ["Codec", "Decoded"]

F32 = npt.NDArray[np.float32]
#: int8 columns holding a row's float32 scale, before its codes.
_SCALE_COLUMNS = 4


@dataclass(frozen=True)
class Codec:
    """The stored form of rows of ``dim`` float32 values."""

    name: str
    dim: int

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of the stored matrix."""
        return np.dtype(self.name)

    @property
    def width(self) -> int:
        """The stored matrix's columns."""
        return self.dim + (_SCALE_COLUMNS if self.quantized else 0)

    @property
    def quantized(self) -> bool:
        """Whether rows read back only close to what was stored (``int8``)."""
        return self.name == "int8"

    def encode(self, matrix: F32) -> npt.NDArray[Any]:
        """``matrix`` (finite float32) in the stored form; refuses values a float
        dtype cannot hold."""
        if not self.quantized:
            with np.errstate(over="ignore"):
                stored = matrix.astype(self.dtype)
            if not np.isfinite(stored).all():
                raise InputError(f"vectors exceed the {self.name} range", field="vectors")
            return stored
        codes, scale = quantise(matrix)
        out = np.empty((len(matrix), self.width), np.int8)
        out[:, :_SCALE_COLUMNS] = scale.view(np.int8).reshape(-1, _SCALE_COLUMNS)
        out[:, _SCALE_COLUMNS:] = codes
        return out

    def decode(self, stored: npt.NDArray[Any]) -> F32:
        """Rows in the stored form as float32 (a float32 matrix as it is)."""
        if not self.quantized:
            return np.asarray(stored, dtype=np.float32)
        stored = np.asarray(stored)
        return stored[:, _SCALE_COLUMNS:].astype(np.float32) * self.scales(stored)[:, None]

    def scales(self, stored: npt.NDArray[np.int8]) -> F32:
        """The scale of each int8 row of ``stored``."""
        return np.ascontiguousarray(stored[:, :_SCALE_COLUMNS]).view(np.float32).ravel()

    def sketch(self, stored: npt.NDArray[Any]) -> Int8Sketch:
        """The int8 sketch a search of few queries scans: int8 rows' own codes and
        scales, else the floats quantised."""
        if self.quantized:
            return Int8Sketch.of_codes(stored, self.scales(stored), _SCALE_COLUMNS)
        return Int8Sketch.of(stored)

    def scanned(self, stored: npt.NDArray[Any]) -> Any:
        """What a scan reads of ``stored``: a float matrix as it is (a scan casts its
        blocks to float32), int8 rows through :class:`Decoded`."""
        return Decoded(stored, self) if self.quantized else stored


class Decoded:
    """A matrix of stored rows read back as float32 block by block: the shape, length
    and indexing a scan uses, without decoding it whole."""

    def __init__(self, stored: npt.NDArray[Any], codec: Codec) -> None:
        self.stored, self.codec = stored, codec

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.stored), self.codec.dim

    def __len__(self) -> int:
        return len(self.stored)

    def __getitem__(self, rows: Any) -> F32:
        return self.codec.decode(self.stored[rows])
