"""Immutable graph snapshot: a compact id map plus CSR arrays.

The snapshot is what every graph algorithm consumes. It is saved as plain ``.npy``
files and reopened memory-mapped, so a 21M-edge graph opens in milliseconds and
costs no Python objects per node. ``snapshot.json`` records each file's size and
checksum; loading checks them (a damaged file raises
:class:`~quillian.errors.IndexDamagedError` naming it), at about 1 ms a megabyte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import (
    IndexIncompleteError,
    IndexMissingError,
    InputError,
)
from quillian.stores.integrity import damaged, record_files, verify_files
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


class IdMap:
    """Bidirectional map between string ids and dense ints ``0..n-1``.

    Stored as one UTF-8 byte buffer plus offsets (index -> id) and a permutation
    sorted by id bytes (id -> index by binary search): about 12 bytes per id plus the
    text, instead of ~130 bytes per entry for a Python dict.
    """

    def __init__(
        self,
        blob: npt.NDArray[np.uint8],
        offsets: npt.NDArray[np.int64],
        order: npt.NDArray[np.int64],
    ) -> None:
        self._blob = blob
        self._offsets = offsets
        self._order = order

    @classmethod
    def from_ids(cls, ids: Sequence[str]) -> IdMap:
        joined = "".join(ids)
        if joined.isascii():  # every id one byte a character: no id encoded apart
            blob = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).copy()
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        else:
            encoded = [s.encode("utf-8") for s in ids]
            blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
            lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(ids))
        return cls._sorted(blob, lengths, _fixed_width(blob, lengths))

    @classmethod
    def from_bytes(cls, *parts: npt.NDArray[np.bytes_]) -> IdMap:
        """The map of the ids of ``parts``, one part after the other, each part UTF-8
        bytes in one fixed-width array (numpy's ``S`` type, a shorter id padded with NUL
        bytes, as :meth:`from_ids` pads them to sort): what a build that keeps its node
        ids as bytes gives, no id decoded to a string and encoded again.

        Where each part's ids are one prefix and 16 hex digits (what
        :func:`~quillian.types.stable_id` makes: ``ent-`` ids, then ``desc-`` ids, then
        ``chunk-`` ids), a part is ordered by the number its digits spell, a sort of
        64-bit integers, and the parts by their prefixes: the order of the ids' bytes,
        at less than half the cost of sorting them as bytes, which any other ids are."""
        blobs, lengths = [], []
        for part in parts:
            width = part.dtype.itemsize
            rows = np.ascontiguousarray(part).view(np.uint8).reshape(len(part), width)
            length = np.strings.str_len(part).astype(np.int64)
            whole = not len(part) or int(length.min()) == width  # no id padded
            blobs.append(rows.reshape(-1) if whole else rows[np.arange(width) < length[:, None]])
            lengths.append(length)
        blob = np.concatenate([np.zeros(0, np.uint8), *blobs])
        length = np.concatenate([np.zeros(0, np.int64), *lengths])
        order = _hashed_order(parts)
        if order is None:
            fixed = np.concatenate(parts) if parts else np.zeros(0, np.bytes_)
            return cls._sorted(blob, length, fixed)
        return cls(blob, _offsets(length), order)

    @classmethod
    def _sorted(
        cls, blob: npt.NDArray[np.uint8], lengths: npt.NDArray[np.int64], fixed: npt.NDArray[Any]
    ) -> IdMap:
        """The map of the ids ``blob`` holds one after the other (of ``lengths`` bytes),
        ``fixed`` the same ids as fixed-width bytes (which sort as the ids do)."""
        order = np.argsort(fixed, kind="stable").astype(np.int64)
        ordered = fixed[order]
        dup = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(dup):
            raise InputError(f"duplicate node id {_named(ordered[dup[0]])}")
        return cls(blob, _offsets(lengths), order)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _bytes(self, index: int) -> bytes:
        return self._blob[self._offsets[index] : self._offsets[index + 1]].tobytes()

    def id_of(self, index: int) -> str:
        return self._bytes(int(index)).decode("utf-8")

    def ids_of(self, indices: Iterable[int]) -> list[str]:
        return [self.id_of(i) for i in indices]

    def index_of(self, node_id: str) -> int:
        """Dense index of ``node_id``, or -1 when absent."""
        key = node_id.encode("utf-8")
        lo, hi = 0, len(self._order)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bytes(int(self._order[mid])) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._order) and self._bytes(int(self._order[lo])) == key:
            return int(self._order[lo])
        return -1

    def indices_of(self, node_ids: Iterable[str]) -> npt.NDArray[np.int64]:
        return np.array([self.index_of(n) for n in node_ids], dtype=np.int64)

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and self.index_of(node_id) >= 0

    def save(self, directory: Path, prefix: str = "ids") -> None:
        """Write the map; the offsets and the order in 32 bits where they fit (half the
        bytes: 2 MB of the 20 MB text's snapshot, docs/scale.md), which every use reads
        as it reads 64."""
        np.save(directory / f"{prefix}_blob.npy", self._blob)
        np.save(directory / f"{prefix}_offsets.npy", narrowed(self._offsets, np.int32))
        np.save(directory / f"{prefix}_order.npy", narrowed(self._order, np.int32))

    @classmethod
    def load(cls, directory: Path, prefix: str = "ids", mmap: bool = True) -> IdMap:
        return cls(
            load_mapped(directory / f"{prefix}_blob.npy", mmap),
            load_mapped(directory / f"{prefix}_offsets.npy", mmap),
            load_mapped(directory / f"{prefix}_order.npy", mmap),
        )


def ids_as_bytes(ids: Sequence[str]) -> npt.NDArray[np.bytes_]:
    """``ids`` as one fixed-width bytes array (UTF-8, a shorter id padded with NUL
    bytes: what :meth:`IdMap.from_bytes` takes). Ids that are ASCII and of one length,
    as chunk ids are, are converted at C speed, in one join."""
    widths = set(map(len, ids))
    if len(widths) == 1 and (width := widths.pop()) and (joined := "".join(ids)).isascii():
        return np.frombuffer(joined.encode("ascii"), dtype=f"S{width}")
    return np.array([i.encode() for i in ids], dtype=np.bytes_).reshape(-1)


def _offsets(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Where each of ids of ``lengths`` bytes begins in their blob, and its end."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _named(node_id: bytes) -> str:
    return repr(bytes(node_id).decode(errors="replace"))


#: The lowercase hex digits.
_HEX_DIGITS = b"0123456789abcdef"
#: The hex digits that end a stable id.
_DIGITS = 16


def stable_numbers(ids: npt.NDArray[np.bytes_]) -> tuple[bytes, npt.NDArray[np.uint64]] | None:
    """Where every one of ``ids`` (fixed-width bytes, at least one) is one head and
    :data:`_DIGITS` lowercase hex digits (what :func:`~quillian.types.stable_id` makes),
    the head and the number each id's digits spell: two such ids are equal exactly where
    their numbers are, and ordered as them. None for any other ids."""
    n, width = len(ids), ids.dtype.itemsize
    if not n or width <= _DIGITS:
        return None
    rows = np.ascontiguousarray(ids).view(np.uint8).reshape(n, width)
    head = rows[:, : width - _DIGITS]
    tail = np.ascontiguousarray(rows[:, width - _DIGITS :]).tobytes()
    # only lowercase hex digits (a padded id ends in NUL, not a digit): each id's sixteen
    # then spell eight bytes of a big-endian number
    if tail.translate(None, _HEX_DIGITS) or not (head == head[0]).all():
        return None
    value = np.frombuffer(bytes.fromhex(tail.decode("ascii")), ">u8").astype(np.uint64)
    return head[0].tobytes(), value


def _hashed_order(parts: Sequence[npt.NDArray[np.bytes_]]) -> npt.NDArray[np.int64] | None:
    """The order of the ids of ``parts`` (one after the other) by their bytes, where
    each part's ids are one head and :data:`_DIGITS` lowercase hex digits and no head is
    the beginning of another: each part sorted by its digits' number (equal to their
    bytes' order), the parts by their heads. None where the ids are not all of that
    form. Raises :class:`InputError` naming an id that comes twice."""
    heads: list[bytes] = []
    orders: list[npt.NDArray[np.int64]] = []
    start = 0
    for part in parts:
        n = len(part)
        if not n:
            continue
        numbered = stable_numbers(part)
        if numbered is None:
            return None
        head, value = numbered
        order = np.argsort(value)  # not stable: equal values are a duplicate, raised below
        dup = np.flatnonzero(np.diff(value[order]) == 0)
        if len(dup):
            raise InputError(f"duplicate node id {_named(part[order[dup[0]]])}")
        heads.append(head)
        orders.append(order.astype(np.int64) + start)
        start += n
    if any(a != b and b.startswith(a) for a in heads for b in heads) or len(set(heads)) < len(
        heads
    ):
        return None  # ids of two parts would interleave
    ranked = sorted(range(len(heads)), key=heads.__getitem__)
    return np.concatenate([np.zeros(0, np.int64), *(orders[i] for i in ranked)])


def _fixed_width(blob: npt.NDArray[np.uint8], lengths: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """The ids ``blob`` holds one after the other (of ``lengths`` bytes) as one array of
    fixed-width bytes (``S`` dtype, which sorts as the bytes do), filled in one step."""
    width = max(int(lengths.max()) if len(lengths) else 0, 1)
    rows = np.zeros((len(lengths), width), dtype=np.uint8)
    rows[np.arange(width) < lengths[:, None]] = blob
    return rows.view(f"S{width}").reshape(-1)


def stable_order(keys: npt.NDArray[np.integer[Any]], bound: int) -> npt.NDArray[np.intp]:
    """``np.argsort(keys, kind="stable")`` for keys in ``0..bound-1``, as a radix sort
    of 16-bit digits, least significant first (numpy's stable sort of 16-bit keys is a
    radix sort): one pass for a bound up to 65,536, two up to 2**32, each linear, where
    numpy's stable sort of wider integers is a merge sort (docs/scale.md, "The CSR's
    edges sorted by a radix sort")."""
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if bound > 1 << 32:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    high = (keys[order] >> 16).astype(np.uint16)
    return order[np.argsort(high, kind="stable")]


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


_ARRAYS = ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations")
_FILES = tuple(f"{name}.npy" for name in ("ids_blob", "ids_offsets", "ids_order", *_ARRAYS))
SNAPSHOT_FORMAT = 1


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
        """Write the snapshot; ``snapshot.json`` is written last and marks it complete."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        marker = path / "snapshot.json"
        marker.unlink(missing_ok=True)
        self.ids.save(path)
        for name in _ARRAYS:
            np.save(path / f"{name}.npy", np.ascontiguousarray(getattr(self, name)))
        meta = {
            "format": SNAPSHOT_FORMAT,
            "n_nodes": self.n_nodes,
            "n_edges": self.n_edges,
            "files": record_files(path, _FILES),
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
        ``verify=False`` skips the check, for the writer that has just saved it)."""
        path = Path(directory)
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
        if meta.get("format") != SNAPSHOT_FORMAT:
            raise IndexIncompleteError(f"{path}: unknown snapshot format {meta.get('format')!r}")
        if verify and isinstance(meta.get("files"), dict):
            verify_files(path, meta["files"])
        arrays = {name: load_mapped(path / f"{name}.npy", mmap) for name in _ARRAYS}
        return cls(IdMap.load(path, mmap=mmap), **arrays)
