"""Embedded vector indexes: exact numpy search (the reference) and FAISS HNSW (extra ``ann``).

Both implement :class:`~quillian.stores.protocols.VectorIndex` and share its semantics:

* **Adding an id that is already indexed replaces its vector** (later wins, also within
  one batch), so re-indexing a document after an interrupted ingestion is idempotent.
* Vectors must be finite and of the index's dimension; ids must be non-negative ints.
  A rejected batch changes nothing.
* ``delete`` removes ids (unknown ones are ignored); ``ids`` lists the indexed ones.
* ``get`` of an id the index does not hold raises :class:`UnknownIdError`, which is both
  a :class:`~quillian.errors.QuillianError` and a :class:`KeyError`.
* ``flush`` persists; ``close`` flushes, then releases the files. One writer per
  directory; the index object itself is not thread-safe for writes (searches may run
  on several threads at once).

On disk an index directory holds ``index.json`` (kind, format, dim, dtype, count, the
current generation and its segments) and the files of its segments,
``vectors-NNNNNN.npy`` and ``ids-NNNNNN.npy`` each, named by the generation that wrote
them, plus ``dead-NNNNNN.npy``, the rows deleted or replaced since
(:mod:`~quillian.stores.embedded._segments`; FAISS: ``hnsw-NNNNNN.faiss``). A flush
writes only what changed, as a new segment and dead list, and commits them by
atomically replacing ``index.json`` (see :mod:`quillian.stores.embedded.files`), which
records each file's size and checksum; a file is never rewritten, so a reader keeps the
generation it mapped. Opening checks every size and the checksum of
files up to :data:`HASH_AT_OPEN` bytes; a larger file is checked on the first use, a
vectors file on the first search, read or flush that rewrites its segment (a damaged
file raises :class:`~quillian.errors.IndexDamagedError`, never a wrong ranking or a
damaged row written again under a fresh checksum). An update that only adds and deletes
(a build's) hashes no vectors file it keeps: that would cost the whole collection.

:class:`ExactVectorWriter` writes a new exact index in one pass when the number of
vectors is known up front (a bulk import), in memory of the order of one batch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Self

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError, IndexIncompleteError, InputError, StoreError
from quillian.stores.embedded._codec import Codec
from quillian.stores.embedded._segments import Segment as Part
from quillian.stores.embedded._segments import Segments, merge_start
from quillian.stores.embedded._vecutil import (
    I64,
    TIE_MARGIN,
    GrowableRows,
    RowLookup,
    Segment,
    UnknownIdError,
    as_ids,
    as_matrix,
    check_dim,
    check_k,
    exact_topk,
    keep_last,
    rescore,
    search_among,
)
from quillian.stores.embedded.faiss_hnsw import FaissHNSWIndex
from quillian.stores.embedded.files import Generations
from quillian.stores.embedded.sketch import Int8Sketch
from quillian.stores.protocols import ids_summary
from quillian.stores.recent import Recent

__all__ = [
    "ExactVectorIndex",
    "ExactVectorWriter",
    "FaissHNSWIndex",
    "UnknownIdError",
    "exact_topk",
]

DTYPES = ("float32", "float16", "int8")
#: The manifest format written: 2 lists segments and dead rows; 1 (one generation's
#: files, no deletes) is still read, and rewritten as 2 by the next flush.
FORMAT = 2

#: A search of at most this many queries scans the int8 sketch (more go through BLAS's
#: matrix product, which reads the floats once for all of them).
SKETCH_QUERIES = 4
#: Committed rows from which a sketch pays (below, a scan is a fraction of a millisecond).
SKETCH_MIN_ROWS = 4096
#: A sketch serves searches for ``k`` up to the committed rows over this (the exact
#: scoring of the candidates, a few times ``k`` rows, must stay small beside the scan).
SKETCH_ROWS_PER_K = 8
#: Scores within this of the k-th best count as tied with it: a search widens its
#: candidates until none lies at the edge, so ties rank by id wherever the rows lie.
TIE_EPS = 1e-5
#: ... up to this many candidates (beyond, rows tied with the k-th at the edge of the
#: candidates are ranked as the float32 scan met them).
TIE_ROWS = 4096
#: Files of at most this many bytes have their checksum checked when the index opens;
#: larger ones on the first search or read (opening stays instant on a large index).
HASH_AT_OPEN = 4 << 20
#: The row lookups of the last committed generations this process opened or wrote, by
#: the collection's directory and the generation's meta (which names each file with
#: its checksum): each update opens the generation its last flush committed, whose
#: lookup took a sort of every id to make again (0.003 s a collection at 100k
#: passages). A handle takes a copy (the sorted arrays shared, never changed in place).
_LOOKUPS: Recent[tuple[Path, str], RowLookup] = Recent(8)
#: The sketches of the first segments this process searched last, by the segment's
#: file and the checksum its generation's meta records for it: a segment an update
#: leaves as it was keeps its sketch, which the first search after each update made
#: again from every row (24 ms of a question at 100k passages, the same for every
#: update of a served index; docs/scale.md, stop 97). Shared: a sketch is never
#: changed once made.
_SKETCHES: Recent[tuple[Path, str], Int8Sketch] = Recent(4)
#: Largest committed matrix sketched, in values (a sketch takes one byte a value, built
#: on the first search: 128 MiB and about 2 s at this size).
SKETCH_MAX_VALUES = 1 << 27


class ExactVectorIndex:
    """Brute-force inner-product search in numpy: exact, and the reference for ANN.

    Args:
        directory: where the index lives; created when missing, reopened when it holds
            an index (its vectors memory-mapped, so opening is instant).
        dim: vector dimension; required for a new index, checked against an existing one.
        dtype: storage type, ``"float32"`` (default), ``"float16"`` (half the memory;
            scores are computed in float32) or ``"int8"`` (a quarter and a row's scale:
            each vector read back as its int8 quantisation, which the index then
            ranks exactly; see :mod:`~quillian.stores.embedded._codec`). Checked
            against an existing index.
        sketch: search few queries through an int8 sketch of the first (largest)
            segment and score its candidates exactly
            (:mod:`~quillian.stores.embedded.sketch`: the same results, a quarter of the
            bytes read; built on the first such search, in memory, for segments of
            :data:`SKETCH_MIN_ROWS` to :data:`SKETCH_MAX_VALUES`). ``False``: every
            search scans the floats.

    Added vectors stay in memory until :meth:`flush`, which writes them as a new
    segment of a new generation, atomically (:mod:`~quillian.stores.embedded._segments`).
    Search covers flushed and unflushed vectors alike. Ties are ranked by the smaller id,
    the best candidates scored again in float64, so copies of a vector tie wherever
    their rows lie (an index grown in steps ranks like one written at once).
    """

    # The committed generation's segments (memory-mapped), with rows deleted or replaced
    # since marked dead; unflushed vectors live in ``_tail``. ``_lookup`` maps an id to
    # its row, counting committed rows first, then tail rows (-1: deleted).
    _base: Segments
    _tail: GrowableRows
    _lookup: RowLookup
    _dirty: bool
    _sketch: Int8Sketch | None  # of the first segment, made on the first sketched search

    def __init__(
        self,
        directory: str | Path,
        dim: int | None = None,
        *,
        dtype: str | None = None,
        sketch: bool = True,
    ) -> None:
        self._files = Generations(Path(directory), "exact", FORMAT, reads=(1,))
        self._use_sketch = sketch
        self._sketch_lock = threading.Lock()
        self._verify_lock = threading.Lock()
        self._unverified: list[Path] = []
        meta = self._files.read()
        if meta is None:
            self._codec = Codec(_check_dtype(dtype or "float32"), check_dim(dim, directory))
            self._generation = 0
            self._files.directory.mkdir(parents=True, exist_ok=True)
        else:
            self._codec = _check_stored(meta, dim, dtype, self._files.directory)
            self._generation = int(meta["generation"])
        self._base = Segments(self._files, self._codec)
        if meta is not None:
            self._files.remove_others(self._base.names(meta))
        self._closed = False
        self._load(meta)

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._codec.dim

    @property
    def dtype(self) -> str:
        """Storage dtype name: ``"float32"``, ``"float16"`` or ``"int8"``."""
        return self._codec.name

    @property
    def directory(self) -> Path:
        """The index directory."""
        return self._files.directory

    @property
    def segments(self) -> int:
        """Committed segments (a flush adds one; merges keep them few)."""
        return len(self._base.parts)

    def __len__(self) -> int:
        return len(self._base) - self._base.n_dead + len(self._tail)

    def __repr__(self) -> str:
        return f"ExactVectorIndex({str(self.directory)!r}, dim={self.dim}, dtype={self.dtype})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        """Add vectors; an id already present gets the new vector (later wins)."""
        self._check_open(vectors=False)
        ids, stored = self._validate(ids, vectors)
        n_base = len(self._base)
        rows = self._lookup.rows_of(ids)
        in_tail = rows >= n_base
        self._tail.overwrite(rows[in_tail] - n_base, stored[in_tail])
        self._kill(rows[(rows >= 0) & ~in_tail])
        new = ~in_tail
        tail_rows = self._tail.append(ids[new], stored[new])
        self._lookup.set(ids[new], tail_rows + n_base)
        self._dirty = True

    def delete(self, ids: npt.ArrayLike) -> None:
        """Remove vectors; unknown ids are ignored. Persisted by :meth:`flush`, which
        writes only the dead rows' list (merges and compaction reclaim their space)."""
        self._check_open(vectors=False)
        ids = np.unique(as_ids(ids))
        rows = self._lookup.rows_of(ids)
        known = rows >= 0
        if not known.any():
            return
        n_base = len(self._base)
        self._kill(rows[known & (rows < n_base)])
        self._lookup.set(ids[known], np.full(int(known.sum()), -1, np.int64))
        if (rows >= n_base).any():  # unflushed: rebuild the tail without them
            keep = ~np.isin(self._tail.ids, ids)
            kept_ids, kept = self._tail.ids[keep].copy(), self._tail.vectors[keep].copy()
            self._tail = self._new_tail()
            self._lookup.set(kept_ids, self._tail.append(kept_ids, kept) + n_base)
        self._dirty = True

    def ids(self) -> npt.NDArray[np.int64]:
        """Every indexed id, ascending."""
        self._check_open(vectors=False)
        return np.sort(np.concatenate([self._base.live_ids(), self._tail.ids]))

    def ids_summary(self) -> tuple[int, int, int, int]:
        """:func:`~quillian.stores.protocols.ids_summary` of every indexed id, none
        sorted (the ids files left unchecked at the open are checked first)."""
        self._check_open(vectors=False)
        return ids_summary(np.concatenate([self._base.live_ids(), self._tail.ids]))

    def search(
        self, queries: npt.ArrayLike, k: int, *, allowed: npt.ArrayLike | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best ids and inner-product scores per query, best first (ties by
        the smaller id).

        ``allowed`` (an extra over the protocol) restricts the search to those ids, all
        of which must be indexed; it costs time in the size of ``allowed``, not the index.
        """
        self._check_open()
        q = as_matrix(queries, self.dim, field="queries")
        k = check_k(k)
        if allowed is not None:
            candidates = np.unique(as_ids(allowed))
            return search_among(q, k, candidates, self.get(candidates))
        k = min(k, len(self))
        if k == 0:
            return np.empty((len(q), 0), np.int64), np.empty((len(q), 0), np.float32)
        wide = min(2 * k + TIE_MARGIN, len(self))
        while True:
            ids, scores = rescore(q, self._candidates(q, wide), self.get, wide)
            tied = scores[:, -1] >= scores[:, k - 1] - TIE_EPS  # ties may lie beyond
            if not tied.any() or wide >= min(len(self), TIE_ROWS):
                return ids[:, :k], scores[:, :k]
            wide = min(len(self), TIE_ROWS, 4 * wide)

    def _candidates(self, q: npt.NDArray[np.float32], wide: int) -> I64:
        """The ``wide`` best ids of each query by the float32 scan (or sketch)."""
        segments = self._base.searched()
        tail: Segment = (self._codec.scanned(self._tail.vectors), self._tail.ids, None)
        sketch = self._sketched(len(q), wide)
        if sketch is None:
            return exact_topk(q, [*segments, tail], wide)[0]
        found = []
        first, rest = segments[0], [*segments[1:], tail]
        for query in q:
            rows = sketch.candidates(query, wide, first[2])
            shortlist: Segment = (first[0][rows], first[1][rows], None)
            found.append(exact_topk(query[None, :], [shortlist, *rest], wide)[0])
        return np.concatenate(found)

    def _sketched(self, n_queries: int, k: int) -> Int8Sketch | None:
        """The first segment's sketch when a search of ``n_queries`` for ``k`` should
        use it (built here the first time), else None."""
        if not self._base.parts:
            return None
        n = len(self._base.parts[0])
        if (
            not self._use_sketch
            or k < 1
            or n_queries > SKETCH_QUERIES
            or n < SKETCH_MIN_ROWS
            or n * self.dim > SKETCH_MAX_VALUES
            or SKETCH_ROWS_PER_K * k > n
        ):
            return None
        with self._sketch_lock:
            if self._sketch is None:
                first = self._base.parts[0]
                key = _sketch_key(self._files.path("vectors", first.generation), self._meta)
                kept = _SKETCHES.get(key) if key is not None else None
                self._sketch = kept if kept is not None else self._codec.sketch(first.vectors)
                if key is not None:
                    _SKETCHES.put(key, self._sketch)
            return self._sketch

    def get(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Vectors (float32) in the order of ``ids``; raises :class:`UnknownIdError`."""
        self._check_open()
        ids = as_ids(ids)
        rows = self._lookup.rows_of(ids)
        if (rows < 0).any():
            raise UnknownIdError(ids[rows < 0])
        n_base = len(self._base)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        in_base = rows < n_base
        if in_base.any():
            part = np.empty((int(in_base.sum()), self.dim), np.float32)
            self._base.rows(rows[in_base], part)
            out[in_base] = part
        out[~in_base] = self._codec.decode(self._tail.vectors[rows[~in_base] - n_base])
        return out

    def contains(self, ids: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether each of ``ids`` is indexed."""
        self._check_open(vectors=False)
        return self._lookup.rows_of(as_ids(ids)) >= 0

    def read_batches(
        self, size: int = 65_536
    ) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
        """Every indexed ``(ids, vectors)`` in row order, ``size`` rows at a time, float32.

        Committed rows are read with plain file reads, not through the memory map, so a
        pass over an index larger than memory costs one batch of memory (bulk builders).
        """
        self._check_open()
        if size <= 0:
            raise ConfigError(f"size must be greater than 0, got {size}")
        for s, part in enumerate(self._base.parts):
            offset = int(self._base.starts[s])
            path = self._files.path("vectors", part.generation)
            with path.open("rb") as handle:
                if np.lib.format.read_magic(handle) == (1, 0):
                    np.lib.format.read_array_header_1_0(handle)
                else:
                    np.lib.format.read_array_header_2_0(handle)
                width = self._codec.width
                for start in range(0, len(part), size):
                    stop = min(start + size, len(part))
                    block = np.fromfile(handle, self._codec.dtype, (stop - start) * width)
                    if len(block) != (stop - start) * width:
                        raise IndexIncompleteError(f"{path}: shorter than its header says")
                    live = ~self._base.dead[offset + start : offset + stop]
                    vectors = self._codec.decode(block.reshape(-1, width)[live])
                    yield np.asarray(part.ids[start:stop])[live], vectors
        for start in range(0, len(self._tail), size):
            block = self._codec.decode(self._tail.vectors[start : start + size])
            yield self._tail.ids[start : start + size].copy(), block

    def flush(self) -> None:
        """Persist every change: write the added vectors as a new segment (merged with
        the trailing ones, see :func:`~quillian.stores.embedded._segments.merge_start`)
        and the dead rows, then commit the new generation atomically. The segments kept
        are neither rewritten nor hashed again."""
        self._check_open(vectors=False)
        if not self._dirty:
            return
        base, generation = self._base, self._generation + 1
        live = [base.live(s) for s in range(len(base.parts))] + [len(self._tail)]
        start = merge_start(live, base.n_dead, len(base) + len(self._tail))
        rewritten = set(self._segment_files(base.parts[start:]))
        self._verify(rewritten.__contains__)  # their rows are read into the new segment
        written: list[Path] = []
        segments = [(p.generation, len(p)) for p in base.parts[:start]]
        if start < len(base.parts) or len(self._tail):
            written, rows = base.write_merged(
                start, (self._tail.vectors, self._tail.ids), generation
            )
            if rows:  # none where every merged row was deleted
                segments.append((generation, rows))
        dead = np.flatnonzero(base.dead[: base.starts[start]])
        if len(dead):
            np.save(self._files.path("dead", generation), dead)
            written.append(self._files.path("dead", generation))
        meta = {
            "generation": generation,
            "dim": self.dim,
            "dtype": self.dtype,
            "count": len(self),
            "segments": [list(s) for s in segments],
            "dead": len(dead),
        }
        old = self._meta.get("files") or {}
        retained = {path.name for path in self._segment_files(base.parts[:start])}
        meta = self._files.commit(meta, written, kept={n: old.get(n) for n in retained})
        self._generation = generation
        self._reload(meta, start)

    def close(self) -> None:
        """Flush, then release the memory-mapped files; closing twice is harmless."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._sketch = None
        self._base = Segments(self._files, self._codec)
        self._tail = self._new_tail()

    def _segment_files(self, parts: Sequence[Part]) -> list[Path]:
        """The vectors and ids files of the segments ``parts``."""
        return [self._files.path(f, p.generation) for p in parts for f in ("vectors", "ids")]

    def _kill(self, rows: I64) -> None:
        """Mark committed ``rows`` dead."""
        if len(rows):
            self._base.dead[rows] = True
            self._base.n_dead = int(self._base.dead.sum())

    def _load(self, meta: dict[str, Any] | None) -> None:
        """(Re)open the committed generation memory-mapped, with nothing pending."""
        self._meta = meta or {}
        self._unverified = [] if meta is None else self._files.verify(meta, hash_up_to=HASH_AT_OPEN)
        self._base.open(meta)
        self._tail = self._new_tail()
        lookup = _recalled(self.directory, meta)
        if lookup is None:
            live = np.flatnonzero(~self._base.dead)
            ids = [np.asarray(p.ids) for p in self._base.parts]
            all_ids = np.concatenate(ids) if ids else np.empty(0, np.int64)
            lookup = RowLookup.of(all_ids[live], live)
            _remember(self.directory, meta, lookup)
        self._lookup = lookup
        self._dirty = meta is None
        self._sketch = None

    def _reload(self, meta: dict[str, Any], start: int) -> None:
        """After a flush that rewrote segments ``start`` on: map the new generation and
        renumber only the rewritten rows (all, after a compaction)."""
        if start == 0:
            self._load(meta)
            self._unverified = []  # written and hashed just now
            return
        n_kept = int(self._base.starts[start])
        self._meta = meta
        self._base.open(meta)
        if len(self._base.parts) > start:
            new = np.asarray(self._base.parts[start].ids)
            self._lookup.set(new, np.arange(len(new), dtype=np.int64) + n_kept)
        _remember(self.directory, meta, self._lookup)
        self._tail = self._new_tail()
        self._dirty = False

    def _new_tail(self) -> GrowableRows:
        return GrowableRows(self._codec.width, self._codec.dtype)

    def _validate(
        self, ids: npt.ArrayLike, vectors: npt.ArrayLike
    ) -> tuple[I64, npt.NDArray[np.generic]]:
        ids = as_ids(ids)
        matrix = as_matrix(vectors, self.dim)
        if len(ids) != len(matrix):
            raise InputError(f"{len(ids)} ids but {len(matrix)} vectors", field="ids")
        ids, matrix = keep_last(ids, matrix)
        return ids, self._codec.encode(matrix)

    def verify(self) -> None:
        """Check now every checksum left from the open, each file read (a build
        repairing damaged files reads nothing unchecked, and takes no digest this
        process remembered)."""
        self._check_open(known=False)

    def _check_open(self, *, vectors: bool = True, known: bool = True) -> None:
        """Refuse a closed index; on the first use after opening, check the checksums
        left from the open (:data:`HASH_AT_OPEN`): those of vectors files only where
        ``vectors`` (the use reads vectors). ``known``: a digest this process remembered
        for a file as it is now is taken, not read again
        (:func:`~quillian.stores.integrity.check_digest`): a served index opens each
        update's generation, whose unchanged segments it read at the last (46 MB at
        100k passages, 17 ms of the first question after each update)."""
        if self._closed:
            raise StoreError(f"{self.directory}: the vector index is closed")
        self._verify(lambda path: vectors or not _holds_vectors(path), known)

    def _verify(self, now: Callable[[Path], bool], known: bool = True) -> None:
        """Check the checksums left from the open of the files ``now`` picks."""
        if self._unverified:
            with self._verify_lock:
                picked = [p for p in self._unverified if now(p)]
                if picked:
                    self._files.verify_later(self._meta, picked, known=known)
                    self._unverified = [p for p in self._unverified if p not in picked]


class ExactVectorWriter:
    """Writes a new :class:`ExactVectorIndex` in one pass, for bulk builders.

    Args:
        directory: where the index goes; must not hold an index yet.
        dim: vector dimension.
        count: the number of vectors that will be appended, exactly.
        dtype: storage type, ``"float32"``, ``"float16"`` or ``"int8"``.

    The ``.npy`` header is written first; each :meth:`append` then adds its rows with
    plain file writes (no memory map, so memory stays of the order of one batch), and
    :meth:`commit` checks that ``count`` distinct ids arrived and commits the generation
    at once, atomically. Until then the directory holds no committed index: an
    interrupted write cannot be opened as a complete one, and its files are removed by
    :meth:`abort` or by the next writer. Used as a context manager, it commits on a
    normal exit and aborts on an exception.
    """

    GENERATION = 1

    def __init__(
        self, directory: str | Path, dim: int, count: int, *, dtype: str = "float32"
    ) -> None:
        self._files = Generations(Path(directory), "exact", FORMAT, reads=(1,))
        if self._files.read() is not None:
            raise StoreError(f"{directory}: already holds an index; a bulk write needs a new one")
        self._codec = codec = Codec(_check_dtype(dtype), check_dim(dim, directory))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError(f"count must be a non-negative integer, got {count!r}")
        self._count = count
        self._written = 0
        self._files.directory.mkdir(parents=True, exist_ok=True)
        self._files.remove_stale(0)  # files of an earlier, abandoned write
        self._paths = [self._files.path(name, self.GENERATION) for name in ("vectors", "ids")]
        self._handles: list[BinaryIO] = []
        for path, dtype_, shape in zip(
            self._paths,
            (codec.dtype, np.dtype(np.int64)),
            ((count, codec.width), (count,)),
            strict=True,
        ):
            handle = path.open("wb")
            self._handles.append(handle)
            np.lib.format.write_array_header_1_0(
                handle,
                {
                    "descr": np.lib.format.dtype_to_descr(dtype_),
                    "fortran_order": False,
                    "shape": shape,
                },
            )
        self._state = "open"

    @property
    def directory(self) -> Path:
        """The index directory."""
        return self._files.directory

    @property
    def written(self) -> int:
        """Vectors appended so far."""
        return self._written

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def append(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        """Write the next rows; ids must be distinct across the whole index."""
        self._check_open()
        ids = as_ids(ids)
        matrix = as_matrix(vectors, self._codec.dim)
        if len(ids) != len(matrix):
            raise InputError(f"{len(ids)} ids but {len(matrix)} vectors", field="ids")
        if self._written + len(ids) > self._count:
            raise InputError(
                f"{self._written + len(ids)} vectors exceed the announced {self._count}",
                field="vectors",
            )
        stored = self._codec.encode(matrix)
        self._handles[0].write(np.ascontiguousarray(stored).data)
        self._handles[1].write(np.ascontiguousarray(ids).data)
        self._written += len(ids)

    def commit(self) -> None:
        """Close the files and commit the index; refuses a short or duplicated write
        (and then removes the files)."""
        if self._state == "committed":
            return
        self._check_open()
        self._close_files()
        try:
            self._check_complete()
        except BaseException:
            self.abort()
            raise
        meta = {
            "generation": self.GENERATION,
            "dim": self._codec.dim,
            "dtype": self._codec.name,
            "count": self._count,
            "segments": [[self.GENERATION, self._count]],
            "dead": 0,
        }
        self._files.commit(meta, self._paths)
        self._state = "committed"

    def abort(self) -> None:
        """Close and remove the files written so far; nothing is committed."""
        if self._state == "committed":
            raise StoreError(f"{self.directory}: the bulk write is already committed")
        self._close_files()
        self._state = "aborted"
        for path in self._paths:
            path.unlink(missing_ok=True)

    def _check_complete(self) -> None:
        if self._written != self._count:
            raise InputError(
                f"{self.directory}: {self._written} of the announced {self._count} "
                "vectors were written",
                field="vectors",
            )
        ids = np.sort(np.load(self._paths[1]))
        repeated = ids[1:][ids[1:] == ids[:-1]]
        if len(repeated):
            raise InputError(f"id {int(repeated[0])} was written twice", field="ids")

    def _close_files(self) -> None:
        for handle in self._handles:
            handle.close()

    def _check_open(self) -> None:
        if self._state != "open":
            raise StoreError(f"{self.directory}: the bulk write is {self._state}")


def _holds_vectors(path: Path) -> bool:
    return path.name.startswith("vectors-")


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def _check_stored(
    meta: dict[str, object], dim: int | None, dtype: str | None, directory: Path
) -> Codec:
    """The stored dim and dtype's codec, refusing a different one asked for explicitly."""
    stored_dim, stored_dtype = int(meta["dim"]), str(meta["dtype"])  # type: ignore[call-overload]
    if dim is not None and dim != stored_dim:
        raise ConfigError(f"{directory}: index has dim {stored_dim}, asked for dim {dim}")
    if dtype is not None and dtype != stored_dtype:
        raise ConfigError(f"{directory}: index stores {stored_dtype}, asked for {dtype}")
    return Codec(_check_dtype(stored_dtype), stored_dim)


def _lookup_key(directory: Path, meta: dict[str, Any] | None) -> tuple[Path, str] | None:
    if meta is None:
        return None
    return directory.absolute(), json.dumps(meta, sort_keys=True)


def _sketch_key(path: Path, meta: dict[str, Any]) -> tuple[Path, str] | None:
    """What names the bytes of the segment file ``path``: its place and the record of it
    (size and checksum) that ``meta`` lists; None where ``meta`` lists none."""
    record = (meta.get("files") or {}).get(path.name)
    if not record:
        return None
    return path.absolute(), json.dumps(record, sort_keys=True)


def _recalled(directory: Path, meta: dict[str, Any] | None) -> RowLookup | None:
    """A copy of the lookup kept for the generation ``meta`` commits (None: none)."""
    key = _lookup_key(directory, meta)
    found = _LOOKUPS.get(key) if key is not None else None
    return found.copy() if found is not None else None


def _remember(directory: Path, meta: dict[str, Any] | None, lookup: RowLookup) -> None:
    """Keep a copy of ``lookup``, the rows of the generation ``meta`` commits."""
    key = _lookup_key(directory, meta)
    if key is None:
        return
    _LOOKUPS.put(key, lookup.copy())
