"""Edge columns a graph snapshot keeps in fewer bytes, read as the arrays they code.

A snapshot of format 2 (:mod:`~quillian.stores.snapshot`) keeps its weights as one byte
an edge and a table of the values (where they take few values) and its relations only
for the edges that have one, with one bit an edge saying which. Loaded, each is a
:class:`CodedColumn`: indexing it (an edge, a slice, an array of positions) reads only
the codes of those edges from the memory-mapped files, so a snapshot still opens in
milliseconds and processes serving one index share its pages; the whole array
(``np.asarray``, an arithmetic operation, any other array attribute) is decoded on the
first use that needs it and kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = [
    "MAX_WEIGHTS",
    "CodedColumn",
    "coded_relations",
    "coded_weights",
    "relation_bits",
    "weight_codes",
]

#: The most distinct weights kept as codes (finding each takes one pass over them).
MAX_WEIGHTS = 16


class CodedColumn(NDArrayOperatorsMixin):
    """A read-only column of ``n`` values of ``dtype`` that ``at`` reads at given edge
    positions (an array of them) and ``whole`` decodes at once."""

    ndim = 1

    def __init__(
        self,
        n: int,
        dtype: type[np.generic],
        at: Callable[[npt.NDArray[np.intp]], npt.NDArray[Any]],
        whole: Callable[[], npt.NDArray[Any]],
    ) -> None:
        self._n, self.dtype = n, np.dtype(dtype)
        self._at, self._whole = at, whole
        self._decoded: npt.NDArray[Any] | None = None

    @property
    def shape(self) -> tuple[int]:
        return (self._n,)

    @property
    def size(self) -> int:
        return self._n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, key: Any) -> Any:
        if self._decoded is not None:
            return self._decoded[key]
        if isinstance(key, slice):
            return self._at(np.arange(*key.indices(self._n)))
        positions = np.asarray(key)
        if not positions.size and positions.dtype != np.bool_:
            positions = positions.astype(np.intp)  # [] reads no edge, as it does an array's
        if positions.dtype == np.bool_:
            if positions.shape != (self._n,):
                raise IndexError(f"a mask of {positions.shape} over {self._n} values")
            return self._at(np.flatnonzero(positions))
        if positions.dtype.kind not in "iu":
            raise IndexError(f"only integers, slices and masks index a column, not {key!r}")
        if positions.size and (positions.min() < -self._n or positions.max() >= self._n):
            raise IndexError(f"an index outside 0..{self._n - 1}")
        found = self._at(np.where(positions < 0, positions + self._n, positions).reshape(-1))
        return found.reshape(positions.shape)[()]  # a scalar for one integer

    def decoded(self) -> npt.NDArray[Any]:
        """The whole column, decoded once."""
        if self._decoded is None:
            self._decoded = self._whole()
            self._decoded.flags.writeable = False
        return self._decoded

    def __array__(self, dtype: Any = None, copy: Any = None) -> npt.NDArray[Any]:
        whole = self.decoded()
        return whole if dtype is None else whole.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        plain = [np.asarray(i) if isinstance(i, CodedColumn) else i for i in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)

    def __getattr__(self, name: str) -> Any:  # tolist, astype, sum, view ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.decoded(), name)

    def __repr__(self) -> str:
        return f"CodedColumn({self._n} {self.dtype.name})"


def weight_codes(
    weights: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]] | None:
    """``weights`` as one code an edge and the table of the weights the codes stand
    for, where they take at most :data:`MAX_WEIGHTS` values, else None. Values are told
    apart by their bits, so every weight reads back exactly (-0.0 too). An index's graph
    has two (a chunk's or description's tie to an entity weighs 1 or 0.5): the 20 MB
    text's 1.1M weights take 1.1 MB instead of 4.5 MB."""
    bits = np.ascontiguousarray(weights, np.float32).view(np.uint32)
    codes = np.zeros(len(bits), np.uint8)
    table: list[int] = []
    left = np.ones(len(bits), np.bool_)
    same = np.empty(len(bits), np.bool_)
    # each pass in place, code 0 left as the zeros are: 3.7 against 5.0 ms for the 1.1M
    # weights of a 100k-passage graph (the snapshot is written at every update;
    # research/update_stages.py --functions)
    while len(bits) and left[first := int(np.argmax(left))]:
        if len(table) == MAX_WEIGHTS:
            return None
        value = bits[first]
        np.equal(bits, value, out=same)
        if table:
            np.copyto(codes, np.uint8(len(table)), where=same)
        table.append(int(value))
        np.greater(left, same, out=left)  # left and not same
    return codes, np.array(table, np.uint32).view(np.float32)


def coded_weights(codes: npt.NDArray[np.uint8], table: npt.NDArray[np.float32]) -> CodedColumn:
    """The weights :func:`weight_codes` keeps, as a column."""
    values = np.array(table, np.float32)
    return CodedColumn(
        len(codes), np.float32, lambda at: values[codes[at]], lambda: values[np.asarray(codes)]
    )


def relation_bits(
    relations: npt.NDArray[np.int32],
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int32]] | None:
    """The edges with a relation (not -1), one bit an edge in 64-bit big-endian words
    (edge ``i`` is bit ``63 - i % 64`` of word ``i // 64``), and their relations in edge
    order, where that takes fewer bytes than every edge's relation, else None: an
    index's graph ties relations only to the edges between entities (on the 20 MB text,
    40% of its edges: 1.9 MB instead of 4.5 MB)."""
    has = relations != -1
    kept = int(np.count_nonzero(has))
    n_words = (len(relations) + 63) // 64
    if kept * 4 + n_words * 8 >= len(relations) * 4:
        return None
    packed = np.zeros(n_words * 8, np.uint8)
    packed[: (len(has) + 7) // 8] = np.packbits(has)
    return packed.view(">u8"), np.ascontiguousarray(relations[has])


def coded_relations(
    words: npt.NDArray[np.uint64], values: npt.NDArray[np.int32], n_edges: int
) -> CodedColumn:
    """The relations :func:`relation_bits` keeps, as a column (-1 for an edge without
    one). Reading an edge's relation takes its rank among the edges that have one: the
    count of bits set in the words before its word (computed at the load, 4 bytes a word
    of 64 edges) and in its word before it."""
    if len(words) != (n_edges + 63) // 64:
        raise ValueError(f"{len(words)} words of relation bits for {n_edges} edges")
    counts = np.bitwise_count(np.asarray(words)).astype(np.int64)
    before = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else counts
    if int(counts.sum()) != len(values):
        raise ValueError(f"{int(counts.sum())} relation bits set for {len(values)} relations")

    def at(positions: npt.NDArray[np.intp]) -> npt.NDArray[np.int32]:
        word = np.asarray(words[positions >> 6], np.uint64)
        offset = (positions & 63).astype(np.uint64)
        has = ((word >> (np.uint64(63) - offset)) & np.uint64(1)).astype(np.bool_)
        above = np.where(offset == 0, np.uint64(0), word >> ((np.uint64(64) - offset) & 63))
        rank = before[positions >> 6] + np.bitwise_count(above)
        out = np.full(len(positions), -1, np.int32)
        out[has] = values[rank[has]]
        return out

    def whole() -> npt.NDArray[np.int32]:
        has = np.unpackbits(np.asarray(words).view(np.uint8), count=n_edges).view(np.bool_)
        out = np.full(n_edges, -1, np.int32)
        out[has] = values
        return out

    return CodedColumn(n_edges, np.int32, at, whole)
