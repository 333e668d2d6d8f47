"""The map between a graph's node ids and its dense node ints (:class:`IdMap`).

A map holds its ids in one of two forms. **Text**: one UTF-8 byte buffer plus offsets
(index -> id), about 12 bytes an id plus its text, instead of ~130 bytes an entry for a
Python dict. **Numbered**: where every id is a head and 16 lowercase hex digits (what
:func:`~quillian.types.stable_id` makes: the ``ent-``, ``desc-`` and ``chunk-`` ids of
an index's graph), in parts of one head each, only the 64-bit number each id's digits
spell and the parts' heads: 8 bytes an id where the text form takes its 20-22 bytes and
a 4-byte offset (the 20 MB text's graph of docs/scale.md: 6.2 MB of ids in 2.0 MB).
Both keep a permutation sorted by id bytes, so an id is found by binary search; both
read back the same ids, and a map saved in the text form loads as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import InputError
from quillian.stores.integrity import damaged, save_recorded
from quillian.stores.mapped import load_mapped, narrowed

__all__ = ["IdMap", "ids_as_bytes", "stable_bytes", "stable_numbers"]

#: The lowercase hex digits.
_HEX_DIGITS = b"0123456789abcdef"
#: The hex digits that end a stable id.
_DIGITS = 16


@dataclass(frozen=True)
class _Numbered:
    """The numbered form's ids: part ``p`` holds the nodes ``starts[p]`` to
    ``starts[p + 1] - 1``, each id ``heads[p]`` and its number's 16 hex digits; in the
    map's order (by id bytes) the part's ids begin at ``ranked[p]``."""

    heads: tuple[bytes, ...]
    starts: npt.NDArray[np.int64]
    numbers: npt.NDArray[np.uint64]

    @property
    def ranked(self) -> list[int]:
        """Where each part's ids begin in the order by id bytes (the parts by head)."""
        sizes = np.diff(self.starts).tolist()
        at, out = 0, [0] * len(self.heads)
        for p in sorted(range(len(self.heads)), key=self.heads.__getitem__):
            out[p], at = at, at + sizes[p]
        return out

    def id_bytes(self, index: int) -> bytes:
        if not 0 <= index < len(self.numbers):
            raise IndexError(f"node index {index} outside 0..{len(self.numbers) - 1}")
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        return self.number_bytes(part, int(self.numbers[index]))

    def number_bytes(self, part: int, number: int) -> bytes:
        """The id of part ``part`` whose digits spell ``number``."""
        return self.heads[part] + b"%016x" % number

    def parse(self, key: bytes) -> tuple[int, int] | None:
        """The part and number of the id ``key``, or None where no id of the map can be
        ``key`` (another head, length or digits)."""
        for part, head in enumerate(self.heads):
            tail = key[len(head) :]
            if key.startswith(head) and len(tail) == _DIGITS and not tail.strip(_HEX_DIGITS):
                return part, int(tail, 16)
        return None


class IdMap:
    """Bidirectional map between string ids and dense ints ``0..n-1`` (see the module's
    doc for its two forms)."""

    def __init__(
        self,
        blob: npt.NDArray[np.uint8] | None,
        offsets: npt.NDArray[np.int64] | None,
        order: npt.NDArray[np.int64],
        numbered: _Numbered | None = None,
    ) -> None:
        self._blob = blob
        self._offsets = offsets
        self._order = order
        self._numbered = numbered
        self._ranked = numbered.ranked if numbered is not None else []

    @classmethod
    def from_ids(cls, ids: Sequence[str]) -> IdMap:
        """The map of ``ids`` in the text form."""
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

        Where each part's ids are one head and 16 hex digits (what
        :func:`~quillian.types.stable_id` makes: ``ent-`` ids, then ``desc-`` ids, then
        ``chunk-`` ids) and no head begins another, the map is in the numbered form, a
        part ordered by the numbers its ids' digits spell, a sort of 64-bit integers,
        and the parts by their heads: the order of the ids' bytes, at less than half the
        cost of sorting them as bytes, which any other ids are (the text form)."""
        numbered = _numbered_parts(parts)
        if numbered is not None:
            return cls(None, None, _numbered_order(numbered), numbered)
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
        fixed = np.concatenate(parts) if parts else np.zeros(0, np.bytes_)
        return cls._sorted(blob, length, fixed)

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

    def carried(
        self,
        moved: Sequence[npt.NDArray[np.int64]],
        added: Sequence[tuple[npt.NDArray[np.int64], npt.NDArray[np.bytes_]]],
    ) -> IdMap | None:
        """The map of the ids after each part's nodes moved, some gone, some added: for
        part ``p``, ``moved[p]`` the new place in the part of each of its nodes (-1:
        gone) and ``added[p]`` the places of the nodes added and their ids (as
        :meth:`from_bytes` takes them). Equal to :meth:`from_bytes` of the new parts,
        at the cost of moving this map's numbers and order, not of sorting them again.
        None where this map is not numbered, a part is empty, or an added id is not of
        its part's head; :class:`InputError` where it is one the part has."""
        old = self._numbered
        if old is None or len(moved) != len(old.heads) or len(added) != len(old.heads):
            return None
        numbers, orders, starts = [], {}, [0]
        for part, (kept, (places, ids)) in enumerate(zip(moved, added, strict=True)):
            start, end = int(old.starts[part]), int(old.starts[part + 1])
            if len(kept) != end - start:
                raise ValueError(f"{len(kept)} moves for {end - start} ids of part {part}")
            size = int(np.count_nonzero(kept >= 0)) + len(places)
            if not size:
                return None
            live = kept >= 0
            if len(places):
                out = np.empty(size, np.uint64)
                out[kept[live]] = old.numbers[start:end][live]
            else:  # none put in: the kept ones move down in their order, no gap left
                out = old.numbers[start:end][live]
            order = kept[self._order[self._ranked[part] : self._ranked[part] + end - start] - start]
            order = order[order >= 0]
            if len(places):
                parsed = stable_numbers(ids)
                if parsed is None or parsed[0] != old.heads[part]:
                    return None
                out[places] = parsed[1]
                by_number = np.argsort(parsed[1])
                new = np.asarray(places, np.int64)[by_number]
                order = np.insert(order, np.searchsorted(out[order], parsed[1][by_number]), new)
                value = out[order]
                if (dup := np.flatnonzero(value[1:] == value[:-1])).size:
                    raise InputError(
                        f"duplicate node id {_named(old.number_bytes(part, int(value[dup[0]])))}"
                    )
            numbers.append(out)
            orders[part] = order + starts[-1]
            starts.append(starts[-1] + size)
        numbered = _Numbered(old.heads, np.array(starts, np.int64), np.concatenate(numbers))
        ranked = sorted(orders, key=old.heads.__getitem__)
        return IdMap(None, None, np.concatenate([orders[p] for p in ranked]), numbered)

    def __len__(self) -> int:
        return len(self._order)

    def _bytes(self, index: int) -> bytes:
        if self._numbered is not None:
            return self._numbered.id_bytes(index)
        assert self._blob is not None and self._offsets is not None
        return self._blob[self._offsets[index] : self._offsets[index + 1]].tobytes()

    def id_of(self, index: int) -> str:
        return self._bytes(int(index)).decode("utf-8")

    def ids_of(self, indices: Iterable[int]) -> list[str]:
        if (numbered := self._numbered) is None:
            return [self.id_of(i) for i in indices]
        at = np.fromiter(indices, np.int64)  # numbered: each part's ids made at once
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= len(self)):
            raise IndexError(f"a node index outside 0..{len(self) - 1}")
        parts = np.searchsorted(numbered.starts, at, side="right") - 1
        out: list[str] = [""] * len(at)
        for part, head in enumerate(numbered.heads):
            chosen = np.flatnonzero(parts == part)
            made = stable_bytes(head, np.asarray(numbered.numbers[at[chosen]]))
            for i, node_id in zip(chosen.tolist(), made.tolist(), strict=True):
                out[i] = node_id.decode("utf-8")
        return out

    def index_of(self, node_id: str) -> int:
        """Dense index of ``node_id``, or -1 when absent."""
        key = node_id.encode("utf-8")
        if self._numbered is not None:
            return self._numbered_index(key)
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

    def _numbered_index(self, key: bytes) -> int:
        """:meth:`index_of` in the numbered form: a binary search of the numbers of the
        one part whose head ``key`` has."""
        numbered = self._numbered
        assert numbered is not None
        parsed = numbered.parse(key)
        if parsed is None:
            return -1
        part, value = parsed
        lo = self._ranked[part]
        end = hi = lo + int(numbered.starts[part + 1] - numbered.starts[part])
        numbers, order = numbered.numbers, self._order
        while lo < hi:
            mid = (lo + hi) // 2
            if int(numbers[order[mid]]) < value:
                lo = mid + 1
            else:
                hi = mid
        if lo < end and int(numbers[order[lo]]) == value:
            return int(order[lo])
        return -1

    def indices_of(self, node_ids: Iterable[str]) -> npt.NDArray[np.int64]:
        return np.array([self.index_of(n) for n in node_ids], dtype=np.int64)

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and self.index_of(node_id) >= 0

    def file_names(self, prefix: str = "ids") -> tuple[str, ...]:
        """The files :meth:`save` writes with ``prefix``."""
        kept = ("numbers", "heads", "starts") if self._numbered is not None else ("blob", "offsets")
        return tuple(f"{prefix}_{name}.npy" for name in (*kept, "order"))

    def save(self, directory: Path, prefix: str = "ids") -> None:
        """Write the map (:meth:`file_names`); offsets, starts and the order in 32 bits
        where they fit (half the bytes: 2 MB of the 20 MB text's snapshot,
        docs/scale.md), which every use reads as it reads 64."""
        if (numbered := self._numbered) is not None:
            save_recorded(directory / f"{prefix}_numbers.npy", numbered.numbers)
            save_recorded(
                directory / f"{prefix}_heads.npy", np.array(numbered.heads, dtype=np.bytes_)
            )
            save_recorded(directory / f"{prefix}_starts.npy", narrowed(numbered.starts, np.int32))
        else:
            assert self._blob is not None and self._offsets is not None
            save_recorded(directory / f"{prefix}_blob.npy", self._blob)
            save_recorded(directory / f"{prefix}_offsets.npy", narrowed(self._offsets, np.int32))
        save_recorded(directory / f"{prefix}_order.npy", narrowed(self._order, np.int32))

    @classmethod
    def load(
        cls,
        directory: Path,
        prefix: str = "ids",
        mmap: bool = True,
        *,
        numbered: bool | None = None,
    ) -> IdMap:
        """The map :meth:`save` wrote, in the form ``numbered`` says (where a record of
        the files says it; None: numbered where its numbers' file is there)."""
        order = load_mapped(directory / f"{prefix}_order.npy", mmap)
        numbers = directory / f"{prefix}_numbers.npy"
        if numbered if numbered is not None else numbers.is_file():
            heads = load_mapped(directory / f"{prefix}_heads.npy", False)
            starts = load_mapped(directory / f"{prefix}_starts.npy", False).astype(np.int64)
            parts = _Numbered(
                tuple(bytes(h) for h in heads.tolist()), starts, load_mapped(numbers, mmap)
            )
            if len(parts.heads) + 1 != len(starts) or starts[-1] != len(parts.numbers):
                raise damaged(directory / f"{prefix}_starts.npy", "its parts do not hold the ids")
            return cls(None, None, order, parts)
        return cls(
            load_mapped(directory / f"{prefix}_blob.npy", mmap),
            load_mapped(directory / f"{prefix}_offsets.npy", mmap),
            order,
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


#: Each byte's two lowercase hex digits, by the byte's value.
_HEX_PAIRS = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), np.uint8).reshape(256, 2)


def stable_bytes(head: bytes, numbers: npt.NDArray[np.uint64]) -> npt.NDArray[np.bytes_]:
    """The ids :func:`stable_numbers` read ``head`` and ``numbers`` from: fixed-width
    bytes, ``head`` then each number's :data:`_DIGITS` lowercase hex digits, made at
    once (a table of every byte's two digits), not one id at a time."""
    n = len(numbers)
    digits = np.ascontiguousarray(numbers, dtype=">u8").view(np.uint8).reshape(n, 8)
    rows = np.empty((n, len(head) + _DIGITS), np.uint8)
    rows[:, : len(head)] = np.frombuffer(head, np.uint8)
    rows[:, len(head) :] = _HEX_PAIRS[digits].reshape(n, _DIGITS)
    return rows.reshape(-1).view(f"S{len(head) + _DIGITS}")


def _numbered_parts(parts: Sequence[npt.NDArray[np.bytes_]]) -> _Numbered | None:
    """The numbered form of the ids of ``parts`` (one after the other), where each
    non-empty part's ids are one head and :data:`_DIGITS` lowercase hex digits and no
    head begins another (so no two parts' ids interleave in the order of their bytes);
    None for any other ids."""
    heads: list[bytes] = []
    numbers: list[npt.NDArray[np.uint64]] = []
    starts = [0]
    for part in parts:
        if not len(part):
            continue
        numbered = stable_numbers(part)
        if numbered is None:
            return None
        heads.append(numbered[0])
        numbers.append(numbered[1])
        starts.append(starts[-1] + len(part))
    if any(a != b and b.startswith(a) for a in heads for b in heads) or len(set(heads)) < len(
        heads
    ):
        return None
    return _Numbered(
        tuple(heads),
        np.array(starts, np.int64),
        np.concatenate([np.zeros(0, np.uint64), *numbers]),
    )


def _numbered_order(numbered: _Numbered) -> npt.NDArray[np.int64]:
    """The order of the ids of ``numbered`` by their bytes: each part sorted by its
    numbers (equal to their digits' order), the parts by their heads. Raises
    :class:`InputError` naming an id that comes twice."""
    orders: dict[int, npt.NDArray[np.int64]] = {}
    for part in range(len(numbered.heads)):
        start, end = int(numbered.starts[part]), int(numbered.starts[part + 1])
        value = numbered.numbers[start:end]
        order = np.argsort(value)  # not stable: equal values are a duplicate, raised below
        dup = np.flatnonzero(np.diff(value[order]) == 0)
        if len(dup):
            raise InputError(
                f"duplicate node id {_named(numbered.id_bytes(start + order[dup[0]]))}"
            )
        orders[part] = order.astype(np.int64) + start
    ranked = sorted(orders, key=numbered.heads.__getitem__)
    return np.concatenate([np.zeros(0, np.int64), *(orders[p] for p in ranked)])


def _fixed_width(blob: npt.NDArray[np.uint8], lengths: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """The ids ``blob`` holds one after the other (of ``lengths`` bytes) as one array of
    fixed-width bytes (``S`` dtype, which sorts as the bytes do), filled in one step."""
    width = max(int(lengths.max()) if len(lengths) else 0, 1)
    rows = np.zeros((len(lengths), width), dtype=np.uint8)
    rows[np.arange(width) < lengths[:, None]] = blob
    return rows.view(f"S{width}").reshape(-1)
