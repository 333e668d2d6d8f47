"""Every processed chunk's columns, kept between builds and brought up to date from the
store's change log.

A build starts from every processed chunk, in index order, as a
:class:`~quillian.index.chunk_table.ChunkTable`. Reading it from the store (every
chunk's head, every document's status, a sort) and hashing its ids took 0.44 s of an
update at 100k passages (docs/scale.md), though an update changes the rows of the few
documents it adds or deletes. The catalog (:data:`CATALOG_FILE`, at the index root)
keeps the table's columns, with the change log's mark (:class:`~quillian.stores.
protocols.ChangeLog`) taken before they were read. A build reads the documents changed
since that mark, reads only their chunks and statuses, and patches the columns; then
keeps them under the log's new end and lets the log forget what precedes it.

The table read either way is the same: the store's triggers log every chunk and status
change, and a catalog the log cannot follow (another log's, older than what the log
keeps, damaged, or of another version) is ignored and the table read whole. A store
without a log (the in-memory one) is read whole every time.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from quillian.index.artifacts import load_arrays, recall, remember, save_arrays, write_later
from quillian.index.chunk_table import (
    CatalogChanges,
    ChunkMoves,
    ChunkTable,
    ReadChunks,
    qualified_title,
    rows_of,
)
from quillian.index.storage import Storage
from quillian.stores.integrity import ALGORITHM, HASHES, digest_matches
from quillian.stores.protocols import ChangeLog, ChunkHead, DocStatus
from quillian.types import Chunk

__all__ = ["CATALOG_FILE", "processed_chunks"]

logger = logging.getLogger(__name__)

#: The catalog, at the index root.
CATALOG_FILE = "chunk_catalog.npz"
_VERSION = "chunk-catalog-1"
#: The string columns, each kept as its values' UTF-8 joined by NUL (a column holding a
#: NUL is not kept: the next build reads the table whole).
_TEXTS = ("ids", "doc_ids", "titles")
_SEP = "\0"
#: Documents changed, per kept chunk, above which the table is read whole: one pass over
#: the store beats reading that many documents one by one.
_REREAD_SHARE = 0.02
#: Documents changed up to which a column is copied whole and their rows spliced in
#: (a move of the rows after each, in the list's memory), where joining the runs kept
#: copied each run twice: 0.6 against 1.8 ms a column at 100k passages (stop 95).
_SPLICED = 32


def processed_chunks(storage: Storage, *, whole: bool = False) -> ChunkTable:
    """Every chunk of a processed document, in index order (document id, position),
    their texts read when asked for: patched from the catalog where the store's change
    log follows it, else (or where told ``whole``: a repair trusts no cache) read whole;
    kept for the next build either way. The table's :attr:`~.ChunkTable.catalog` says
    how it differs from the table kept before (the linking's delta)."""
    log = storage.changes
    if log is None:
        return _read_whole(storage)
    path = storage.directory / CATALOG_FILE
    kept = None if whole else _load(path, storage.documents.get_chunks)
    since = log.changed_since(kept.mark) if kept is not None else None
    if kept is None or since is None or len(since[1]) > _REREAD_SHARE * len(kept.table) + 16:
        mark = log.mark()  # before reading: a change meanwhile is read again next time
        table = _read_whole(storage)
        table.catalog = CatalogChanges(_keep(path, mark, table, log))
        return table
    mark, changed = since
    if not changed:
        n = len(kept.table)
        unmoved = ChunkMoves(((0, n, 0),) if n else (), n, n)
        kept.table.catalog = CatalogChanges(kept.digest, kept.digest, moves=unmoved)
        return kept.table
    table, before, after, moves, columns = _patched(kept, changed, storage)
    kept_now = _keep(path, mark, table, log, columns)
    table.catalog = CatalogChanges(kept_now, kept.digest, before, after, moves)
    return table


def _read_whole(storage: Storage) -> ChunkTable:
    processed = set(storage.status.ids_with_status(DocStatus.PROCESSED))
    return ChunkTable.read(storage.documents, processed)


def _patched(
    catalog: _Kept, changed: list[str], storage: Storage
) -> tuple[ChunkTable, dict[str, str], dict[str, str], ChunkMoves, _Columns | None]:
    """The ``catalog``'s table with the rows of the documents ``changed`` (sorted) as
    the store has them now (none unless the document is processed), the titles by
    chunk id of those documents' rows before and after, where the kept rows went, and
    the new table's columns as the file keeps them (None: a title or id holds a NUL)."""
    kept = catalog.table
    statuses = storage.status.get_status(changed)
    spans: list[tuple[int, int]] = []  # the kept rows before each changed document's
    added: list[list[ChunkHead]] = []  # and that document's rows now
    before: dict[str, str] = {}
    start = 0
    for doc_id in changed:
        low = bisect.bisect_left(kept.doc_ids, doc_id, start)
        spans.append((start, low))
        start = bisect.bisect_right(kept.doc_ids, doc_id, low)
        before.update(zip(kept.ids[low:start], kept.titles[low:start], strict=True))
        record = statuses.get(doc_id)
        processed = record is not None and record.status == DocStatus.PROCESSED
        chunks = storage.documents.chunks_of(doc_id) if processed else []
        added.append(sorted((c.doc_id, c.index, c.id, c.title) for c in chunks))
    spans.append((start, len(kept)))
    added.append([])

    def column(old: list[Any], field: int) -> list[Any]:
        if len(changed) <= _SPLICED:  # copied once, each document's rows put in, last first
            out = old.copy()
            for i in range(len(changed) - 1, -1, -1):
                out[spans[i][1] : spans[i + 1][0]] = [h[field] for h in added[i]]
            return out
        out = []
        for (low, high), heads in zip(spans, added, strict=True):
            out += old[low:high]
            out += [h[field] for h in heads]
        return out

    ids = column(kept.ids, 2)
    rows = [
        part
        for (low, high), heads in zip(spans, added, strict=True)
        for part in (kept.rows[low:high], rows_of([h[2] for h in heads]))
    ]
    moved, at = [], 0
    for (low, high), heads in zip(spans, added, strict=True):
        if high > low:
            moved.append((low, high, at))
        at += high - low + len(heads)
    moves = ChunkMoves(tuple(moved), len(kept), len(ids))
    titles = column(kept.titles, 3)
    after = {h[2]: h[3] for heads in added for h in heads}
    table = ChunkTable(
        ids,
        column(kept.doc_ids, 0),
        column(kept.indexes, 1),
        titles,
        storage.documents.get_chunks,
        np.concatenate(rows),
        qualified=_qualified(kept.qualified, moves, titles),
        # in order where the kept rows were and each document's new ones are (placed
        # among them by document); else compared again, as the changed rows may have
        # been the ones out of order
        ordered=(
            kept.in_index_order()
            and all(a[1] < b[1] for heads in added for a, b in itertools.pairwise(heads))
        )
        or None,
        titles_box=kept.passed_titles(before, after, len(ids)),
    )
    columns = catalog.columns.patched(spans, added) if catalog.columns is not None else None
    return table, before, after, moves, columns


def _qualified(
    kept: npt.NDArray[np.int64], moves: ChunkMoves, titles: list[str]
) -> npt.NDArray[np.int64]:
    """The positions of qualified titles (:attr:`.ChunkTable.qualified`) in the table
    :func:`_patched` makes (of ``titles``): the kept ones where ``moves`` took them,
    and those of the rows added; the other titles are not passed over again."""
    moved = moves.moved(kept)
    added = [at for at in moves.added().tolist() if qualified_title(titles[at])]
    return np.sort(np.concatenate([moved[moved >= 0], np.array(added, dtype=np.int64)]))


def _digest(
    mark: str, arrays: dict[str, npt.NDArray[np.generic]], algorithm: str = ALGORITHM
) -> str:
    """The catalog's checksum: XXH3-128 (a catalog kept before was hashed with BLAKE2b,
    and is checked with it)."""
    h = HASHES[algorithm]()
    h.update(f"{_VERSION} {mark}".encode())
    for name in (*_TEXTS, "indexes", "rows"):  # the arrays' bytes as they lie, not copied
        h.update(np.ascontiguousarray(arrays[name]).data.cast("B"))
    return h.hexdigest()


def _keep(
    path: Path, mark: str, table: ChunkTable, log: ChangeLog, columns: _Columns | None = None
) -> str | None:
    """Keep ``table``'s columns under ``mark`` (in this process at once, in the file
    later, :func:`~quillian.index.artifacts.write_later`), then let ``log`` forget what
    precedes it; the digest it is kept under. ``columns``: the table's as the file
    keeps them, carried from the kept table's (else made from the table's). A table
    that cannot be kept removes the old catalog (the log then keeps all) and gives
    None; one whose file cannot be written is kept in this process alone (a warning:
    the next process reads an older catalog, which the log follows, or every chunk)."""
    columns = columns or _Columns.of(table)
    if columns is None:
        path.unlink(missing_ok=True)
        logger.info("chunk catalog not kept: a chunk's id or title holds a NUL character")
        return None
    arrays: dict[str, npt.NDArray[np.generic]] = {
        name: np.frombuffer(column.data, dtype=np.uint8)
        for name, column in zip(_TEXTS, columns.texts, strict=True)
    }
    arrays["indexes"] = columns.indexes
    arrays["rows"] = np.asarray(table.rows, dtype=np.int64)
    digest = _digest(mark, arrays)
    arrays["meta"] = np.array([_VERSION, mark, digest])

    rows = cast(npt.NDArray[np.int64], arrays["rows"])
    # remembered without the store that reads its texts: a recall gives its own
    kept = ChunkTable(
        table.ids,
        table.doc_ids,
        table.indexes,
        table.titles,
        _unread,
        rows,
        qualified=table.qualified,
        ordered=table.in_index_order(),
        titles_box=table.titles_box,
    )  # the rows as the file holds them (the table's may be a view)
    value = _Kept(mark, digest, kept, columns)

    def save() -> None:
        try:
            save_arrays(path, arrays)
        except OSError as exc:
            logger.warning("chunk catalog not kept in %s (%s): reading every chunk next", path, exc)
            return
        remember(path, value, [rows])  # a recall waits for it

    write_later(path, save, value, [rows])  # 8 MB at 100k passages, once updates pause
    log.forget(mark)
    return digest


def _unread(ids: Sequence[str]) -> Sequence[Chunk | None]:
    raise AssertionError("a remembered chunk catalog reads no texts")


@dataclass(frozen=True, slots=True)
class _Text:
    """A string column as the catalog's file keeps it: its values' UTF-8 joined by NUL
    (``data``), and the byte each value starts at (``starts``)."""

    data: bytes
    starts: npt.NDArray[np.int64]

    @classmethod
    def of(cls, values: Sequence[str]) -> _Text | None:
        """The column of ``values``; None where one holds a NUL."""
        joined = _SEP.join(values)
        if joined.count(_SEP) != max(len(values) - 1, 0):
            return None
        return cls.read(joined.encode("utf-8"), len(values))

    @classmethod
    def read(cls, data: bytes, n: int) -> _Text:
        """The column of ``n`` values joined into ``data``."""
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0)
        return cls(data, np.concatenate(([0], ends + 1)).astype(np.int64)[:n])

    def patched(self, spans: list[tuple[int, int]], added: list[list[str]]) -> _Text | None:
        """This column with the values of ``added[i]`` after its values
        ``spans[i]`` (as :func:`_patched` gives them): its runs of values kept copied
        once, not joined again value by value; None where an added value holds a NUL."""
        pieces: list[bytes | memoryview] = []
        starts: list[npt.NDArray[np.int64]] = []
        at, n, data = 0, len(self.starts), memoryview(self.data)
        for (low, high), values in zip(spans, added, strict=True):
            if high > low:
                lo = int(self.starts[low])
                hi = int(self.starts[high]) - 1 if high < n else len(self.data)
                pieces.append(data[lo:hi])
                starts.append(self.starts[low:high] - lo + at)
                at += hi - lo + 1
            for value in values:
                if _SEP in value:
                    return None
                encoded = value.encode("utf-8")
                pieces.append(encoded)
                starts.append(np.array([at], dtype=np.int64))
                at += len(encoded) + 1
        if not starts:
            return _Text(b"", np.zeros(0, dtype=np.int64))
        return _Text(b"\0".join(pieces), np.concatenate(starts))


@dataclass(frozen=True, slots=True)
class _Columns:
    """A table's columns as the catalog's file keeps them: ids, document ids and titles
    (:data:`_TEXTS`), and the positions in their documents. Made from a table's lists
    (joining 100k values and checking them for a NUL took 0.01 s of an update), or
    carried from the kept table's by what changed."""

    texts: tuple[_Text, _Text, _Text]
    indexes: npt.NDArray[np.int64]

    @classmethod
    def of(cls, table: ChunkTable) -> _Columns | None:
        """The columns of ``table``; None where a value holds a NUL."""
        texts = [_Text.of(column) for column in (table.ids, table.doc_ids, table.titles)]
        if any(text is None for text in texts):
            return None
        ids, doc_ids, titles = cast(list[_Text], texts)
        return cls((ids, doc_ids, titles), np.asarray(table.indexes, dtype=np.int64))

    def patched(
        self, spans: list[tuple[int, int]], added: list[list[ChunkHead]]
    ) -> _Columns | None:
        """These columns after :func:`_patched`'s change (``spans`` kept, each followed
        by the heads ``added``); None where an added value holds a NUL."""
        texts = [
            text.patched(spans, [[str(head[field]) for head in heads] for heads in added])
            for text, field in zip(self.texts, (2, 0, 3), strict=True)
        ]
        if any(text is None for text in texts):
            return None
        ids, doc_ids, titles = cast(list[_Text], texts)
        indexes = [
            part
            for (low, high), heads in zip(spans, added, strict=True)
            for part in (self.indexes[low:high], np.array([h[1] for h in heads], np.int64))
        ]
        return _Columns((ids, doc_ids, titles), np.concatenate(indexes))


@dataclass(frozen=True, slots=True)
class _Kept:
    mark: str
    digest: str
    table: ChunkTable
    columns: _Columns | None = None


def _load(path: Path, read: ReadChunks) -> _Kept | None:
    """The kept catalog (its table's texts read by ``read``); None where there is none,
    or it does not read as written."""
    known = recall(path)
    if isinstance(known, _Kept):  # kept by this process, the file as it left it
        return _Kept(known.mark, known.digest, known.table.reading(read), known.columns)
    names = (*_TEXTS, "indexes", "rows", "meta")
    arrays = load_arrays(
        path, lambda kept: {n: kept[n] for n in names}, "chunk catalog", "reading every chunk"
    )
    if arrays is None:
        return None
    meta = [str(v) for v in arrays["meta"]]
    if len(meta) != 3 or meta[0] != _VERSION:
        return None
    mark, digest = meta[1], meta[2]
    if any(arrays[n].dtype != np.uint8 for n in _TEXTS) or not digest_matches(
        digest, lambda algorithm: _digest(mark, arrays, algorithm)
    ):
        logger.warning("chunk catalog %s fails its checksum: reading every chunk", path)
        return None
    n = len(arrays["indexes"])
    data = [arrays[name].tobytes() for name in _TEXTS]
    try:
        ids, doc_ids, titles = (d.decode("utf-8").split(_SEP) if n else [] for d in data)
    except UnicodeDecodeError:
        return None
    if not len(ids) == len(doc_ids) == len(titles) == len(arrays["rows"]) == n:
        logger.warning("chunk catalog %s has columns of different lengths: ignored", path)
        return None
    indexes = arrays["indexes"].astype(np.int64)
    table = ChunkTable(
        ids, doc_ids, indexes.tolist(), titles, read, arrays["rows"].astype(np.int64)
    )
    texts = [_Text.read(d, n) for d in data]
    kept = _Kept(mark, digest, table, _Columns((texts[0], texts[1], texts[2]), indexes))
    remember(path, kept, [table.rows])
    return kept
