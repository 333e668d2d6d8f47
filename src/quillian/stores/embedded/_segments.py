"""The committed rows of an :class:`~quillian.stores.embedded.vectors.ExactVectorIndex`:
segments of memory-mapped files, with the rows deleted or replaced since marked dead.

A generation is a list of *segments*, each a ``vectors-NNNNNN.npy`` and ``ids-NNNNNN.npy``
pair named by the generation that wrote it, plus ``dead-NNNNNN.npy``: the dead rows,
numbered across the segments in order. A flush writes only its new rows, as one new
segment, and a new (small) dead file; the older segments' files are kept as they are and
go on being named by the next manifest. So a flush costs what it adds, and a reader that
mapped an older generation keeps reading files nobody rewrites.

Segments are merged so that their number stays logarithmic: the trailing segments are
rewritten as one while the one before them holds no more live rows than they do
together (:data:`MERGE_RATIO`), a binary counter that rewrites each row O(log n) times
over its life; all are rewritten as one (compaction) when dead rows pass
:data:`DEAD_SHARE` of the rows or the segments pass :data:`MAX_SEGMENTS`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import IndexIncompleteError
from quillian.stores.embedded._codec import Codec
from quillian.stores.embedded._vecutil import BLOCK
from quillian.stores.embedded.files import Generations
from quillian.stores.mapped import load_mapped

__all__ = ["DEAD_SHARE", "MAX_SEGMENTS", "MERGE_RATIO", "Segments", "merge_start"]

#: Trailing segments are merged while the segment before them holds at most this many
#: times their live rows.
MERGE_RATIO = 1.0
#: Every segment is rewritten as one when dead rows pass this share of the rows.
DEAD_SHARE = 0.25
#: ... or when there would be more segments than this.
MAX_SEGMENTS = 24
#: A float16 or int8 segment of at most this many values is scanned from a float32 copy
#: made on its first scan (8 MiB at most; a larger one is searched through the int8 sketch):
#: cast block by block, a scan cost about 1 ns a value, 0.5-1 ms a query on the dev
#: sets' chunks (``research/vector_dtypes.py``).
WIDEN_MAX_VALUES = 1 << 21

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Segment:
    """One committed segment: the generation that wrote it and its mapped arrays."""

    generation: int
    vectors: npt.NDArray[np.generic]
    ids: I64

    def __len__(self) -> int:
        return len(self.ids)


def merge_start(live: Sequence[int], dead: int, total: int) -> int:
    """The first of the segments (their live rows in ``live``, the last one the rows a
    flush adds) to rewrite as one; ``len(live) - 1`` rewrites only the new one.
    ``dead`` of ``total`` rows are dead."""
    if total and dead > DEAD_SHARE * total:
        return 0
    start = len(live) - 1
    after = live[start]
    while start > 0 and live[start - 1] <= MERGE_RATIO * after:
        start -= 1
        after += live[start]
    return 0 if start >= MAX_SEGMENTS else start


class Segments:
    """The segments of a committed generation and its dead-row mask."""

    def __init__(self, files: Generations, codec: Codec) -> None:
        self.files = files
        self.codec = codec
        self.parts: list[Segment] = []
        self.starts: I64 = np.zeros(1, np.int64)
        self.dead: npt.NDArray[np.bool_] = np.zeros(0, bool)
        self.n_dead = 0
        self._widened: dict[int, npt.NDArray[np.float32]] = {}  # by generation

    def __len__(self) -> int:
        """Rows, dead ones included."""
        return int(self.starts[-1])

    @staticmethod
    def listed(meta: dict[str, Any]) -> list[tuple[int, int]]:
        """``(generation, rows)`` of each segment ``meta`` names (format 1: one)."""
        listed = meta.get("segments")
        if listed is None:  # format 1: one segment, no dead rows
            return [(int(meta["generation"]), int(meta["count"]))]
        return [(int(g), int(n)) for g, n in listed]

    def names(self, meta: dict[str, Any]) -> set[str]:
        """The files of the generation ``meta`` names."""
        names = {
            self.files.path(kind, g).name
            for g, _ in self.listed(meta)
            for kind in ("vectors", "ids")
        }
        if meta.get("dead"):
            names.add(self.files.path("dead", int(meta["generation"])).name)
        return names

    def open(self, meta: dict[str, Any] | None) -> None:
        """Map the segments of ``meta`` (none for a new index) and read its dead rows."""
        self.parts = []
        self._widened = {}
        if meta is not None:
            for generation, rows in self.listed(meta):
                self.parts.append(self._open_segment(generation, rows))
        self.starts = np.cumsum([0, *(len(p) for p in self.parts)], dtype=np.int64)
        self.dead = np.zeros(len(self), bool)
        if meta is not None and meta.get("dead"):
            path = self.files.path("dead", int(meta["generation"]))
            try:
                rows = np.load(path)
            except (OSError, ValueError) as exc:
                raise IndexIncompleteError(f"{path}: cannot read the dead rows: {exc}") from exc
            if len(rows) != int(meta["dead"]) or (len(rows) and rows.max() >= len(self)):
                raise IndexIncompleteError(f"{path}: dead rows disagree with the segments")
            self.dead[rows] = True
        self.n_dead = int(self.dead.sum())

    def _open_segment(self, generation: int, rows: int) -> Segment:
        path = self.files.path("vectors", generation)
        try:
            vectors = load_mapped(path)
            ids = load_mapped(self.files.path("ids", generation))
        except (OSError, ValueError) as exc:
            raise IndexIncompleteError(
                f"{self.files.directory}: cannot read the index: {exc}"
            ) from exc
        expected = (rows, self.codec.width)
        dtype = self.codec.dtype
        if vectors.shape != expected or ids.shape != expected[:1] or vectors.dtype != dtype:
            raise IndexIncompleteError(
                f"{path}: expected {expected} {dtype.name}, "
                f"found {vectors.shape} {vectors.dtype} with {ids.shape[0]} ids"
            )
        return Segment(generation, vectors, ids)

    def rows(self, rows: I64, out: npt.NDArray[np.float32]) -> None:
        """Write the vectors of committed ``rows`` into ``out`` (float32)."""
        which = np.searchsorted(self.starts, rows, side="right") - 1
        for s in np.unique(which).tolist():
            mask = which == s
            out[mask] = self.codec.decode(self.parts[s].vectors[rows[mask] - self.starts[s]])

    def live(self, s: int) -> int:
        """Live rows of segment ``s``."""
        start, stop = int(self.starts[s]), int(self.starts[s + 1])
        return stop - start - int(self.dead[start:stop].sum())

    def searched(self) -> list[tuple[Any, I64, npt.NDArray[np.bool_] | None]]:
        """Each segment as ``(vectors, ids, dead)`` for a scan (``dead`` None when none)."""
        found = []
        for s, part in enumerate(self.parts):
            dead = self.dead[self.starts[s] : self.starts[s + 1]]
            found.append((self._scanned(part), part.ids, dead if dead.any() else None))
        return found

    def _scanned(self, part: Segment) -> Any:
        """The vectors a scan of ``part`` reads: a small float16 or int8 segment's
        float32 copy, a larger int8 one read back block by block."""
        if part.vectors.dtype == np.float32 or part.vectors.size > WIDEN_MAX_VALUES:
            return self.codec.scanned(part.vectors)
        widened = self._widened.get(part.generation)
        if widened is None:
            widened = self._widened[part.generation] = self.codec.decode(part.vectors)
        return widened

    def live_ids(self, start: int = 0) -> I64:
        """The live ids of segments ``start`` on, in row order."""
        parts = [
            np.asarray(p.ids)[~self.dead[self.starts[s] : self.starts[s + 1]]]
            for s, p in enumerate(self.parts)
            if s >= start
        ]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def write_merged(
        self, start: int, tail: tuple[npt.NDArray[np.generic], I64], generation: int
    ) -> tuple[list[Path], int]:
        """Write the live rows of segments ``start`` on, then ``tail``, as the segment of
        ``generation``; returns its two files and its rows (no file where there is no
        row: a segment of none is not written)."""
        vectors_path = self.files.path("vectors", generation)
        ids_path = self.files.path("ids", generation)
        ids = np.concatenate([self.live_ids(start), tail[1]])
        if not len(ids):
            return [], 0
        out = np.lib.format.open_memmap(
            vectors_path, mode="w+", dtype=self.codec.dtype, shape=(len(ids), self.codec.width)
        )
        pos = 0
        for block in self._live_blocks(start):
            out[pos : pos + len(block)] = block
            pos += len(block)
        out[pos:] = tail[0]
        out.flush()
        del out
        np.save(ids_path, ids)
        return [vectors_path, ids_path], len(ids)

    def _live_blocks(self, start: int) -> Iterator[npt.NDArray[np.generic]]:
        step = max(1, BLOCK // self.codec.width)
        for s in range(start, len(self.parts)):
            vectors, offset = self.parts[s].vectors, int(self.starts[s])
            for at in range(0, len(vectors), step):
                stop = min(at + step, len(vectors))
                yield vectors[at:stop][~self.dead[offset + at : offset + stop]]
