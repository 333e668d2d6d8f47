"""An immutable sequence held as blocks, patched at the cost of the blocks it touches.

The chunk catalog (:mod:`.chunk_catalog`) keeps every processed chunk's id, document,
position and title in index order, and an update puts a few documents' rows in among
them. Held as lists, each update copied every column whole (3 ms a delete at 100k
passages), and Python's garbage collector walked the lists' items at each of its full
collections (5.9 ms a delete at 100k, 1.6 ms at 20k: ``research/gc_walks.py``). A
:class:`Blocks` holds its values as tuples of at most :data:`SIZE`; a patch
(:meth:`Blocks.spliced`) makes again only the blocks its changes fall in and shares the
others with the sequence it was patched from; and the collector stops walking a tuple
of strings or numbers once it has seen it (it untracks it), so it walks a few hundred
blocks, not every value.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

__all__ = ["SIZE", "Blocks"]

T = TypeVar("T")

#: Values in a block made whole (a block made again by a patch may hold fewer).
SIZE = 1024


class Blocks(Sequence[T]):
    """Values in order, held as tuples (blocks); equal to any list or tuple of the same
    values. Reading one value finds its block by a binary search among the blocks'
    starts; iterating goes block by block."""

    __slots__ = ("_blocks", "_n", "_starts")

    def __init__(self, blocks: Iterable[tuple[T, ...]] = ()) -> None:
        self._blocks = tuple(block for block in blocks if block)
        starts = list(itertools.accumulate((len(b) for b in self._blocks), initial=0))
        self._n = starts.pop()
        self._starts = starts  # each block's first value's place

    @classmethod
    def of(cls, values: Iterable[T]) -> Blocks[T]:
        """The sequence of ``values``, in blocks of :data:`SIZE`."""
        if isinstance(values, Blocks):
            return values
        values = values if isinstance(values, list | tuple) else list(values)
        return cls(tuple(values[at : at + SIZE]) for at in range(0, len(values), SIZE))

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, at: int) -> T: ...
    @overload
    def __getitem__(self, at: slice) -> list[T]: ...
    def __getitem__(self, at: int | slice) -> T | list[T]:
        if isinstance(at, slice):
            start, stop, step = at.indices(self._n)
            if step != 1:
                return list(self)[at]
            return self._between(start, stop)
        if at < 0:
            at += self._n
        if not 0 <= at < self._n:
            raise IndexError("Blocks index out of range")
        block = bisect.bisect_right(self._starts, at) - 1
        return self._blocks[block][at - self._starts[block]]

    def _between(self, start: int, stop: int) -> list[T]:
        """The values at ``start:stop`` (``0 <= start``, ``stop <= len``)."""
        out: list[T] = []
        if start >= stop:
            return out
        block = bisect.bisect_right(self._starts, start) - 1
        while start < stop:
            first = self._starts[block]
            values = self._blocks[block]
            end = min(stop, first + len(values))
            out += values[start - first : end - first]
            start, block = end, block + 1
        return out

    def __iter__(self) -> Iterator[T]:
        return itertools.chain.from_iterable(self._blocks)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Blocks):
            return self._n == other._n and all(a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, list | tuple):
            return self._n == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"Blocks({list(self)!r})"

    @property
    def blocks(self) -> tuple[tuple[T, ...], ...]:
        """The blocks, in order (none empty)."""
        return self._blocks

    def spliced(self, edits: Sequence[tuple[int, int, Sequence[T]]]) -> Blocks[T]:
        """This sequence with, for each edit ``(low, high, values)``, its values
        ``low:high`` replaced by ``values`` (edits in order of ``low``, none
        overlapping another; ``low == high`` puts values in before ``low``). Only the
        blocks an edit falls in are made again (in blocks of :data:`SIZE`); the others
        are this sequence's own. Where the patches have left more than twice the
        blocks a sequence of this length is made of, every block is made again."""
        if not self._blocks:
            return Blocks.of([v for _, _, values in edits for v in values])
        touched = [False] * len(self._blocks)
        last = self._n - 1
        previous = 0
        for low, high, _ in edits:
            if not previous <= low <= high <= self._n:
                raise ValueError(f"edit {low}:{high} out of order or out of 0:{self._n}")
            previous = high
            first = bisect.bisect_right(self._starts, min(low, last)) - 1
            end = bisect.bisect_right(self._starts, min(max(high - 1, low), last)) - 1
            touched[first : end + 1] = [True] * (end + 1 - first)
        out: list[tuple[T, ...]] = []
        at = 0  # the next edit
        for touch, run in itertools.groupby(range(len(self._blocks)), touched.__getitem__):
            members = list(run)
            if not touch:
                out += (self._blocks[b] for b in members)
                continue
            start = self._starts[members[0]]
            values: list[T] = [v for b in members for v in self._blocks[b]]
            end = start + len(values)
            mine = []
            while at < len(edits) and edits[at][0] <= end and (edits[at][0] < end or end > last):
                mine.append(edits[at])
                at += 1
            for low, high, new in reversed(mine):
                values[low - start : high - start] = new
            out += (tuple(values[i : i + SIZE]) for i in range(0, len(values), SIZE))
        patched = Blocks(out)
        if len(patched._blocks) > 2 * (patched._n // SIZE) + 16:
            return Blocks.of(list(patched))
        return patched

    def __reduce__(self) -> tuple[Any, ...]:
        return (Blocks, (self._blocks,))
