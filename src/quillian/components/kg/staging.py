"""What a reader hands to the graph writer: ids, texts on disk, triples as int arrays.

Readers stream their input into a :class:`StagedGraph`: the entity ids (sorted, as a
byte-string array), two :class:`RaggedFile` s of texts written to disk as they are read
(tab-separated names and aliases; descriptions), and the triples as int32 arrays over
the sorted entity ids. Entities are numbered by the byte order of their ids, so the
numbering does not depend on the order of the input files.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from quillian.components.kg.report import IssueLog
from quillian.errors import InputError

__all__ = [
    "EntityCollector",
    "RaggedFile",
    "StagedGraph",
    "first_occurrences",
    "lookup_sorted",
    "to_bytes_array",
]

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
#: Bytes gathered per step when a ragged file is reordered (bounds the index array).
GATHER_BYTES = 1 << 23


class RaggedFile:
    """Variable-length byte records appended to a file; record ``i`` is addressed by
    its offsets, which stay in memory (8 bytes per record)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 - closed in finish()
        self._lengths = array("q")
        self._offsets: I64 | None = None

    def __len__(self) -> int:
        return len(self._lengths)

    def append(self, records: Sequence[bytes]) -> I64:
        """Append records; returns their record numbers."""
        if self._file is None:
            raise RuntimeError("RaggedFile is finished")
        start = len(self._lengths)
        self._lengths.extend(len(r) for r in records)
        self._file.write(b"".join(records))
        return np.arange(start, len(self._lengths), dtype=np.int64)

    def finish(self) -> None:
        """Close the file; no more appends."""
        if self._file is not None:
            self._file.close()
            self._file = None
        lengths = np.frombuffer(self._lengths, dtype=np.int64) if self._lengths else np.empty(0)
        self._offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self._offsets[1:])

    def gather(self, rows: I64, directory: Path, prefix: str) -> None:
        """Write records ``rows`` (``-1`` = empty) in that order as a text table:
        ``{prefix}_blob.npy`` (uint8) and ``{prefix}_offsets.npy`` (int64)."""
        self.finish()
        assert self._offsets is not None
        offsets = self._offsets
        rows = np.asarray(rows, dtype=np.int64)
        present = np.flatnonzero(rows >= 0)
        starts = np.zeros(len(rows), dtype=np.int64)
        lengths = np.zeros(len(rows), dtype=np.int64)
        starts[present] = offsets[rows[present]]
        lengths[present] = offsets[rows[present] + 1] - starts[present]
        out_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=out_offsets[1:])
        np.save(directory / f"{prefix}_offsets.npy", out_offsets)
        total = int(out_offsets[-1])
        blob_path = directory / f"{prefix}_blob.npy"
        if total == 0:
            np.save(blob_path, np.zeros(0, dtype=np.uint8))
            return
        source = np.memmap(self.path, dtype=np.uint8, mode="r")
        out = np.lib.format.open_memmap(blob_path, mode="w+", dtype=np.uint8, shape=(total,))
        # split rows into runs of about GATHER_BYTES output bytes each
        cuts = np.searchsorted(out_offsets, np.arange(GATHER_BYTES, total, GATHER_BYTES))
        bounds = [0, *np.unique(np.clip(cuts, 1, len(rows))).tolist(), len(rows)]
        for lo, hi in itertools.pairwise(bounds):
            if hi <= lo:
                continue
            a, b = int(out_offsets[lo]), int(out_offsets[hi])
            shift = np.repeat(starts[lo:hi] - (out_offsets[lo:hi] - a), lengths[lo:hi])
            out[a:b] = source[shift + np.arange(b - a)]
        out.flush()
        del out, source

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self.path.unlink(missing_ok=True)


@dataclass
class StagedGraph:
    """A graph read but not yet filtered or written.

    ``ids`` are sorted and unique; ``alias_rows[i]`` / ``description_rows[i]`` are
    entity ``i``'s records in ``aliases`` / ``descriptions`` (``-1``: none). Triples
    are ``heads``/``relations``/``tails`` over entities and ``relation_names``;
    ``relation_aliases[r]`` are relation ``r``'s other names (empty: none, or the reader
    has none to give).
    """

    ids: npt.NDArray[np.bytes_]
    aliases: RaggedFile
    alias_rows: I64
    descriptions: RaggedFile
    description_rows: I64
    heads: I32
    relations: I32
    tails: I32
    relation_ids: list[str]
    relation_names: list[str]
    relation_aliases: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def n_entities(self) -> int:
        return len(self.ids)


def to_bytes_array(ids: Sequence[str], what: str = "id") -> npt.NDArray[np.bytes_]:
    """``ids`` as a fixed-width byte-string array (what numpy sorts and searches fast)."""
    encoded = [s.encode("utf-8") for s in ids]
    for s in encoded:
        if not s or b"\x00" in s:
            raise InputError(f"{what} {s!r} is empty or holds a NUL byte")
    return np.array(encoded, dtype=np.bytes_) if encoded else np.zeros(0, dtype="S1")


def first_occurrences(values: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
    """Mask of the first occurrence of each value (sort-based; faster than np.unique)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.ones(len(values), dtype=bool)
    first[order[1:]] = ordered[1:] != ordered[:-1]
    return first


def lookup_sorted(sorted_keys: npt.NDArray[np.bytes_], keys: npt.NDArray[np.bytes_]) -> I64:
    """Position of each key in ``sorted_keys``, ``-1`` where absent.

    The keys are sorted first: searching in order is several times faster than random
    probes into a large table.
    """
    out = np.full(len(keys), -1, dtype=np.int64)
    if not len(sorted_keys) or not len(keys):
        return out
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    pos = np.minimum(np.searchsorted(sorted_keys, ordered), len(sorted_keys) - 1)
    hit = sorted_keys[pos] == ordered
    out[order[hit]] = pos[hit]
    return out


class EntityCollector:
    """Builds a :class:`StagedGraph` for readers whose entities are few enough for a
    dict (WordNet, RDF): ids get provisional numbers in the order first seen, and are
    renumbered by sorted id at the end.

    An entity that is only referenced (a pointer target, never defined) is reported
    as ``unknown-entity`` at the line of its first reference, and its triples dropped.
    """

    def __init__(self, workdir: Path, issues: IssueLog) -> None:
        self.issues = issues
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.aliases = RaggedFile(workdir / "aliases.bin")
        self.descriptions = RaggedFile(workdir / "descriptions.bin")
        self._alias_rows = array("q")
        self._description_rows = array("q")
        self._first_ref: dict[int, tuple[str, int]] = {}
        self.heads = array("i")
        self.relations = array("i")
        self.tails = array("i")
        self.relation_index: dict[str, int] = {}
        self.relation_names: list[str] = []
        self.relation_aliases: list[tuple[str, ...]] = []

    def entity(self, entity_id: str, path: str = "", line: int = 0) -> int:
        """The provisional number of ``entity_id``, created on first sight."""
        number = self.index.get(entity_id)
        if number is None:
            number = self.index[entity_id] = len(self.ids)
            self.ids.append(entity_id)
            self._alias_rows.append(-1)
            self._description_rows.append(-1)
            if path:
                self._first_ref[number] = (path, line)
        return number

    def define(
        self, entity_id: str, names: Sequence[str], description: str, path: str, line: int
    ) -> bool:
        """Give an entity its names and description; ``False`` (and a ``duplicate-entity``
        issue) when it was defined before."""
        number = self.entity(entity_id)
        self._first_ref.pop(number, None)
        if self._alias_rows[number] >= 0:
            self.issues.add("duplicate-entity", path, line, f"{entity_id} defined again")
            return False
        names = [n for n in dict.fromkeys(" ".join(n.split()) for n in names) if n]
        self._alias_rows[number] = int(self.aliases.append(["\t".join(names).encode("utf-8")])[0])
        if description:
            self._description_rows[number] = int(
                self.descriptions.append([description.encode("utf-8")])[0]
            )
        return True

    def relation(self, relation_id: str, name: str) -> int:
        number = self.relation_index.get(relation_id)
        if number is None:
            number = self.relation_index[relation_id] = len(self.relation_names)
            self.relation_names.append(name)
            self.relation_aliases.append(())
        return number

    def triple(self, head: int, relation: int, tail: int) -> None:
        self.heads.append(head)
        self.relations.append(relation)
        self.tails.append(tail)

    def finish(self) -> StagedGraph:
        """Renumber by sorted id, dropping referenced-but-undefined entities."""
        heads = np.frombuffer(self.heads, dtype=np.int32) if self.heads else np.zeros(0, np.int32)
        rels = np.frombuffer(self.relations, np.int32) if self.relations else np.zeros(0, np.int32)
        tails = np.frombuffer(self.tails, dtype=np.int32) if self.tails else np.zeros(0, np.int32)
        alias_rows = np.array(self._alias_rows, dtype=np.int64)
        defined = alias_rows >= 0
        if self._first_ref:
            undefined = sorted(self._first_ref.items(), key=lambda item: item[1])
            for number, (path, line) in undefined:
                self.issues.add(
                    "unknown-entity", path, line, f"{self.ids[number]} is referenced, never defined"
                )
            keep = defined[heads] & defined[tails]
            heads, rels, tails = heads[keep], rels[keep], tails[keep]
        ids = to_bytes_array(self.ids)
        order = np.argsort(ids, kind="stable")
        order = order[defined[order]]
        renumber = np.full(len(ids), -1, dtype=np.int64)
        renumber[order] = np.arange(len(order))
        relation_ids = sorted(self.relation_index, key=self.relation_index.__getitem__)
        return StagedGraph(
            ids=ids[order],
            aliases=self.aliases,
            alias_rows=alias_rows[order],
            descriptions=self.descriptions,
            description_rows=np.array(self._description_rows, dtype=np.int64)[order],
            heads=renumber[heads].astype(np.int32),
            relations=rels.astype(np.int32),
            tails=renumber[tails].astype(np.int32),
            relation_ids=relation_ids,
            relation_names=list(self.relation_names),
            relation_aliases=list(self.relation_aliases),
        )
