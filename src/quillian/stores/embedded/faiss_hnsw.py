"""Approximate inner-product search with a FAISS HNSW graph (optional extra ``ann``).

FAISS is imported when an index is created, never at module import; without it,
:class:`~quillian.errors.MissingExtraError` names the extra to install.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from quillian.errors import (
    ConfigError,
    IndexIncompleteError,
    InputError,
    MissingExtraError,
    StoreError,
)
from quillian.stores.embedded._vecutil import (
    GrowableIds,
    RowLookup,
    UnknownIdError,
    as_ids,
    as_matrix,
    check_dim,
    check_k,
    keep_last,
    search_among,
)
from quillian.stores.embedded.files import Generations

__all__ = ["FaissHNSWIndex"]


def import_faiss() -> ModuleType:
    """The ``faiss`` module, or :class:`MissingExtraError` naming the ``ann`` extra."""
    try:
        return importlib.import_module("faiss")
    except ImportError as exc:
        raise MissingExtraError("faiss-cpu", "ann") from exc


class FaissHNSWIndex:
    """Approximate search over a FAISS ``IndexHNSWFlat`` (inner product), persisted.

    Args:
        directory: where the index lives; created when missing, loaded when it holds one.
        dim: vector dimension; required for a new index, checked against an existing one.
        m: HNSW neighbours per node (memory and recall grow with it). New indexes only.
        ef_construction: HNSW build beam width. New indexes only.
        ef_search: HNSW search beam width (raised to ``k`` when smaller); applies always.

    The graph lives in memory and is written whole by :meth:`flush`. HNSW cannot delete,
    so a replaced vector stays in the graph, marked dead and filtered out of results;
    its memory is reclaimed only by rebuilding the index. When the filter leaves a query
    fewer than ``k'`` results, its row is padded with id -1 and score -inf.
    """

    # ``_rows`` holds the id of each graph row, -1 for a dead (replaced) row.
    _index: Any
    _rows: GrowableIds
    _n_dead: int
    _m: int
    _ef_construction: int
    _generation: int
    _dirty: bool

    def __init__(
        self,
        directory: str | Path,
        dim: int | None = None,
        *,
        m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
    ) -> None:
        self._faiss = import_faiss()
        for name, value in (
            ("m", m),
            ("ef_construction", ef_construction),
            ("ef_search", ef_search),
        ):
            if value <= 0:
                raise ConfigError(f"{name} must be greater than 0, got {value}")
        self._files = Generations(Path(directory), "faiss-hnsw")
        self.ef_search = ef_search
        meta = self._files.read()
        if meta is None:
            self._new(check_dim(dim, directory), m, ef_construction)
        else:
            self._open(meta, dim)
        self._lookup = RowLookup(self._rows.array)
        self._selector: tuple[Any, npt.NDArray[np.uint8]] | None = None
        self._closed = False

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self._index.d)

    @property
    def directory(self) -> Path:
        """The index directory."""
        return self._files.directory

    def __len__(self) -> int:
        return len(self._rows) - self._n_dead

    def __repr__(self) -> str:
        return f"FaissHNSWIndex({str(self.directory)!r}, dim={self.dim}, m={self._m})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        """Add vectors; an id already present gets the new vector (later wins)."""
        self._check_open()
        ids = as_ids(ids)
        matrix = as_matrix(vectors, self.dim)
        if len(ids) != len(matrix):
            raise InputError(f"{len(ids)} ids but {len(matrix)} vectors", field="ids")
        ids, matrix = keep_last(ids, matrix)
        old = self._lookup.rows_of(ids)
        self._index.add(matrix)
        self._rows.array[old[old >= 0]] = -1
        self._n_dead += int((old >= 0).sum())
        self._lookup.set(ids, self._rows.append(ids))
        self._selector = None
        self._dirty = True

    def delete(self, ids: npt.ArrayLike) -> None:
        """Remove vectors (their graph rows are marked dead, as replaced ones are);
        unknown ids are ignored."""
        self._check_open()
        ids = np.unique(as_ids(ids))
        rows = self._lookup.rows_of(ids)
        known = rows >= 0
        if not known.any():
            return
        self._rows.array[rows[known]] = -1
        self._n_dead += int(known.sum())
        self._lookup.set(ids[known], np.full(int(known.sum()), -1, np.int64))
        self._selector = None
        self._dirty = True

    def ids(self) -> npt.NDArray[np.int64]:
        """Every indexed id, ascending."""
        self._check_open()
        rows = self._rows.array
        return np.sort(rows[rows >= 0])

    def search(
        self, queries: npt.ArrayLike, k: int, *, allowed: npt.ArrayLike | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The (approximately) ``k`` best ids and scores per query, best first.

        ``allowed`` restricts the search to those ids (all indexed) and scores them exactly.
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
        scores, rows = self._index.search(q, k, params=self._params(k))
        ids = np.where(rows >= 0, self._rows.array[rows], -1)
        return ids.astype(np.int64), np.where(rows >= 0, scores, -np.inf).astype(np.float32)

    def get(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Vectors in the order of ``ids``; raises :class:`UnknownIdError`."""
        self._check_open()
        ids = as_ids(ids)
        rows = self._lookup.rows_of(ids)
        if (rows < 0).any():
            raise UnknownIdError(ids[rows < 0])
        if not len(rows):
            return np.empty((0, self.dim), np.float32)
        return np.asarray(self._index.reconstruct_batch(rows), dtype=np.float32)

    def contains(self, ids: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether each of ``ids`` is indexed."""
        self._check_open()
        return self._lookup.rows_of(as_ids(ids)) >= 0

    def flush(self) -> None:
        """Write the graph and ids as a new generation and commit it atomically."""
        self._check_open()
        if not self._dirty:
            return
        generation = self._generation + 1
        index_path = self._files.path("hnsw", generation, ".faiss")
        ids_path = self._files.path("ids", generation)
        self._faiss.write_index(self._index, str(index_path))
        np.save(ids_path, self._rows.array)
        meta = {
            "generation": generation,
            "dim": self.dim,
            "count": len(self),
            "m": self._m,
            "ef_construction": self._ef_construction,
        }
        self._files.commit(meta, [index_path, ids_path])
        self._generation = generation
        self._dirty = False

    def close(self) -> None:
        """Flush, then free the graph; closing twice is harmless."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._index.reset()

    def _new(self, dim: int, m: int, ef_construction: int) -> None:
        self._files.directory.mkdir(parents=True, exist_ok=True)
        self._index = self._faiss.IndexHNSWFlat(dim, m, self._faiss.METRIC_INNER_PRODUCT)
        self._index.hnsw.efConstruction = ef_construction
        self._m, self._ef_construction = m, ef_construction
        self._rows = GrowableIds()
        self._n_dead = 0
        self._generation = 0
        self._dirty = True

    def _open(self, meta: dict[str, Any], dim: int | None) -> None:
        if dim is not None and dim != meta["dim"]:
            raise ConfigError(f"{self.directory}: index has dim {meta['dim']}, asked for {dim}")
        self._generation = int(meta["generation"])
        self._files.remove_stale(self._generation)
        index_path = self._files.path("hnsw", self._generation, ".faiss")
        self._files.verify(meta)  # faiss reads the whole graph now: check it whole first
        try:
            self._index = self._faiss.read_index(str(index_path))
            rows = np.load(self._files.path("ids", self._generation))
        except (OSError, RuntimeError, ValueError) as exc:
            raise IndexIncompleteError(f"{self.directory}: cannot read the index: {exc}") from exc
        if len(rows) != self._index.ntotal or self._index.d != meta["dim"]:
            raise IndexIncompleteError(f"{index_path}: graph and ids disagree")
        self._m, self._ef_construction = int(meta["m"]), int(meta["ef_construction"])
        self._rows = GrowableIds(rows)
        self._n_dead = int((rows < 0).sum())
        self._dirty = False

    def _params(self, k: int) -> Any:
        """Search parameters: the beam width and, when rows are dead, a live-row filter."""
        params = self._faiss.SearchParametersHNSW()
        params.efSearch = max(self.ef_search, k)
        if self._n_dead:
            if self._selector is None:
                bitmap = np.packbits(self._rows.array >= 0, bitorder="little")
                sel = self._faiss.IDSelectorBitmap(len(self._rows), self._faiss.swig_ptr(bitmap))
                self._selector = (sel, bitmap)  # the bitmap must outlive the selector
            params.sel = self._selector[0]
        return params

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.directory}: the vector index is closed")
