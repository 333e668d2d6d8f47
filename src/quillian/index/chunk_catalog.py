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
keeps them under the log's new end and lets the log forget what precedes it. The
columns are :class:`~quillian.index.blocks.Blocks`: a patch makes again the blocks its
documents' rows fall in and shares the rest, and the file, which joins every value, is
written once updates pause; so what a patch costs does not grow with the corpus but for
the chunks' keys (an array copied, 0.2 ms at 100k passages).

The table read either way is the same: the store's triggers log every chunk and status
change, and a catalog the log cannot follow (another log's, older than what the log
keeps, damaged, or of another version) is ignored and the table read whole. A store
without a log (the in-memory one) is read whole every time.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.index.artifacts import load_arrays, recall, remember, save_arrays, write_later
from quillian.index.blocks import Blocks
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
#: Its version: meta holds (version, mark, digest, checksum of the arrays). Version 1
#: (meta without the checksum: the digest was the checksum) is still read.
_VERSION = "chunk-catalog-2"
_VERSION_1 = "chunk-catalog-1"
#: The string columns, each kept as its values' UTF-8 joined by NUL (a column holding a
#: NUL is not kept: the next build reads the table whole).
_TEXTS = ("ids", "doc_ids", "titles")
_SEP = "\0"
#: Documents changed, per kept chunk, above which the table is read whole: one pass over
#: the store beats reading that many documents one by one.
_REREAD_SHARE = 0.02


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
        table = _read_whole(storage).in_blocks()
        table.catalog = CatalogChanges(_keep(path, mark, table, log))
        return table
    mark, changed = since
    if not changed:
        n = len(kept.table)
        unmoved = ChunkMoves(((0, n, 0),) if n else (), n, n)
        kept.table.catalog = CatalogChanges(kept.digest, kept.digest, moves=unmoved)
        return kept.table
    table, before, after, moves, added = _patched(kept, changed, storage)
    nul_free = not any(_SEP in str(v) for heads in added for head in heads for v in head)
    patch = (kept.digest, changed, added)
    kept_now = _keep(path, mark, table, log, patch if nul_free else None)
    table.catalog = CatalogChanges(kept_now, kept.digest, before, after, moves)
    return table


def _read_whole(storage: Storage) -> ChunkTable:
    processed = set(storage.status.ids_with_status(DocStatus.PROCESSED))
    return ChunkTable.read(storage.documents, processed)


def _patched(
    catalog: _Kept, changed: list[str], storage: Storage
) -> tuple[ChunkTable, dict[str, str], dict[str, str], ChunkMoves, list[list[ChunkHead]]]:
    """The ``catalog``'s table with the rows of the documents ``changed`` (sorted) as
    the store has them now (none unless the document is processed), the titles by
    chunk id of those documents' rows before and after, where the kept rows went, and
    each changed document's rows now."""
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

    def column(old: Sequence[Any], field: int) -> Blocks[Any]:
        """``old`` with each changed document's rows put in where its old ones were:
        the blocks they fall in made again, the others shared with ``old``."""
        edits = [
            (spans[i][1], spans[i + 1][0], [h[field] for h in heads])
            for i, heads in enumerate(added)
        ]
        return Blocks.of(old).spliced(edits)

    ids = column(kept.ids, 2)
    rows = [
        part
        for (low, high), heads in zip(spans, [*added, []], strict=True)
        for part in (kept.rows[low:high], rows_of([h[2] for h in heads]))
    ]
    moved, at = [], 0
    for (low, high), heads in zip(spans, [*added, []], strict=True):
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
    return table, before, after, moves, added


def _qualified(
    kept: npt.NDArray[np.int64], moves: ChunkMoves, titles: Sequence[str]
) -> npt.NDArray[np.int64]:
    """The positions of qualified titles (:attr:`.ChunkTable.qualified`) in the table
    :func:`_patched` makes (of ``titles``): the kept ones where ``moves`` took them,
    and those of the rows added; the other titles are not passed over again."""
    moved = moves.moved(kept)
    added = [at for at in moves.added().tolist() if qualified_title(titles[at])]
    return np.sort(np.concatenate([moved[moved >= 0], np.array(added, dtype=np.int64)]))


def _checksum(
    mark: str, arrays: Mapping[str, npt.NDArray[np.generic]], algorithm: str = ALGORITHM
) -> str:
    """The catalog file's checksum: XXH3-128 (a catalog kept before was hashed with
    BLAKE2b, and is checked with it). Made as version 1 made it, so that one's files
    are checked alike."""
    h = HASHES[algorithm]()
    h.update(f"{_VERSION_1} {mark}".encode())
    for name in (*_TEXTS, "indexes", "rows"):  # the arrays' bytes as they lie, not copied
        h.update(np.ascontiguousarray(arrays[name]).data.cast("B"))
    return h.hexdigest()


def _arrays(table: ChunkTable) -> dict[str, npt.NDArray[np.generic]]:
    """``table``'s columns as the catalog's file keeps them: each string column its
    values' UTF-8 joined by NUL, the positions and keys as integers."""
    arrays: dict[str, npt.NDArray[np.generic]] = {
        name: np.frombuffer(_SEP.join(column).encode("utf-8"), dtype=np.uint8)
        for name, column in zip(_TEXTS, (table.ids, table.doc_ids, table.titles), strict=True)
    }
    arrays["indexes"] = np.fromiter(table.indexes, dtype=np.int64, count=len(table))
    arrays["rows"] = np.asarray(table.rows, dtype=np.int64)
    return arrays


def _nul_free(table: ChunkTable) -> bool:
    """Whether none of ``table``'s ids, document ids and titles holds a NUL."""
    columns = (table.ids, table.doc_ids, table.titles)
    return not any(_SEP in value for column in columns for value in column)


def _keep(
    path: Path,
    mark: str,
    table: ChunkTable,
    log: ChangeLog,
    since: tuple[str, list[str], list[list[ChunkHead]]] | None = None,
) -> str | None:
    """Keep ``table``'s columns under ``mark`` (in this process at once, in the file
    later, :func:`~quillian.index.artifacts.write_later`), then let ``log`` forget what
    precedes it; the digest it is kept under. ``since``: where the table was patched
    from a kept one, that one's digest and the documents changed with their rows now
    (the digest is then made of those, not of every row); where it was read whole,
    None, and every value is checked for a NUL. A table that cannot be kept (a value
    holds a NUL) removes the old catalog (the log then keeps all) and gives None; one
    whose file cannot be written is kept in this process alone (a warning: the next
    process reads an older catalog, which the log follows, or every chunk)."""
    if since is None and not _nul_free(table):
        path.unlink(missing_ok=True)
        logger.info("chunk catalog not kept: a chunk's id or title holds a NUL character")
        return None
    h = HASHES[ALGORITHM]()
    h.update(f"{_VERSION} {mark}".encode())
    if since is None:  # every row: its key, document, position and title
        h.update(b"whole")
        h.update(np.ascontiguousarray(table.rows, dtype=np.int64).data.cast("B"))
        for column in (table.doc_ids, table.indexes, table.titles):
            h.update(_SEP.join(map(str, column)).encode("utf-8"))
    else:  # the digest patched from, and the rows of each document changed
        digest_before, changed, added = since
        h.update(f"since {digest_before}".encode())
        for doc_id, heads in zip(changed, added, strict=True):
            h.update(repr((doc_id, heads)).encode("utf-8"))
    digest = h.hexdigest()
    rows = np.asarray(table.rows, dtype=np.int64)
    # remembered without the store that reads its texts: a recall gives its own
    kept = ChunkTable(
        Blocks.of(table.ids),
        Blocks.of(table.doc_ids),
        Blocks.of(table.indexes),
        Blocks.of(table.titles),
        _unread,
        rows,
        qualified=table.qualified,
        ordered=table.in_index_order(),
        titles_box=table.titles_box,
    )  # the rows as the file holds them (the table's may be a view)
    value = _Kept(mark, digest, kept)

    def save() -> None:
        arrays = _arrays(kept)  # joined here, once updates pause: not at each update
        arrays["meta"] = np.array([_VERSION, mark, digest, _checksum(mark, arrays)])
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
class _Kept:
    mark: str
    digest: str
    table: ChunkTable


def _load(path: Path, read: ReadChunks) -> _Kept | None:
    """The kept catalog (its table's texts read by ``read``); None where there is none,
    or it does not read as written."""
    known = recall(path)
    if isinstance(known, _Kept):  # kept by this process, the file as it left it
        return _Kept(known.mark, known.digest, known.table.reading(read))
    names = (*_TEXTS, "indexes", "rows", "meta")
    arrays = load_arrays(
        path, lambda kept: {n: kept[n] for n in names}, "chunk catalog", "reading every chunk"
    )
    if arrays is None:
        return None
    meta = [str(v) for v in arrays["meta"]]
    if meta[:1] == [_VERSION_1] and len(meta) == 3:
        meta.append(meta[2])  # the digest was the checksum
    if len(meta) != 4 or meta[0] not in (_VERSION, _VERSION_1):
        return None
    mark, digest, checksum = meta[1:]
    if any(arrays[n].dtype != np.uint8 for n in _TEXTS) or not digest_matches(
        checksum, lambda algorithm: _checksum(mark, arrays, algorithm)
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
    table = ChunkTable(
        Blocks.of(ids),
        Blocks.of(doc_ids),
        Blocks.of(arrays["indexes"].tolist()),
        Blocks.of(titles),
        read,
        arrays["rows"].astype(np.int64),
    )
    kept = _Kept(mark, digest, table)
    remember(path, kept, [table.rows])
    return kept
