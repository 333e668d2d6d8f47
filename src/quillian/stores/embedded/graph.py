"""A graph store that accumulates nodes and edges and writes CSR snapshots to a directory.

The directory holds one :class:`~quillian.stores.snapshot.GraphSnapshot`,
readable on its own with ``GraphSnapshot.load(directory)``. A new snapshot is first
saved whole into ``directory/.staging`` and then moved into place file by file with
:func:`os.replace`, ``snapshot.json`` last. Files are replaced, never rewritten, so a
snapshot returned earlier (memory-mapped) stays valid; a crash while moving is finished
at the next open from the complete staging copy.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import numpy as np
import numpy.typing as npt

from quillian.errors import IndexIncompleteError, InputError, StoreError
from quillian.stores.embedded.files import fsync_path
from quillian.stores.snapshot import GraphSnapshot, IdMap

__all__ = ["CSRGraphStore"]

_MARKER = "snapshot.json"
_STAGING = ".staging"


@dataclass(frozen=True)
class _Edges:
    """One batch of edges between dense node ints."""

    sources: npt.NDArray[np.int64]
    targets: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]
    weights: npt.NDArray[np.float32]
    relations: npt.NDArray[np.int32]


class CSRGraphStore:
    """:class:`~quillian.stores.protocols.GraphStore` writing CSR snapshots to ``directory``.

    Node ids get dense ints in the order they are first added. Adding a node again with
    the same kind is a no-op, with another kind an :class:`~quillian.errors.InputError`;
    so is an edge naming a node not added. Parallel edges are kept. Opening a directory
    that holds a snapshot continues from it: new nodes and edges are appended and the
    next :meth:`snapshot` writes the combined graph. A rejected batch changes nothing.
    """

    def __init__(self, directory: str | Path) -> None:
        self._dir = Path(directory)
        if self._dir.exists() and not self._dir.is_dir():
            raise StoreError(f"{self._dir}: is not a directory")
        self._base = _open_snapshot(self._dir)
        self._index: dict[str, int] | None = None
        self._new_ids: list[str] = []
        self._new_kinds: list[int] = []
        self._edges: list[_Edges] = []
        self._closed = False

    @property
    def directory(self) -> Path:
        """The snapshot directory."""
        return self._dir

    @property
    def n_nodes(self) -> int:
        """Nodes added so far, snapshotted or not."""
        return self._n_base + len(self._new_ids)

    def __repr__(self) -> str:
        return f"CSRGraphStore({str(self._dir)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add_nodes(self, node_ids: Sequence[str], kinds: npt.ArrayLike) -> None:
        """Add typed nodes; ``kinds`` is one small int per node, or one for all."""
        self._check_open()
        kind_array = _column(kinds, len(node_ids), np.int8, "kinds")
        index = self._lookup()
        staged: dict[str, int] = {}
        for node_id, kind in zip(node_ids, kind_array.tolist(), strict=True):
            if not isinstance(node_id, str):
                raise InputError(f"node id {node_id!r} is not a string", field="node_ids")
            known = staged.get(node_id, self._kind_of(index.get(node_id)))
            if known is not None and known != kind:
                raise InputError(f"node {node_id!r} has kind {known}, cannot add it with {kind}")
            staged[node_id] = kind
        for node_id, kind in staged.items():
            if node_id not in index:
                index[node_id] = self.n_nodes
                self._new_ids.append(node_id)
                self._new_kinds.append(kind)

    def add_edges(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        kinds: npt.ArrayLike,
        weights: npt.ArrayLike | None = None,
        relations: npt.ArrayLike | None = None,
    ) -> None:
        """Add directed edges between known nodes; weights default to 1, relations to -1."""
        self._check_open()
        kind_col, weight_col, relation_col = edge_columns(
            sources, targets, kinds, weights, relations
        )
        batch = _Edges(
            self._resolve(sources, "sources"),
            self._resolve(targets, "targets"),
            kind_col,
            weight_col,
            relation_col,
        )
        if len(sources):
            self._edges.append(batch)

    def snapshot(self) -> GraphSnapshot:
        """Write every node and edge as a snapshot and return it, memory-mapped."""
        self._check_open()
        if self._base is not None and not self._new_ids and not self._edges:
            return self._base
        combined = self._combine()
        _write_snapshot(combined, self._dir)
        self._base = GraphSnapshot.load(self._dir, mmap=True, verify=False)  # just written
        self._new_ids, self._new_kinds, self._edges = [], [], []
        return self._base

    def write_snapshot(self, snapshot: GraphSnapshot) -> GraphSnapshot:
        """Write ``snapshot`` whole as this empty store's graph (no per-node ids are
        resolved); returns it memory-mapped."""
        self._check_open()
        if self._base is not None or self._new_ids or self._edges:
            raise StoreError(f"{self._dir}: write_snapshot needs an empty graph store")
        _write_snapshot(snapshot, self._dir)
        self._base = GraphSnapshot.load(self._dir, mmap=True, verify=False)  # just written
        self._index = None
        return self._base

    def close(self) -> None:
        """Write a snapshot if anything was added since the last, then release it."""
        if self._closed:
            return
        if self._new_ids or self._edges:
            self.snapshot()
        self._closed = True
        self._base = None
        self._index = None

    @property
    def _n_base(self) -> int:
        return 0 if self._base is None else self._base.n_nodes

    def _lookup(self) -> dict[str, int]:
        """Node id to dense int, built from the loaded snapshot on first use."""
        if self._index is None:
            base = [] if self._base is None else self._base.ids.ids_of(range(self._n_base))
            self._index = {node_id: i for i, node_id in enumerate([*base, *self._new_ids])}
        return self._index

    def _kind_of(self, node: int | None) -> int | None:
        if node is None:
            return None
        if node < self._n_base:
            assert self._base is not None
            return int(self._base.kinds[node])
        return self._new_kinds[node - self._n_base]

    def _resolve(self, node_ids: Sequence[str], field: str) -> npt.NDArray[np.int64]:
        index = self._lookup()
        out = np.empty(len(node_ids), dtype=np.int64)
        for i, node_id in enumerate(node_ids):
            node = index.get(node_id)
            if node is None:
                raise InputError(f"edge names unknown node id {node_id!r}", field=field)
            out[i] = node
        return out

    def _combine(self) -> GraphSnapshot:
        """The loaded snapshot plus everything added since, as one new snapshot."""
        parts = [*self._base_edges(), *self._edges]
        base_ids = [] if self._base is None else self._base.ids.ids_of(range(self._n_base))
        base_kinds = np.empty(0, np.int8) if self._base is None else self._base.kinds
        return GraphSnapshot.from_arrays(
            IdMap.from_ids([*base_ids, *self._new_ids]),
            np.concatenate([base_kinds, np.asarray(self._new_kinds, np.int8)]),
            _cat([p.sources for p in parts], np.int64),
            _cat([p.targets for p in parts], np.int64),
            _cat([p.kinds for p in parts], np.int8),
            _cat([p.weights for p in parts], np.float32),
            _cat([p.relations for p in parts], np.int32),
        )

    def _base_edges(self) -> list[_Edges]:
        if self._base is None:
            return []
        snap = self._base
        sources = snap.edge_sources()
        return [
            _Edges(
                sources,
                np.asarray(snap.indices, np.int64),
                np.asarray(snap.edge_kinds),
                np.asarray(snap.weights),
                np.asarray(snap.edge_relations),
            )
        ]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._dir}: the graph store is closed")


def edge_columns(
    sources: Sequence[str],
    targets: Sequence[str],
    kinds: npt.ArrayLike,
    weights: npt.ArrayLike | None,
    relations: npt.ArrayLike | None,
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32], npt.NDArray[np.int32]]:
    """The checked kind, weight and relation columns of an ``add_edges`` call (weights
    default to 1, relations to -1), shared by every graph store backend."""
    m = len(sources)
    if len(targets) != m:
        raise InputError(f"{m} edge sources but {len(targets)} targets", field="targets")
    kind_col = _column(kinds, m, np.int8, "kinds")
    weight_col = _column(1.0 if weights is None else weights, m, np.float32, "weights")
    relation_col = _column(-1 if relations is None else relations, m, np.int32, "relations")
    if not np.isfinite(weight_col).all():
        raise InputError("edge weights must be finite", field="weights")
    return kind_col, weight_col, relation_col


def _column(values: npt.ArrayLike, n: int, dtype: type[np.generic], field: str) -> npt.NDArray:
    """``values`` (one per item, or one for all) as ``n`` items of ``dtype``, range-checked."""
    raw = np.asarray(values)
    if raw.ndim > 1 or (raw.ndim == 1 and len(raw) != n):
        raise InputError(f"expected {n} values or one, got shape {raw.shape}", field=field)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(np.dtype(dtype))
        if raw.size and not np.issubdtype(raw.dtype, np.integer):
            raise InputError(f"expected integers, got {raw.dtype}", field=field)
        if raw.size and (raw.min() < info.min or raw.max() > info.max):
            raise InputError(f"values outside {info.min}..{info.max}", field=field)
    try:
        typed = raw.astype(dtype)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"cannot read values as {np.dtype(dtype).name}: {exc}", field=field
        ) from exc
    return np.broadcast_to(typed, (n,))


def _cat(arrays: list[npt.NDArray], dtype: type[np.generic]) -> npt.NDArray:
    return np.concatenate([np.asarray(a, dtype) for a in arrays]) if arrays else np.empty(0, dtype)


def _open_snapshot(directory: Path) -> GraphSnapshot | None:
    """The snapshot in ``directory`` (finishing an interrupted write), or ``None``."""
    staging = directory / _STAGING
    if (staging / _MARKER).exists():
        _move_into_place(staging, directory)
    elif staging.exists():
        shutil.rmtree(staging)  # a write interrupted before it was complete
    if (directory / _MARKER).exists():
        return GraphSnapshot.load(directory, mmap=True)
    if directory.is_dir() and any(directory.glob("*.npy")):
        raise IndexIncompleteError(f"{directory}: graph snapshot is incomplete (no {_MARKER})")
    return None


def _write_snapshot(snapshot: GraphSnapshot, directory: Path) -> None:
    staging = directory / _STAGING
    if staging.exists():
        shutil.rmtree(staging)
    snapshot.save(staging)
    for path in staging.iterdir():
        fsync_path(path)
    _move_into_place(staging, directory)


def _move_into_place(staging: Path, directory: Path) -> None:
    """Replace the snapshot files in ``directory`` by the staged ones, the marker last;
    an array file the staged snapshot does not name (one of a snapshot in another
    format) is deleted before the marker is moved."""
    (directory / _MARKER).unlink(missing_ok=True)
    for path in sorted(staging.iterdir()):
        if path.name != _MARKER:
            os.replace(path, directory / path.name)
    named = json.loads((staging / _MARKER).read_text(encoding="utf-8")).get("files", {})
    for path in directory.glob("*.npy"):
        if named and path.name not in named:
            path.unlink()
    os.replace(staging / _MARKER, directory / _MARKER)
    fsync_path(directory)
    staging.rmdir()
