"""Every processed chunk of an index, held as columns, its texts read only where needed.

A build's stages pass over every chunk many times (the linking's titles, the graph's
chunk nodes, the BM25 and vector collections' ids), but read the text only of the
chunks an update adds or changes. Reading every chunk as a :class:`~quillian.types.Chunk`
object, text and all, was the largest single part of an update of a 100k-passage index
(``processed_chunks``, about 0.55 s of 3.5 s; docs/scale.md). A :class:`ChunkTable`
holds the chunks' ids, document ids, positions and titles as sequences (lists, or
:class:`~quillian.index.blocks.Blocks` where the chunk catalog keeps them), read from
the store without the texts
(:meth:`~quillian.stores.protocols.DocumentStore.iter_chunk_heads`); a chunk object,
with its text, is made when one is asked for.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from quillian.errors import StoreError
from quillian.index.blocks import Blocks
from quillian.stores.protocols import ChunkHead, DocumentStore
from quillian.types import Chunk, key64

__all__ = [
    "CatalogChanges",
    "ChunkMoves",
    "ChunkTable",
    "ReadChunks",
    "TitlesById",
    "qualified_title",
    "rows_of",
]

#: Chunks read from the store at once when a table is iterated.
PAGE = 1000

#: Reads chunks by id, in the order asked for (None: not stored).
ReadChunks = Callable[[Sequence[str]], Sequence[Chunk | None]]


@dataclass(frozen=True, slots=True)
class ChunkMoves:
    """Where the rows of one table went in the next, which the chunk catalog patched
    from it: ``spans`` of rows kept, each ``(start, end, to)`` (rows ``start:end`` of
    the old table are rows ``to:to + end - start`` of the new one, spans in order), of
    tables of ``before`` and ``after`` rows. The new table's other rows were added (the
    changed documents' rows now), the old table's other rows are gone (theirs before).

    What a stage keeps by chunk position (its keys, a position map) is carried to the
    new table through these, at the cost of copying it and of the rows added and gone,
    not of looking every chunk up again."""

    spans: tuple[tuple[int, int, int], ...]
    before: int
    after: int

    def added(self) -> npt.NDArray[np.int64]:
        """The new table's rows no span kept, in order."""
        return _uncovered([(to, to + end - start) for start, end, to in self.spans], self.after)

    def gone(self) -> npt.NDArray[np.int64]:
        """The old table's rows no span kept, in order."""
        return _uncovered([(start, end) for start, end, _ in self.spans], self.before)

    def carry(
        self, old: npt.NDArray[np.generic], added: npt.NDArray[np.generic]
    ) -> npt.NDArray[np.generic]:
        """The array by new row of ``old`` (one value by old row): each kept row's value
        moved with it, ``added`` (one value by row of :meth:`added`, in order) at the
        others."""
        if len(old) != self.before:
            raise ValueError(f"{len(old)} values for a table of {self.before} rows")
        rows = self.added()
        if len(added) != len(rows):
            raise ValueError(f"{len(added)} values for {len(rows)} rows added")
        out = np.empty(self.after, dtype=np.result_type(old, added))
        for start, end, to in self.spans:
            out[to : to + end - start] = old[start:end]
        out[rows] = added
        return out

    def every(self) -> npt.NDArray[np.int64]:
        """Each old row's new row (-1: gone): :meth:`moved` of every row, written span
        by span, not searched for row by row."""
        out = np.full(self.before, -1, dtype=np.int64)
        for start, end, to in self.spans:
            out[start:end] = np.arange(to, to + end - start, dtype=np.int64)
        return out

    def moved(self, rows: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
        """The new row of each of the old table's ``rows`` (-1: gone; a negative row
        stays -1)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.full(len(rows), -1, dtype=np.int64)
        if not self.spans:
            return out
        starts = np.array([s for s, _, _ in self.spans], dtype=np.int64)
        ends = np.array([e for _, e, _ in self.spans], dtype=np.int64)
        shift = np.array([to - s for s, _, to in self.spans], dtype=np.int64)
        span = np.searchsorted(starts, rows, side="right") - 1
        ok = (rows >= 0) & (span >= 0)
        ok[ok] &= rows[ok] < ends[span[ok]]
        out[ok] = rows[ok] + shift[span[ok]]
        return out


def _uncovered(spans: list[tuple[int, int]], n: int) -> npt.NDArray[np.int64]:
    """The rows of ``0..n-1`` outside ``spans`` (in order, not overlapping)."""
    parts, at = [], 0
    for start, end in spans:
        parts.append(np.arange(at, start, dtype=np.int64))
        at = end
    parts.append(np.arange(at, n, dtype=np.int64))
    return np.concatenate(parts)


@dataclass(frozen=True, slots=True)
class CatalogChanges:
    """How a table read through the chunk catalog (:mod:`.chunk_catalog`) stands to the
    one the catalog kept before: ``kept`` the digest the table is kept under now (None:
    not kept), and where it was patched from a kept table, ``since`` that table's digest
    and the titles by chunk id of the documents that changed, ``before`` in that table
    and ``after`` in this one (None: read whole), and where that table's rows went
    (``moves``). A chunk of no changed document has the same title in both, and its
    place moved only by the rows added and gone before it."""

    kept: str | None
    since: str | None = None
    before: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, str] = field(default_factory=dict)
    moves: ChunkMoves | None = None


class ChunkTable(Sequence[Chunk]):
    """Chunks in index order (document id, then position) as columns: :attr:`ids`,
    :attr:`doc_ids`, :attr:`indexes` and :attr:`titles`. Indexing, slicing and iterating
    give :class:`~quillian.types.Chunk` objects, their texts read then (a page at a
    time when iterated); :meth:`chunks` reads those of some ids at once."""

    def __init__(
        self,
        ids: Sequence[str],
        doc_ids: Sequence[str],
        indexes: Sequence[int],
        titles: Sequence[str],
        read: ReadChunks,
        rows: npt.NDArray[np.int64] | None = None,
        *,
        qualified: npt.NDArray[np.int64] | None = None,
        ordered: bool | None = None,
        titles_box: list[dict[str, str] | None] | None = None,
    ) -> None:
        if not len(ids) == len(doc_ids) == len(indexes) == len(titles):
            raise ValueError("a chunk table's columns differ in length")
        if rows is not None and len(rows) != len(ids):
            raise ValueError("a chunk table's rows differ in length from its ids")
        self.ids, self.doc_ids, self.indexes, self.titles = ids, doc_ids, indexes, titles
        self._read = read
        self._rows = rows
        self._qualified, self._ordered = qualified, ordered
        #: the titles by id once made (:meth:`titles_by_id`), shared by the tables of the
        #: same columns (:meth:`reading`, the catalog's kept copy)
        self.titles_box: list[dict[str, str] | None] = titles_box or [None]
        #: set by the chunk catalog that read the table (None: not read through one)
        self.catalog: CatalogChanges | None = None

    @classmethod
    def of(cls, chunks: Sequence[Chunk]) -> ChunkTable:
        """The table of chunks in hand (in the order given; their texts are kept)."""
        if isinstance(chunks, ChunkTable):
            return chunks
        by_id = {c.id: c for c in chunks}
        return cls(
            [c.id for c in chunks],
            [c.doc_id for c in chunks],
            [c.index for c in chunks],
            [c.title for c in chunks],
            lambda ids: [by_id.get(i) for i in ids],
        )

    @classmethod
    def read(cls, store: DocumentStore, doc_ids: set[str]) -> ChunkTable:
        """The chunks of the documents ``doc_ids`` stored in ``store``, in index order;
        their texts read from ``store`` when asked for."""
        heads: list[ChunkHead] = [h for h in store.iter_chunk_heads() if h[0] in doc_ids]
        heads.sort()  # by document and position: twice as fast as by a key
        if not heads:
            return cls([], [], [], [], store.get_chunks)
        docs, indexes, ids, titles = (list(column) for column in zip(*heads, strict=True))
        return cls(ids, docs, indexes, titles, store.get_chunks)

    def reading(self, read: ReadChunks) -> ChunkTable:
        """This table, its texts read by ``read`` (what it knows of its titles and order
        kept)."""
        return ChunkTable(
            self.ids,
            self.doc_ids,
            self.indexes,
            self.titles,
            read,
            self.rows,
            qualified=self.qualified,
            ordered=self.in_index_order(),
            titles_box=self.titles_box,
        )

    def in_blocks(self) -> ChunkTable:
        """This table, its columns held as :class:`~quillian.index.blocks.Blocks` (what
        the chunk catalog patches at the cost of the blocks a change falls in)."""
        return ChunkTable(
            Blocks.of(self.ids),
            Blocks.of(self.doc_ids),
            Blocks.of(self.indexes),
            Blocks.of(self.titles),
            self._read,
            self._rows,
            qualified=self._qualified,
            ordered=self._ordered,
            titles_box=self.titles_box,
        )

    def titles_by_id(self) -> TitlesById:
        """Each chunk's title by its id, iterated in index order: made once for the
        columns, unless the table it was patched from had made them (see
        :meth:`passed_titles`)."""
        by_id = self.titles_box[0]
        if by_id is None:
            by_id = self.titles_box[0] = dict(zip(self.ids, self.titles, strict=True))
        return TitlesById(self.ids, by_id)

    def passed_titles(
        self, before: Collection[str], after: Mapping[str, str], count: int
    ) -> list[dict[str, str] | None]:
        """A box for a table patched from this one, whose documents that changed had
        the chunks ``before`` here and have the titles ``after`` there, of ``count``
        chunks in all: holding this table's titles by id where they were made, changed
        by those documents (0.007 s at 100k passages where made from every chunk again).
        They are moved, not copied: this table no longer has them."""
        by_id, self.titles_box[0] = self.titles_box[0], None
        if by_id is None:
            return [None]
        for chunk_id in before:
            by_id.pop(chunk_id, None)
        by_id.update(after)
        return [by_id if len(by_id) == count else None]  # an id twice: made again

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, at: int) -> Chunk: ...
    @overload
    def __getitem__(self, at: slice) -> list[Chunk]: ...
    def __getitem__(self, at: int | slice) -> Chunk | list[Chunk]:
        if isinstance(at, slice):
            return self.chunks(self.ids[at])
        return self.chunks([self.ids[at]])[0]

    def __iter__(self) -> Iterator[Chunk]:
        for start in range(0, len(self.ids), PAGE):
            yield from self.chunks(self.ids[start : start + PAGE])

    def chunks(self, ids: Sequence[str]) -> list[Chunk]:
        """The chunks ``ids``, texts and all, in the order asked for."""
        found = self._read(ids)
        missing = next((i for i, c in zip(ids, found, strict=True) if c is None), None)
        if missing is not None:
            raise StoreError(f"chunk {missing} is listed but not in the document store")
        return list(found)  # type: ignore[arg-type]  # None ruled out above

    def at(self, positions: Sequence[int]) -> list[Chunk]:
        """The chunks at ``positions``."""
        ids = self.ids
        return self.chunks([ids[p] for p in positions])

    def ids_among(self, wanted: Collection[str]) -> list[str]:
        """Those of ``wanted`` the table holds, in its order: found by their keys among
        the table's where it holds them (:attr:`rows`), else by a pass over its ids. A
        link's update asked a set of every id (at 100k passages its delete took 6.2 ms,
        2.7 ms now: ``research/update_stages.py --functions``)."""
        if not wanted:
            return []
        if self._rows is None:
            return [i for i in self.ids if i in wanted]
        ids = self.ids
        at = np.flatnonzero(np.isin(self._rows, rows_of(list(wanted)))).tolist()
        return [ids[p] for p in at if ids[p] in wanted]  # a key shared by another id

    @property
    def rows(self) -> npt.NDArray[np.int64]:
        """Each chunk's 64-bit key (:func:`~quillian.types.key64` of its id), the key of
        its rows in the graph tables; hashed once per table, unless given."""
        if self._rows is None:
            self._rows = rows_of(self.ids)
        return self._rows

    def in_index_order(self) -> bool:
        """Whether the chunks are in index order, each place (document, position) once:
        compared once per table, unless given (a table patched from one in order)."""
        if self._ordered is None:
            places = zip(self.doc_ids, self.indexes, strict=True)
            self._ordered = all(a < b for a, b in itertools.pairwise(places))
        return self._ordered

    @property
    def qualified(self) -> npt.NDArray[np.int64]:
        """The positions of the chunks whose title ends in a qualifier
        (:func:`qualified_title`), in order: found once per table, unless given (a table
        patched from another keeps its positions, so an update does not pass over every
        title; the graph stage's titled names read them)."""
        if self._qualified is None:
            found = [i for i, title in enumerate(self.titles) if qualified_title(title)]
            self._qualified = np.array(found, dtype=np.int64)
        return self._qualified


class TitlesById(Mapping[str, str]):
    """A table's titles by chunk id (a dict), iterated in the table's order."""

    def __init__(self, ids: Sequence[str], by_id: dict[str, str]) -> None:
        self._ids, self._by_id = ids, by_id

    def __getitem__(self, chunk_id: str) -> str:
        return self._by_id[chunk_id]

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._by_id

    def get(self, chunk_id: str, default: Any = None) -> Any:
        return self._by_id.get(chunk_id, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def qualified_title(title: str) -> bool:
    """Whether ``title`` ends in a parenthesised qualifier, as "Mercury (planet)": the
    only titles with a base (:func:`~quillian.components.retrieval.seeding.title_base`)."""
    return title.rstrip().endswith(")")


def rows_of(chunk_ids: Collection[str]) -> npt.NDArray[np.int64]:
    """The 64-bit keys (:func:`~quillian.types.key64`) of ``chunk_ids``, in order."""
    return np.fromiter(map(key64, chunk_ids), dtype=np.int64, count=len(chunk_ids))
