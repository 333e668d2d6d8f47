"""Immutable graph snapshot: a compact id map plus CSR arrays.

The snapshot is what every graph algorithm consumes. It is saved as plain ``.npy``
files and reopened memory-mapped, so a 21M-edge graph opens in milliseconds and
costs no Python objects per node. ``snapshot.json`` records each file's size and
checksum; loading checks them (a damaged file raises
:class:`~quillian.errors.IndexDamagedError` naming it), at about 1 ms a megabyte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from quillian.errors import (
    IndexIncompleteError,
    IndexMissingError,
    InputError,
)
from quillian.stores.coded import (
    CodedColumn,
    coded_relations,
    coded_weights,
    relation_bits,
    weight_codes,
)
from quillian.stores.id_map import IdMap, ids_as_bytes, stable_numbers
from quillian.stores.integrity import damaged, record_files, save_recorded, verify_files
from quillian.stores.mapped import load_mapped, narrowed

__all__ = [
    "EdgeKind",
    "GraphSnapshot",
    "IdMap",
    "NodeKind",
    "build_csr",
    "distinct_order",
    "ids_as_bytes",
    "stable_numbers",
    "stable_order",
]


class NodeKind(IntEnum):
    """Node types of SA-RAG's heterogeneous graph."""

    ENTITY = 0
    DESCRIPTION = 1
    CHUNK = 2


class EdgeKind(IntEnum):
    """Edge types. ``DESCRIBES`` runs from a chunk or description to an entity;
    ``DESCRIBED_BY`` is its reverse (entity to chunk or description), stored so that
    "documents describing an activated entity" is one CSR row; ``RELATED_TO`` links
    entities and is stored in both directions."""

    DESCRIBES = 0
    DESCRIBED_BY = 1
    RELATED_TO = 2


#: Keys with fewer descents (a key below the one before it) than this share of their
#: count are sorted by numpy's stable sort of wide integers, a Timsort, which merges
#: the runs already in order: at 100k passages, 0.7 ms against 2.4 ms by the radix
#: sort for the description rows (0.8% descents), 1.5 against 2.2 ms for the relation
#: rows (2%), where the relations' entities (25%) take 10 ms against 6.6 ms
#: (docs/scale.md, "Keys already in order").
_FEW_DESCENTS = 1 / 32


def stable_order(keys: npt.NDArray[np.integer[Any]], bound: int) -> npt.NDArray[np.intp]:
    """``np.argsort(keys, kind="stable")`` for keys in ``0..bound-1``. Keys in order
    are their own order, and keys mostly in order are sorted by numpy's Timsort (see
    :data:`_FEW_DESCENTS`). Others, under a bound of 65,536, by numpy's stable sort of
    16-bit keys, a radix sort in one linear pass (docs/scale.md, "The CSR's edges
    sorted by a radix sort"); over it, each key is packed with its position into one
    64-bit integer, all distinct, which numpy's unstable sort orders (its SIMD sort
    where the processor has one): key first, then position, the stable order. For the
    relations' ends by entity at 100k passages (353k keys under 126k), 3.3 ms against
    6.4 ms by two radix passes of 16 bits (research/sort_paths.py)."""
    descents = np.count_nonzero(keys[1:] < keys[:-1])
    if not descents:
        return np.arange(len(keys), dtype=np.intp)
    if descents < _FEW_DESCENTS * len(keys):
        return np.argsort(keys, kind="stable")
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    shift = max(len(keys) - 1, 1).bit_length()
    if bound > 1 << (63 - shift):  # no room for the position beside the key
        return np.argsort(keys, kind="stable")
    packed = (keys.astype(np.int64) << shift) | np.arange(len(keys), dtype=np.int64)
    packed.sort()
    return (packed & ((1 << shift) - 1)).astype(np.intp, copy=False)


def distinct_order(keys: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """``np.argsort(keys, kind="stable")``, by an unstable sort where no two keys are
    equal (then both orders are the one order): about four times faster on 64-bit keys
    in no order, such as hashes."""
    order = np.argsort(keys)
    ordered = keys[order]
    if len(keys) > 1 and (ordered[1:] == ordered[:-1]).any():
        return np.argsort(keys, kind="stable")
    return order


def build_csr(
    n_nodes: int,
    sources: npt.NDArray[np.int64],
    *columns: npt.NDArray[np.generic],
) -> tuple[npt.NDArray[np.int64], tuple[npt.NDArray[np.generic], ...]]:
    """Sort edges by source (stable) and return ``indptr`` plus the reordered columns."""
    order = stable_order(sources, n_nodes)
    counts = np.bincount(sources, minlength=n_nodes)
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, tuple(np.ascontiguousarray(c[order]) for c in columns)


#: A snapshot's arrays, each a file as it is in format 1.
_ARRAYS = ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations")
#: The form :meth:`GraphSnapshot.save` writes. Format 2 (stop 81) keeps each array in
#: fewer bytes, every value read back the same: the ids numbered where they are stable
#: ids (:mod:`~quillian.stores.id_map`), ``indptr`` in 32 bits where it fits, the
#: weights as one byte an edge where they take few values, the relations only of the
#: edges that have one (:mod:`~quillian.stores.coded`); its record names the files it
#: has. Format 1 is read as it is.
SNAPSHOT_FORMAT = 2
_FORMATS = (1, SNAPSHOT_FORMAT)


@dataclass(frozen=True)
class GraphSnapshot:
    """A typed, weighted directed graph in CSR form.

    ``indices[indptr[i]:indptr[i+1]]`` are the targets of node ``i``'s out-edges; the
    same slice of ``weights``, ``edge_kinds`` and ``edge_relations`` describes them.
    Undirected relations are stored as two directed edges.
    """

    ids: IdMap
    kinds: npt.NDArray[np.int8]
    indptr: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int32]
    weights: npt.NDArray[np.float32]
    edge_kinds: npt.NDArray[np.int8]
    edge_relations: npt.NDArray[np.int32]

    @property
    def n_nodes(self) -> int:
        return len(self.kinds)

    @property
    def n_edges(self) -> int:
        return len(self.indices)

    def edge_sources(self) -> npt.NDArray[np.int64]:
        """The source node of every edge, in CSR order (``indices`` holds the targets)."""
        return np.repeat(np.arange(self.n_nodes, dtype=np.int64), np.diff(self.indptr))

    @classmethod
    def from_edges(
        cls,
        node_ids: Sequence[str] | IdMap,
        kinds: npt.ArrayLike,
        sources: npt.ArrayLike,
        targets: npt.ArrayLike,
        edge_kinds: npt.ArrayLike,
        weights: npt.ArrayLike | None = None,
        relations: npt.ArrayLike | None = None,
    ) -> GraphSnapshot:
        """Build a snapshot from integer edge lists (indices into ``node_ids``, the ids or
        their map)."""
        ids = node_ids if isinstance(node_ids, IdMap) else IdMap.from_ids(node_ids)
        return cls.from_arrays(ids, kinds, sources, targets, edge_kinds, weights, relations)

    @classmethod
    def from_arrays(
        cls,
        ids: IdMap,
        kinds: npt.ArrayLike,
        sources: npt.ArrayLike,
        targets: npt.ArrayLike,
        edge_kinds: npt.ArrayLike,
        weights: npt.ArrayLike | None = None,
        relations: npt.ArrayLike | None = None,
    ) -> GraphSnapshot:
        n = len(ids)
        src = np.asarray(sources, dtype=np.int64)
        dst = np.asarray(targets, dtype=np.int32)
        m = len(src)
        if len(dst) != m:
            raise InputError(f"{m} edge sources but {len(dst)} targets")
        if m and (src.min() < 0 or src.max() >= n or dst.min() < 0 or dst.max() >= n):
            raise InputError(f"edge endpoint outside 0..{n - 1}")
        ek = np.broadcast_to(np.asarray(edge_kinds, dtype=np.int8), (m,))
        w = np.ones(m, np.float32) if weights is None else np.asarray(weights, np.float32)
        rel = np.full(m, -1, np.int32) if relations is None else np.asarray(relations, np.int32)
        indptr, (dst_s, w_s, ek_s, rel_s) = build_csr(n, src, dst, w, ek, rel)
        node_kinds = np.asarray(kinds, dtype=np.int8)
        if len(node_kinds) != n:
            raise InputError(f"{n} node ids but {len(node_kinds)} node kinds")
        return cls(ids, node_kinds, indptr, dst_s, w_s, ek_s, rel_s)  # type: ignore[arg-type]

    def carried(
        self,
        ids: IdMap,
        kinds: npt.ArrayLike,
        moved: npt.NDArray[np.int64],
        relations: npt.NDArray[np.int64] | None,
        changed: npt.NDArray[np.bool_],
        edges: Sequence[npt.NDArray[Any]],
    ) -> GraphSnapshot:
        """This graph after its nodes moved, some gone, some added, and the edges of
        some nodes changed: the snapshot :meth:`from_arrays` builds of the new graph's
        edges, at the cost of copying this one's arrays and of the changed rows, not of
        sorting every edge again.

        ``ids``, ``kinds``: the new graph's nodes. ``moved``: each old node's new index
        (-1: gone). ``relations``: each old relation id's new id (-1: gone; None: the
        same ids). ``changed``: by new node, True where its out-edges are not its old
        node's (every added node's), each given in ``edges`` (sources, targets, edge
        kinds, weights, relation ids: the edges of the changed rows, in the order the
        new graph's whole edge list holds them). Every other row keeps its old node's
        edges, their targets and relation ids moved; :class:`ValueError` where one then
        reaches a node or relation that is gone, or an edge of ``edges`` leaves an
        unchanged row."""
        n = len(ids)
        back = np.full(n, -1, np.int64)
        live = np.flatnonzero(moved >= 0)
        back[moved[live]] = live
        same = (back >= 0) & ~changed
        sources, targets, edge_kinds, weights, rels = edges
        if len(sources) and same[sources].any():
            raise ValueError("an edge given for a row that did not change")
        old_indptr = np.asarray(self.indptr, np.int64)
        counts = np.bincount(sources, minlength=n)
        kept = np.flatnonzero(same)
        kept_back = back[kept]
        counts[kept] = np.diff(old_indptr)[kept_back]
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        m = int(indptr[-1])
        out: tuple[npt.NDArray[Any], ...] = (
            np.empty(m, np.int32),
            np.empty(m, np.float32),
            np.empty(m, np.int8),
            np.empty(m, np.int32),
        )
        # runs of rows kept next to each other in both graphs: each copied at once, its
        # targets and relation ids moved
        if len(kept):
            step = np.flatnonzero((np.diff(kept) != 1) | (np.diff(kept_back) != 1)) + 1
            firsts = kept[np.concatenate(([0], step))].tolist()
            lasts = kept[np.concatenate((step - 1, [len(kept) - 1]))].tolist()
            # the targets' new numbers in the targets' own type, gathered straight into
            # the new column: 4.4 against 7.7-10.8 ms for 2M targets of 500k nodes
            # through int64 and a cast
            to = moved.astype(out[0].dtype)
            # each old relation id's new one at the id + 1 (-1 where the edge has none,
            # -2 where its relation is gone): an edge's relation moved by one gather
            renamed = None
            if relations is not None:
                renamed = np.empty(len(relations) + 1, out[3].dtype)
                renamed[0] = -1
                np.copyto(renamed[1:], np.where(relations >= 0, relations, -2), casting="unsafe")
            for first, last in zip(firsts, lasts, strict=True):
                lo, hi = int(indptr[first]), int(indptr[last + 1])
                at = int(old_indptr[back[first]])
                self._copy_moved(out, lo, slice(at, at + hi - lo), to, renamed)
        if len(sources):
            order = stable_order(sources, n)
            ordered = sources[order]
            # each edge's slot: its row's start, then its rank among the row's edges
            slots = indptr[ordered] + np.arange(len(ordered)) - np.searchsorted(ordered, ordered)
            for into, column in zip(out, (targets, weights, edge_kinds, rels), strict=True):
                into[slots] = np.asarray(column)[order]
        if m and int(out[0].min()) < 0:
            raise ValueError("a kept edge reaches a node that is gone")
        node_kinds = np.asarray(kinds, dtype=np.int8)
        if len(node_kinds) != n:
            raise InputError(f"{n} node ids but {len(node_kinds)} node kinds")
        return GraphSnapshot(ids, node_kinds, indptr, *out)

    def _copy_moved(
        self,
        out: tuple[npt.NDArray[Any], ...],
        lo: int,
        span: slice,
        moved: npt.NDArray[np.integer[Any]],
        renamed: npt.NDArray[np.integer[Any]] | None,
    ) -> None:
        """Copy this graph's edges ``span`` into ``out``'s columns from ``lo``, their
        targets and relation ids moved (``moved``: each old node's new index, -1 gone,
        in the targets' type; ``renamed``: each old relation id's new one at the id
        + 1, -1 at 0, -2 where gone, or None where the ids stay; see :meth:`carried`)."""
        hi = lo + span.stop - span.start
        # the targets are this graph's own nodes, all in range: "clip" checks none and
        # writes into ``out`` unbuffered ("raise" buffers it)
        np.take(moved, self.indices[span], out=out[0][lo:hi], mode="clip")
        out[1][lo:hi] = self.weights[span]
        out[2][lo:hi] = self.edge_kinds[span]
        if renamed is None:
            out[3][lo:hi] = self.edge_relations[span]
            return
        into = out[3][lo:hi]
        np.add(np.asarray(self.edge_relations[span]), 1, out=into)  # -1 (none) at 0
        if hi > lo and int(into.max()) >= len(renamed):
            raise ValueError("a kept edge names a relation this graph does not have")
        np.take(renamed, into, out=into, mode="clip")  # checked above: "clip" clips none
        if hi > lo and int(into.min()) < -1:
            raise ValueError("a kept edge names a relation that is gone")

    def neighbors(
        self, node: int, kind: EdgeKind | None = None
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], npt.NDArray[np.int32]]:
        """Targets, weights and relation indices of ``node``'s out-edges (of one kind)."""
        lo, hi = int(self.indptr[node]), int(self.indptr[node + 1])
        targets = self.indices[lo:hi]
        weights = self.weights[lo:hi]
        rels = self.edge_relations[lo:hi]
        if kind is not None:
            mask = self.edge_kinds[lo:hi] == kind
            return targets[mask], weights[mask], rels[mask]
        return targets, weights, rels

    def degree(self, kind: EdgeKind | None = None) -> npt.NDArray[np.int64]:
        if kind is None:
            return np.diff(self.indptr)
        counts = np.zeros(self.n_nodes, dtype=np.int64)
        np.add.at(counts, self.edge_sources()[self.edge_kinds == kind], 1)
        return counts

    def save(self, directory: str | Path) -> None:
        """Write the snapshot in :data:`SNAPSHOT_FORMAT`; ``snapshot.json``, written last,
        marks it complete and records its files."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        marker = path / "snapshot.json"
        marker.unlink(missing_ok=True)
        self.ids.save(path)
        arrays: dict[str, npt.NDArray[Any]] = {
            "kinds": self.kinds,
            "indptr": narrowed(np.asarray(self.indptr), np.int32),
            "indices": self.indices,
            "edge_kinds": self.edge_kinds,
        }
        coded = weight_codes(np.asarray(self.weights, np.float32))
        if coded is None:
            arrays["weights"] = self.weights
        else:
            arrays["weight_codes"], arrays["weight_table"] = coded
        relations = np.asarray(self.edge_relations, np.int32)
        masked = relation_bits(relations)
        if masked is None:
            arrays["edge_relations"] = relations
        else:
            arrays["relation_mask"], arrays["relation_values"] = masked
        for name, array in arrays.items():
            save_recorded(path / f"{name}.npy", np.ascontiguousarray(array))
        meta = {
            "format": SNAPSHOT_FORMAT,
            "n_nodes": self.n_nodes,
            "n_edges": self.n_edges,
            "files": record_files(
                path, (*self.ids.file_names(), *(f"{name}.npy" for name in arrays))
            ),
        }
        tmp = path / "snapshot.json.tmp"
        tmp.write_text(json.dumps(meta))
        tmp.replace(marker)

    @classmethod
    def load(
        cls, directory: str | Path, mmap: bool = True, *, verify: bool = True
    ) -> GraphSnapshot:
        """The snapshot :meth:`save` wrote, its files checked against their recorded
        sizes and checksums first (a snapshot saved before the records is trusted;
        ``verify=False`` skips the check, for the writer that has just saved it). Every
        array is memory-mapped where ``mmap``; weights and relations kept coded are read
        through their codes (:class:`~quillian.stores.coded.CodedColumn`)."""
        path = Path(directory)
        meta = _snapshot_record(path)
        files = meta.get("files")
        if verify and isinstance(files, dict):
            verify_files(path, files)
        if meta["format"] == 1:
            arrays = {name: load_mapped(path / f"{name}.npy", mmap) for name in _ARRAYS}
            return cls(IdMap.load(path, mmap=mmap), **arrays)

        def array(name: str, mapped: bool = mmap) -> npt.NDArray[Any]:
            return load_mapped(path / f"{name}.npy", mapped)

        def kept(name: str) -> bool:  # as its record says (one without is trusted)
            return name in files if isinstance(files, dict) else (path / name).is_file()

        n_edges = len(indices := array("indices"))
        weights: npt.NDArray[Any] | CodedColumn
        relations: npt.NDArray[Any] | CodedColumn
        if kept("weights.npy"):
            weights = array("weights")
        else:
            weights = coded_weights(array("weight_codes"), array("weight_table", False))
        if kept("edge_relations.npy"):
            relations = array("edge_relations")
        else:
            mask = array("relation_mask")
            try:
                relations = coded_relations(mask, array("relation_values"), n_edges)
            except ValueError as exc:
                raise damaged(path / "relation_mask.npy", str(exc)) from exc
        snapshot = cls(
            IdMap.load(path, mmap=mmap, numbered=kept("ids_numbers.npy")),
            array("kinds"),
            array("indptr"),
            indices,
            cast("npt.NDArray[np.float32]", weights),  # reads as one (stores/coded.py)
            array("edge_kinds"),
            cast("npt.NDArray[np.int32]", relations),
        )
        if not (len(weights) == len(relations) == len(snapshot.edge_kinds) == n_edges):
            raise damaged(path, f"edge arrays of different lengths ({n_edges} edges)")
        return snapshot


def _snapshot_record(path: Path) -> dict[str, Any]:
    """The record ``snapshot.json`` of the snapshot in ``path``, of a format read here."""
    marker = path / "snapshot.json"
    if not path.is_dir():
        raise IndexMissingError(f"{path}: no graph snapshot directory")
    if not marker.exists():
        raise IndexIncompleteError(f"{path}: graph snapshot is incomplete (no snapshot.json)")
    try:
        meta = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise damaged(marker, f"unreadable: {exc}") from exc
    if not isinstance(meta, dict):
        raise damaged(marker, "not a snapshot record")
    if meta.get("format") not in _FORMATS:
        raise IndexIncompleteError(f"{path}: unknown snapshot format {meta.get('format')!r}")
    return meta
