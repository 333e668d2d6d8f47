"""SQLite-backed document, status and key-value stores (stdlib :mod:`sqlite3`, no server),
and the change log of the first two.

The stores may share one database file (conventionally ``store.sqlite`` in the index
directory); each opens its own connection. The change log must share the document and
status stores' file: its triggers write it in their transactions. Every write is one
transaction: a batch holding a bad item is rejected whole and leaves what was stored
before intact.

>>> docs = SqliteDocumentStore(tmp / "store.sqlite")  # doctest: +SKIP
>>> status = SqliteStatusStore(tmp / "store.sqlite")  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from quillian.errors import InputError, StoreError
from quillian.stores.embedded._sqlite import (
    IN_BATCH,
    PAGE,
    SqliteStore,
    copy_with_log,
    quick_check,
    sqlite_rebuild_hint,
    wal_bytes,
    wal_mode,
)
from quillian.stores.embedded.row_counts import keep_counts, row_count
from quillian.stores.packed import pack_text, unpack_text
from quillian.stores.protocols import ChunkHead, DocStatus, StatusRecord
from quillian.types import Chunk, Document

__all__ = [
    "SPAN",
    "SqliteChangeLog",
    "SqliteDocumentStore",
    "SqliteKeyValueStore",
    "SqliteStatusStore",
    "copy_with_log",
    "quick_check",
    "sqlite_rebuild_hint",
    "stored_chunk_texts",
    "stored_values",
    "wal_bytes",
    "wal_mode",
]

#: The stored columns of a document and of a chunk, in the order of :func:`_document_row`
#: and :func:`_chunk_row` (the PostgreSQL store uses the same layout).
_DOC_COLUMNS = "id, title, text, source, metadata"
_CHUNK_COLUMNS = "id, doc_id, idx, text, char_start, char_end, title"


class SqliteDocumentStore(SqliteStore):
    """:class:`~quillian.stores.protocols.DocumentStore` in SQLite.

    ``put_*`` upserts by id, so putting the same document twice is a no-op. Document
    metadata is stored as JSON and must survive JSON unchanged (string keys; lists, not
    tuples); anything else is rejected with :class:`~quillian.errors.InputError`.
    """

    SCHEMA_NAME = "documents"
    #: 2: long texts stored compressed (:mod:`~quillian.stores.packed`); 3: a chunk's
    #: text kept as its span of its document's (:data:`SPAN`). A store of an earlier
    #: version has no such rows and is read as it is, marked 3 when opened (so an
    #: earlier Quillian refuses it rather than read a span as a text).
    SCHEMA_VERSION = 3
    SCHEMA_UPGRADES = frozenset({1, 2})
    DDL = (
        "CREATE TABLE IF NOT EXISTS documents (id TEXT PRIMARY KEY, title TEXT NOT NULL, "
        "text TEXT NOT NULL, source TEXT NOT NULL, metadata TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS chunks (id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, "
        "idx INTEGER NOT NULL, text TEXT NOT NULL, char_start INTEGER NOT NULL, "
        "char_end INTEGER NOT NULL, title TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id, idx)",
    )

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._long_texts = _LongTexts()

    def _schema_ready(self, conn: sqlite3.Connection) -> None:
        """The documents and chunks counted as they come and go (:meth:`count_documents`
        and :meth:`count_chunks` read one row, not every page: each build and each
        opening of an index asks)."""
        keep_counts(conn, ("documents", "chunks"))

    def put_documents(self, documents: Sequence[Document]) -> None:
        """Insert or replace ``documents`` (keyed by ``Document.id``) in one transaction.
        A stored document whose text changes first gives the chunks kept as its spans
        their texts (:meth:`put_chunks`): a chunk's text never changes but by a put."""
        rows = [_document_row(d, packed=True) for d in documents]
        if not rows:
            return
        with self._transaction("store documents") as conn:
            self._long_texts.clear()  # this connection's writes leave data_version as it is
            self._keep_span_texts(conn, rows)
            conn.executemany(
                f"INSERT INTO documents ({_DOC_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET title = excluded.title, text = excluded.text, "
                "source = excluded.source, metadata = excluded.metadata",
                rows,
            )

    def put_chunks(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace ``chunks`` (keyed by ``Chunk.id``) in one transaction. A
        chunk whose text is its document's between its offsets, that document stored,
        keeps no text of its own (:data:`SPAN`): it is read from the document's, so the
        corpus's text is stored once, not twice (about 10 MB of the 20 MB text's index
        and of the 100k passages', docs/scale.md)."""
        if not chunks:
            return
        with self._transaction("store chunks") as conn:
            span_of = _Texts(conn).span_of
            rows = [_chunk_row(c, packed=True, span_of=span_of) for c in chunks]
            conn.executemany(
                f"INSERT INTO chunks ({_CHUNK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET doc_id = excluded.doc_id, idx = excluded.idx, "
                "text = excluded.text, char_start = excluded.char_start, "
                "char_end = excluded.char_end, title = excluded.title",
                rows,
            )

    def _keep_span_texts(
        self, conn: sqlite3.Connection, rows: Sequence[tuple[str, str, str | bytes, str, str]]
    ) -> None:
        """Give each chunk kept as a span of a document of ``rows`` whose stored text
        differs from the row's its text, read from the stored one."""
        new = {row[0]: row[2] for row in rows}
        ids = list(new)
        for start in range(0, len(ids), IN_BATCH):
            batch = ids[start : start + IN_BATCH]
            marks = ",".join("?" * len(batch))
            stored = conn.execute(
                f"SELECT d.id, d.text FROM documents d WHERE d.id IN ({marks}) AND EXISTS"
                f" (SELECT 1 FROM chunks c WHERE c.doc_id = d.id AND {_IS_SPAN})",
                batch,
            ).fetchall()
            for doc_id, text in stored:
                if text == new[doc_id] or unpack_text(text) == unpack_text(new[doc_id]):
                    continue
                whole = unpack_text(text)
                spans = conn.execute(
                    f"SELECT id, char_start, char_end FROM chunks WHERE doc_id = ? AND {_IS_SPAN}",
                    (doc_id,),
                ).fetchall()
                conn.executemany(
                    "UPDATE chunks SET text = ? WHERE id = ?",
                    ((pack_text(whole[s:e]), chunk_id) for chunk_id, s, e in spans),
                )

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        """Delete documents and their chunks in one transaction; unknown ids are ignored."""
        rows = [(d,) for d in dict.fromkeys(doc_ids)]
        if not rows:
            return
        with self._transaction("delete documents") as conn:
            self._long_texts.clear()
            conn.executemany("DELETE FROM chunks WHERE doc_id = ?", rows)
            conn.executemany("DELETE FROM documents WHERE id = ?", rows)

    def get_documents(self, doc_ids: Sequence[str]) -> list[Document | None]:
        """Documents in the order asked for, ``None`` for an unknown id."""
        sql = f"SELECT {_DOC_COLUMNS} FROM documents WHERE id IN ({{marks}})"
        found = self._by_keys("read documents", sql, doc_ids)
        return [_document(found[i]) if i in found else None for i in doc_ids]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk | None]:
        """Chunks in the order asked for, ``None`` for an unknown id."""
        sql = f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE id IN ({{marks}})"
        found = self._by_keys("read chunks", sql, chunk_ids)
        chunks = dict(zip(found, self._chunks(list(found.values())), strict=True))
        return [chunks.get(i) for i in chunk_ids]

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        """The chunks of one document, ordered by their index."""
        rows = self._query(
            "read chunks",
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE doc_id = ? ORDER BY idx, id",
            (doc_id,),
        )
        return self._chunks(rows)

    def iter_chunks(self) -> Iterator[Chunk]:
        """Every chunk, in insertion order, read page by page."""
        page: list[Any] = []
        for row in self._chunk_rows(_CHUNK_COLUMNS):
            page.append(row)
            if len(page) == PAGE:
                yield from self._chunks(page)
                page = []
        yield from self._chunks(page)

    def _chunks(self, rows: Sequence[Sequence[Any]]) -> list[Chunk]:
        """The chunks of stored rows (:data:`_CHUNK_COLUMNS`), a span's text read from
        its document's (each document's text read and unpacked once)."""
        wanted = {r[1] for r in rows if _is_span(r[3])}
        if not wanted:
            return [_chunk(r) for r in rows]
        with self._errors("read chunks' documents") as conn:
            (version,) = conn.execute("PRAGMA data_version").fetchone()
            texts = self._long_texts.recall(version, wanted)
        sql = "SELECT id, text FROM documents WHERE id IN ({marks})"
        found = self._by_keys("read chunks' documents", sql, list(wanted - texts.keys()))
        with self._lock:
            read = {d: (row[1], self._long_texts.text(d, row[1])) for d, row in found.items()}
            self._long_texts.keep(version, read)
        texts.update((d, text) for d, (_, text) in read.items())
        out = []
        for row in rows:
            if not _is_span(row[3]):
                out.append(_chunk(row))
                continue
            chunk_id, doc_id, index, _, start, end, title = row
            text = texts.get(doc_id)
            if text is None or end > len(text):
                raise StoreError(
                    f"{self._path}: chunk {chunk_id} is kept as its span of document"
                    f" {doc_id}, which the store does not hold whole"
                )
            out.append(Chunk.stored(chunk_id, doc_id, index, text[start:end], start, end, title))
        return out

    def iter_chunk_heads(self) -> Iterator[ChunkHead]:
        """Every chunk's document id, index, id and title (no text), in insertion order,
        read page by page: a build's pass over every chunk reads no text."""
        return self._chunk_rows("doc_id, idx, id, title")

    def _chunk_rows(self, columns: str) -> Iterator[Any]:
        """``columns`` of every chunk, in insertion order, a page at a time."""
        last = 0
        while True:
            rows = self._query(
                "read chunks",
                f"SELECT rowid, {columns} FROM chunks WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (last, PAGE),
            )
            yield from (r[1:] for r in rows)
            if len(rows) < PAGE:
                return
            last = rows[-1][0]

    def count_documents(self) -> int:
        """Number of stored documents."""
        with self._errors("count documents") as conn:
            return row_count(conn, "documents")

    def count_chunks(self) -> int:
        """Number of stored chunks."""
        with self._errors("count chunks") as conn:
            return row_count(conn, "chunks")


class SqliteStatusStore(SqliteStore):
    """:class:`~quillian.stores.protocols.StatusStore` in SQLite.

    ``set_status`` replaces a document's status and error; its source is replaced only
    when a non-empty one is given, so a source recorded at ``pending`` survives the later
    transitions.
    """

    SCHEMA_NAME = "doc_status"
    DDL = (
        "CREATE TABLE IF NOT EXISTS doc_status (doc_id TEXT PRIMARY KEY, "
        "status TEXT NOT NULL, error TEXT NOT NULL, source TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS doc_status_by_status ON doc_status (status, doc_id)",
    )

    def set_status(
        self, doc_ids: Sequence[str], status: DocStatus, *, error: str = "", source: str = ""
    ) -> None:
        """Set the status of ``doc_ids`` (with an error text and a source) in one transaction."""
        value = _status(status)
        _require_str(error, "error")
        _require_str(source, "source")
        for doc_id in doc_ids:
            _require_str(doc_id, "doc_id")
        self._write(
            "set document status",
            "INSERT INTO doc_status (doc_id, status, error, source) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(doc_id) DO UPDATE SET status = excluded.status, "
            "error = excluded.error, source = CASE WHEN excluded.source = '' "
            "THEN doc_status.source ELSE excluded.source END",
            [(d, value.value, error, source) for d in doc_ids],
        )

    def delete(self, doc_ids: Sequence[str]) -> None:
        """Forget the status of ``doc_ids`` in one transaction; unknown ids are ignored."""
        self._write(
            "delete document status",
            "DELETE FROM doc_status WHERE doc_id = ?",
            [(d,) for d in dict.fromkeys(doc_ids)],
        )

    def get_status(self, doc_ids: Sequence[str]) -> dict[str, StatusRecord]:
        """Records of the known ids among ``doc_ids``; unknown ids are left out."""
        sql = "SELECT doc_id, status, error, source FROM doc_status WHERE doc_id IN ({marks})"
        found = self._by_keys("read document status", sql, doc_ids)
        return {key: _record(row) for key, row in found.items()}

    def with_status(self, status: DocStatus) -> list[StatusRecord]:
        """Every record with ``status``, ordered by document id."""
        rows = self._query(
            "read document status",
            "SELECT doc_id, status, error, source FROM doc_status WHERE status = ? ORDER BY doc_id",
            (_status(status).value,),
        )
        return [_record(r) for r in rows]

    def ids_with_status(self, status: DocStatus) -> list[str]:
        """The id of every document with ``status``, ordered: read from the status
        index alone (the whole records took 5x longer at 100k documents)."""
        rows = self._query(
            "read document status",
            "SELECT doc_id FROM doc_status WHERE status = ? ORDER BY doc_id",
            (_status(status).value,),
        )
        return [r[0] for r in rows]

    def counts(self, statuses: Collection[DocStatus] | None = None) -> dict[DocStatus, int]:
        """Number of documents per status, of each of ``statuses`` (every status where
        None), zeros included. Those named are counted in the status index's ranges,
        not over every document (a build counts its failed ones: 6.5 ms at 100k
        passages over every document)."""
        wanted = list(DocStatus) if statuses is None else [_status(s) for s in statuses]
        where = "" if statuses is None else f" WHERE status IN ({','.join('?' * len(wanted))})"
        rows = self._query(
            "count document status",
            f"SELECT status, COUNT(*) FROM doc_status{where} GROUP BY status",
            () if statuses is None else tuple(s.value for s in wanted),
        )
        counts = dict.fromkeys(wanted, 0)
        counts.update({DocStatus(s): int(n) for s, n in rows})
        return counts


def _logged(table: str, event: str, docs: str, when: str = "") -> str:
    """A trigger logging the document ids ``docs`` (a SELECT) after ``event`` on ``table``."""
    name = f"{table}_{event.lower()}_logged"
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON {table} {when}"
        f" BEGIN INSERT INTO doc_changes (doc_id) {docs}; END"
    )


#: The change log's end: its last position, or where it was forgotten up to when empty.
_LOG_END = "max(floor, coalesce((SELECT max(seq) FROM doc_changes), 0))"


class SqliteChangeLog(SqliteStore):
    """:class:`~quillian.stores.protocols.ChangeLog` of the document and status stores
    in the same file: triggers on their chunks and statuses append the document's id,
    in the writing transaction, so no code path can change them unlogged (an older
    Quillian's included, once a newer one opened the file). Marks are ``LOG:SEQ``: the
    log's random id (a store made anew, even at the same path, is another log) and a
    position in it."""

    SCHEMA_NAME = "doc_changes"
    DDL = (
        *SqliteDocumentStore.DDL,
        *SqliteStatusStore.DDL,
        "CREATE TABLE IF NOT EXISTS doc_changes "
        "(seq INTEGER PRIMARY KEY AUTOINCREMENT, doc_id TEXT NOT NULL)",
        # the log's id, and the position up to which it was forgotten
        "CREATE TABLE IF NOT EXISTS doc_changes_meta (one INTEGER PRIMARY KEY CHECK (one = 0), "
        "log TEXT NOT NULL, floor INTEGER NOT NULL)",
        "INSERT OR IGNORE INTO doc_changes_meta VALUES (0, lower(hex(randomblob(16))), 0)",
        _logged("chunks", "INSERT", "VALUES (NEW.doc_id)"),
        _logged("chunks", "UPDATE", "SELECT NEW.doc_id UNION SELECT OLD.doc_id"),
        _logged("chunks", "DELETE", "VALUES (OLD.doc_id)"),
        _logged("doc_status", "INSERT", "VALUES (NEW.doc_id)"),
        _logged(
            "doc_status",
            "UPDATE",
            "SELECT NEW.doc_id UNION SELECT OLD.doc_id",
            "WHEN OLD.status IS NOT NEW.status OR OLD.doc_id IS NOT NEW.doc_id",
        ),
        _logged("doc_status", "DELETE", "VALUES (OLD.doc_id)"),
    )

    def mark(self) -> str:
        """The log's present end."""
        ((log, end),) = self._query(
            "read the change log", f"SELECT log, {_LOG_END} FROM doc_changes_meta"
        )
        return f"{log}:{end}"

    def changed_since(self, mark: str) -> tuple[str, list[str]] | None:
        """The documents changed after ``mark`` (sorted) and the log's end; None where
        ``mark`` is not this log's, precedes what it keeps, or follows its end (the
        store was put back to an older copy)."""
        log, seq = _mark(mark)
        with self._errors("read the change log") as conn:
            ((ours, floor, end),) = conn.execute(
                f"SELECT log, floor, {_LOG_END} FROM doc_changes_meta"
            ).fetchall()
            if log != ours or not floor <= seq <= end:  # past the end: a store restored
                return None
            rows = conn.execute(
                "SELECT doc_id, max(seq) FROM doc_changes WHERE seq > ? GROUP BY doc_id"
                " ORDER BY doc_id",
                (seq,),
            ).fetchall()
        end = max((r[1] for r in rows), default=seq)
        return f"{log}:{end}", [r[0] for r in rows]

    def forget(self, mark: str) -> None:
        """Drop the entries up to ``mark`` (of this log; another's is ignored)."""
        log, seq = _mark(mark)
        with self._transaction("forget the change log") as conn:
            (ours,) = conn.execute("SELECT log FROM doc_changes_meta").fetchone()
            if log == ours:
                conn.execute("DELETE FROM doc_changes WHERE seq <= ?", (seq,))
                conn.execute("UPDATE doc_changes_meta SET floor = max(floor, ?)", (seq,))


def _mark(mark: str) -> tuple[str, int]:
    """A mark's log id and position; ``("", -1)`` (no log's) where it does not parse."""
    log, _, seq = mark.partition(":")
    return (log, int(seq)) if seq.isascii() and seq.isdigit() else ("", -1)


class SqliteKeyValueStore(SqliteStore):
    """:class:`~quillian.stores.protocols.KeyValueStore` in SQLite: bytes by namespace and key.

    A value longer than :data:`INLINE` bytes is kept in ``kv_values``, a table keyed by
    row id, its ``kv`` row naming it (``value_id``, its ``value`` empty): ``kv`` is a
    ``WITHOUT ROWID`` table, whose row SQLite keeps on its page only up to about 1,000
    bytes (at 4 KB pages), putting the rest of a longer one on overflow pages of its
    own, the last one part empty, where a row-id table keeps up to 4,061 bytes on its
    page and fills its overflow pages. The stored extractions are such values, 1-5 KB
    each: on the 20 MB text of docs/scale.md, the store took 3.2 MB less so, with the
    same values (``research/store_bytes.py``). Triggers delete a long value with its
    row, or when its row takes another value, so no path leaves one behind."""

    SCHEMA_NAME = "kv"
    #: 2: long values in ``kv_values``. A store of version 1 gains the ``value_id``
    #: column when opened (its values stay where they are, read as they are) and is
    #: marked 2, so an earlier Quillian, which would read a long value as empty,
    #: refuses it.
    SCHEMA_VERSION = 2
    SCHEMA_UPGRADES = frozenset({1})
    DDL = (
        "CREATE TABLE IF NOT EXISTS kv (namespace TEXT NOT NULL, key TEXT NOT NULL, "
        "value BLOB NOT NULL, value_id INTEGER, PRIMARY KEY (namespace, key)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS kv_values (id INTEGER PRIMARY KEY, value BLOB NOT NULL)",
    )
    #: Created once ``kv`` has its ``value_id`` column (a version-1 store gains it first).
    TRIGGERS = (
        "CREATE TRIGGER IF NOT EXISTS kv_value_replaced AFTER UPDATE OF value_id ON kv "
        "WHEN OLD.value_id IS NOT NULL AND OLD.value_id IS NOT NEW.value_id "
        "BEGIN DELETE FROM kv_values WHERE id = OLD.value_id; END",
        "CREATE TRIGGER IF NOT EXISTS kv_value_deleted AFTER DELETE ON kv "
        "WHEN OLD.value_id IS NOT NULL "
        "BEGIN DELETE FROM kv_values WHERE id = OLD.value_id; END",
    )

    def _upgrade(self, conn: sqlite3.Connection, version: int) -> None:
        if version == 1 and not _has_column(conn, "kv", "value_id"):
            conn.execute("ALTER TABLE kv ADD COLUMN value_id INTEGER")

    def _schema_ready(self, conn: sqlite3.Connection) -> None:
        for statement in self.TRIGGERS:
            conn.execute(statement)

    def get_many(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        """Values in the order asked for, ``None`` for an absent key."""
        _require_namespace(namespace)
        sql = (
            f"SELECT k.key, {_KV_VALUE} FROM kv k LEFT JOIN kv_values v ON v.id = k.value_id"
            " WHERE k.namespace = ? AND k.key IN ({marks})"
        )
        found = self._by_keys("read values", sql, keys, (namespace,))
        return [bytes(found[k][1]) if k in found else None for k in keys]

    def put_many(self, namespace: str, items: Mapping[str, bytes]) -> None:
        """Insert or replace ``items`` in one transaction; every value must be bytes."""
        _require_namespace(namespace)
        items = dict(_kv_item(namespace, k, v) for k, v in items.items())
        if not items:
            return
        with self._transaction("store values") as conn:
            (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM kv_values").fetchone()
            ids = itertools.count(top + 1)
            long = {key: next(ids) for key, value in items.items() if len(value) > INLINE}
            conn.executemany(
                "INSERT INTO kv_values (id, value) VALUES (?, ?)",
                [(i, items[key]) for key, i in long.items()],
            )
            conn.executemany(
                "INSERT INTO kv (namespace, key, value, value_id) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(namespace, key) DO UPDATE SET value = excluded.value, "
                "value_id = excluded.value_id",
                [
                    (namespace, key, b"", long[key]) if key in long else (namespace, key, v, None)
                    for key, v in items.items()
                ],
            )

    def delete_many(self, namespace: str, keys: Sequence[str]) -> None:
        """Delete ``keys`` from ``namespace``; absent keys are ignored."""
        _require_namespace(namespace)
        self._write(
            "delete values",
            "DELETE FROM kv WHERE namespace = ? AND key = ?",
            [(namespace, k) for k in keys],
        )

    def keys(self, namespace: str) -> Iterator[str]:
        """Keys of ``namespace`` in sorted order, read page by page."""
        _require_namespace(namespace)
        # Each page starts at its own bound: a condition like ``(? OR key > ?)`` would
        # make SQLite seek by namespace alone and walk every earlier key on every page.
        rows = self._query(
            "list keys",
            "SELECT key FROM kv WHERE namespace = ? ORDER BY key LIMIT ?",
            (namespace, PAGE),
        )
        while True:
            yield from (r[0] for r in rows)
            if len(rows) < PAGE:
                return
            rows = self._query(
                "list keys",
                "SELECT key FROM kv WHERE namespace = ? AND key > ? ORDER BY key LIMIT ?",
                (namespace, rows[-1][0], PAGE),
            )


def _require_str(value: object, field: str) -> None:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", field=field)


def _require_namespace(namespace: object) -> None:
    if not isinstance(namespace, str) or not namespace:
        raise InputError(f"namespace must be a non-empty string, got {namespace!r}")


def _kv_item(namespace: str, key: object, value: object) -> tuple[str, bytes]:
    if not isinstance(key, str):
        raise InputError(f"key {key!r} in namespace {namespace!r} is not a string")
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InputError(
            f"value of key {key!r} in namespace {namespace!r} must be bytes, "
            f"got {type(value).__name__}"
        )
    return key, bytes(value)


#: The longest value a :class:`SqliteKeyValueStore` keeps in its ``kv`` row: half of the
#: about 1,000 bytes SQLite keeps of a ``WITHOUT ROWID`` row on a 4 KB page, the rest
#: left to its namespace and key; derived so, not tuned.
INLINE = 512
#: SQL: the value of the ``kv`` row ``k`` whose long value, if any, is ``v``'s.
_KV_VALUE = "CASE WHEN k.value_id IS NULL THEN k.value ELSE v.value END"


def _has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def stored_values(conn: sqlite3.Connection, namespace: str) -> Iterator[tuple[str, bytes]]:
    """Every key and value of ``namespace`` in a key-value store's database, read by
    ``conn`` directly (a reader that must not open the store, which would mark an
    earlier version as this one's), in either version's form."""
    if _has_column(conn, "kv", "value_id"):
        sql = (
            f"SELECT k.key, {_KV_VALUE} FROM kv k LEFT JOIN kv_values v ON v.id = k.value_id"
            " WHERE k.namespace = ?"
        )
    else:
        sql = "SELECT key, value FROM kv WHERE namespace = ?"
    for key, value in conn.execute(sql, (namespace,)):
        yield key, bytes(value)


def _status(status: DocStatus | str) -> DocStatus:
    try:
        return DocStatus(status)
    except ValueError:
        choices = ", ".join(s.value for s in DocStatus)
        raise InputError(f"unknown status {status!r}; expected one of {choices}") from None


#: Each status by its stored value (a dict lookup, not the enum's by-value call, per row).
_STATUSES = {s.value: s for s in DocStatus}


def _record(row: Sequence[Any]) -> StatusRecord:
    status = _STATUSES.get(row[1]) or DocStatus(row[1])  # an unknown value raises
    return StatusRecord(doc_id=row[0], status=status, error=row[2], source=row[3])


def _document_row(doc: Document, *, packed: bool) -> tuple[str, str, str | bytes, str, str]:
    """A document's stored columns, checked; its text compressed where long and
    ``packed`` (:func:`~quillian.stores.packed.pack_text`: SQLite's; PostgreSQL
    compresses a long value itself and takes the text as it is)."""
    for name in ("text", "title", "source"):
        if not isinstance(getattr(doc, name), str):
            raise InputError(f"document {name} must be a string", field=name)
    doc_id = doc.id
    try:
        encoded = json.dumps(doc.metadata, ensure_ascii=False, allow_nan=False)
        exact = json.loads(encoded) == doc.metadata
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"metadata of document {doc_id} is not JSON-serialisable: {exc}", field="metadata"
        ) from exc
    if not isinstance(doc.metadata, dict) or not exact:
        raise InputError(
            f"metadata of document {doc_id} does not survive JSON unchanged "
            "(use a dict with string keys, lists rather than tuples)",
            field="metadata",
        )
    text = pack_text(doc.text) if packed else doc.text
    return doc_id, doc.title, text, doc.source, encoded


def _document(row: Sequence[Any]) -> Document:
    text = unpack_text(row[2])
    return Document(text=text, title=row[1], source=row[3], metadata=json.loads(row[4]))


#: A chunk's stored text where the chunk is its document's text between its offsets:
#: an empty blob, which :func:`~quillian.stores.packed.pack_text` never gives (a zlib
#: stream is never empty, and an empty text is stored as the empty string).
SPAN = b""
#: SQL: the chunk row's text is :data:`SPAN`.
_IS_SPAN = "typeof(text) = 'blob' AND length(text) = 0"


def _is_span(stored: object) -> bool:
    return isinstance(stored, bytes) and not stored


def stored_chunk_texts(conn: sqlite3.Connection) -> Iterator[tuple[str, str]]:
    """Every chunk's id and text, read from a store's database by ``conn`` directly
    (for a reader that must not open the store, which would mark an earlier version
    as this one's: a read-only connection), a span's text read from its document's,
    each document's text unpacked once."""
    texts: dict[str, str] = {}
    rows = conn.execute("SELECT id, doc_id, text, char_start, char_end FROM chunks ORDER BY doc_id")
    for chunk_id, doc_id, text, start, end in rows:
        if not _is_span(text):
            yield chunk_id, unpack_text(text)
            continue
        if doc_id not in texts:
            found = conn.execute("SELECT text FROM documents WHERE id = ?", (doc_id,)).fetchone()
            texts = {doc_id: unpack_text(found[0]) if found else ""}
        yield chunk_id, texts[doc_id][start:end]


class _LongTexts:
    """The texts of the long documents a store read last, unpacked: the chunks of a
    document of megabytes are read in batches (a build's stages read 64 at a time), and
    each batch would unpack the whole text again (0.10 s for the 20 MB text of
    docs/scale.md). A text is taken as it was kept while SQLite's ``data_version`` says
    no other connection committed since it was read (the store forgets them all at its
    own writes of documents, which leave ``data_version`` as it is); after any commit,
    the document's stored value is read again and its text taken only where that value
    is the one kept (another store's write, such as the caches', changes no document).
    The caller holds the store's lock."""

    #: Characters from which a text is kept (a shorter one unpacks in microseconds).
    LONG = 1 << 16
    #: Characters kept in all; the last text read is kept whatever its length.
    KEPT = 1 << 26

    def __init__(self) -> None:
        #: By document id: the ``data_version`` it was last read at, its stored value
        #: and its text.
        self._texts: OrderedDict[str, tuple[int, str | bytes, str]] = OrderedDict()

    def clear(self) -> None:
        self._texts.clear()

    def recall(self, version: int, doc_ids: Collection[str]) -> dict[str, str]:
        """The texts kept of ``doc_ids`` that were read at ``version``."""
        found = {}
        for doc_id in doc_ids:
            kept = self._texts.get(doc_id)
            if kept is not None and kept[0] == version:
                found[doc_id] = kept[2]
                self._texts.move_to_end(doc_id)
        return found

    def text(self, doc_id: str, stored: str | bytes) -> str:
        """The text of document ``doc_id`` stored as ``stored``: the one kept where it
        was kept from that very value, else unpacked."""
        kept = self._texts.get(doc_id)
        return kept[2] if kept is not None and kept[1] == stored else unpack_text(stored)

    def keep(self, version: int, read: Mapping[str, tuple[str | bytes, str]]) -> None:
        """Keep the long ones of ``read`` (each document's stored value and text), read
        at ``version``."""
        for doc_id, (stored, text) in read.items():
            if len(text) >= self.LONG:
                self._texts[doc_id] = (version, stored, text)
                self._texts.move_to_end(doc_id)
        total = sum(len(t) for _, _, t in self._texts.values())
        while len(self._texts) > 1 and total > self.KEPT:
            total -= len(self._texts.popitem(last=False)[1][2])


class _Texts:
    """The stored documents' texts, each read and unpacked once, to tell which chunks
    put are spans of them."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._texts: dict[str, str | None] = {}

    def span_of(self, chunk: Chunk) -> bool:
        """Whether ``chunk``'s text is its stored document's between its offsets."""
        if not chunk.text:
            return False
        if chunk.doc_id not in self._texts:
            row = self._conn.execute(
                "SELECT text FROM documents WHERE id = ?", (chunk.doc_id,)
            ).fetchone()
            self._texts = {chunk.doc_id: None if row is None else unpack_text(row[0])}
        text = self._texts[chunk.doc_id]  # chunks come by document: the last one kept
        return text is not None and text[chunk.start : chunk.end] == chunk.text


def _chunk_row(
    chunk: Chunk, *, packed: bool, span_of: Callable[[Chunk], bool] | None = None
) -> tuple[str, str, int, str | bytes, int, int, str]:
    """A chunk's stored columns, checked; its text compressed where long and ``packed``
    (as :func:`_document_row`'s), or :data:`SPAN` where ``span_of`` says the chunk is
    its stored document's text between its offsets."""
    for name in ("doc_id", "text", "title"):
        if not isinstance(getattr(chunk, name), str):
            raise InputError(f"chunk {name} must be a string", field=name)
    for name in ("index", "start", "end"):
        value = getattr(chunk, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"chunk {name} must be a non-negative int, got {value!r}", field=name)
    if chunk.start > chunk.end:
        raise InputError(
            f"chunk {chunk.index} of {chunk.doc_id}: start {chunk.start} > end {chunk.end}",
            field="start",
        )
    if span_of is not None and span_of(chunk):
        text: str | bytes = SPAN
    else:
        text = pack_text(chunk.text) if packed else chunk.text
    return (chunk.id, chunk.doc_id, chunk.index, text, chunk.start, chunk.end, chunk.title)


def _chunk(row: Sequence[Any]) -> Chunk:
    """A chunk from its stored columns (:data:`_CHUNK_COLUMNS`), with its stored id."""
    chunk_id, doc_id, index, text, *rest = row
    return Chunk.stored(chunk_id, doc_id, index, unpack_text(text), *rest)
