"""PostgreSQL document, status and key-value stores, and the change log of the first two.

Same semantics as the SQLite stores (:mod:`quillian.stores.embedded.sqlite`), whose row
validation they share: every batch is validated whole, then written in one transaction
with ``executemany``, so a bad item rejects the batch and leaves the rest intact.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import psycopg

from quillian.errors import StoreError
from quillian.stores.embedded.sqlite import (
    _CHUNK_COLUMNS,
    _DOC_COLUMNS,
    _chunk_row,
    _document_row,
    _kv_item,
    _record,
    _require_namespace,
    _require_str,
    _status,
)
from quillian.stores.postgres._pg import CHANGE_LOG_DDL, PgStore
from quillian.stores.protocols import ChunkHead, DocStatus, StatusRecord
from quillian.types import Chunk, Document

__all__ = ["PgChangeLog", "PgDocumentStore", "PgKeyValueStore", "PgStatusStore"]

#: Rows fetched per page by iterators.
PAGE = 1000
#: The stored documents and chunks counted as they change (:meth:`PgDocumentStore.
#: count_documents`, :meth:`~PgDocumentStore.count_chunks`): a statement trigger on each
#: table adds a row of how many its statement added or took away, in the writing
#: transaction (so concurrent writers add rows rather than wait on one), and an emptying
#: of the table removes its rows. Reading sums a table's rows, folding them into one past
#: :data:`_COUNT_ROWS`. Counting a table itself read every row: 0.02 s at 100k passages
#: for the documents in every update, and for the chunks at every open of the index
#: (a served replica's after each update) (docs/scale.md).
_COUNT_DDL = (
    "CREATE TABLE IF NOT EXISTS row_counts (tbl text NOT NULL, n bigint NOT NULL)",
    "CREATE INDEX IF NOT EXISTS row_counts_by_table ON row_counts (tbl)",
    "CREATE OR REPLACE FUNCTION count_rows() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path FROM CURRENT AS $$ BEGIN "
    "IF TG_OP = 'INSERT' THEN INSERT INTO row_counts SELECT TG_TABLE_NAME, count(*)"
    " FROM new_rows HAVING count(*) > 0; "
    "ELSIF TG_OP = 'DELETE' THEN INSERT INTO row_counts SELECT TG_TABLE_NAME, -count(*)"
    " FROM old_rows HAVING count(*) > 0; "
    "ELSE DELETE FROM row_counts WHERE tbl = TG_TABLE_NAME; END IF; RETURN NULL; END $$",
)
#: The triggers of :data:`_COUNT_DDL` on a table (``{table}``), by event.
_COUNT_TRIGGERS = {
    "insert": "AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT",
    "delete": "AFTER DELETE ON {table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT",
    "truncate": "AFTER TRUNCATE ON {table} FOR EACH STATEMENT",
}
#: Rows of counts past which a count folds them into one.
_COUNT_ROWS = 64


class PgDocumentStore(PgStore):
    """:class:`~quillian.stores.protocols.DocumentStore` in PostgreSQL (upserts by id)."""

    def put_documents(self, documents: Sequence[Document]) -> None:
        """Insert or replace ``documents`` in one transaction."""
        rows = [_document_row(d, packed=False) for d in documents]
        with self._conn("store documents") as conn:
            if rows:
                conn.cursor().executemany(
                    f"INSERT INTO documents ({_DOC_COLUMNS}) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET title = excluded.title, "
                    "text = excluded.text, source = excluded.source, metadata = excluded.metadata",
                    rows,
                )

    def put_chunks(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace ``chunks`` in one transaction."""
        rows = [_chunk_row(c, packed=False) for c in chunks]
        with self._conn("store chunks") as conn:
            if rows:
                conn.cursor().executemany(
                    f"INSERT INTO chunks ({_CHUNK_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET doc_id = excluded.doc_id, "
                    "idx = excluded.idx, text = excluded.text, char_start = excluded.char_start, "
                    "char_end = excluded.char_end, title = excluded.title",
                    rows,
                )

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        """Delete documents and their chunks in one transaction; unknown ids are ignored."""
        ids = list(dict.fromkeys(doc_ids))
        with self._conn("delete documents") as conn:
            if ids:
                conn.execute("DELETE FROM chunks WHERE doc_id = ANY(%s)", (ids,))
                conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (ids,))

    def get_documents(self, doc_ids: Sequence[str]) -> list[Document | None]:
        """Documents in the order asked for, ``None`` for an unknown id."""
        found = self._by_ids("read documents", "documents", _DOC_COLUMNS, doc_ids)
        return [_document(found[i]) if i in found else None for i in doc_ids]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk | None]:
        """Chunks in the order asked for, ``None`` for an unknown id."""
        found = self._by_ids("read chunks", "chunks", _CHUNK_COLUMNS, chunk_ids)
        return [_chunk(found[i]) if i in found else None for i in chunk_ids]

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        """The chunks of one document, ordered by their index."""
        with self._conn("read chunks") as conn:
            rows = conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE doc_id = %s ORDER BY idx, id",
                (doc_id,),
            ).fetchall()
        return [_chunk(r) for r in rows]

    def iter_chunks(self) -> Iterator[Chunk]:
        """Every chunk, in insertion order, read page by page."""
        return (_chunk(r) for r in self._chunk_rows(_CHUNK_COLUMNS))

    def iter_chunk_heads(self) -> Iterator[ChunkHead]:
        """Every chunk's document id, index, id and title (no text), in insertion order,
        read page by page: a build's pass over every chunk sends no text."""
        return self._chunk_rows("doc_id, idx, id, title")

    def _chunk_rows(self, columns: str) -> Iterator[Any]:
        """``columns`` of every chunk, in insertion order, a page at a time."""
        last = 0
        while True:
            with self._conn("read chunks") as conn:
                rows = conn.execute(
                    f"SELECT seq, {columns} FROM chunks WHERE seq > %s ORDER BY seq LIMIT %s",
                    (last, PAGE),
                ).fetchall()
            yield from (r[1:] for r in rows)
            if len(rows) < PAGE:
                return
            last = rows[-1][0]

    def count_documents(self) -> int:
        """Number of stored documents (see :meth:`_count`)."""
        return self._count("documents")

    def count_chunks(self) -> int:
        """Number of stored chunks (see :meth:`_count`)."""
        return self._count("chunks")

    def _count(self, table: str) -> int:
        """The rows of ``table`` (``documents`` or ``chunks``): from the counts its
        triggers keep (see :data:`_COUNT_DDL`), given them with their first count from
        every row where the workspace has none yet; by counting every row where this
        user may not."""
        with self._conn(f"count {table}") as conn:
            if not _counted(conn, table):
                may = conn.execute(
                    "SELECT has_schema_privilege(current_schema(), 'CREATE')"
                    " AND has_table_privilege(%s, 'TRIGGER')",
                    (table,),
                ).fetchone()
                if not (may and may[0]):
                    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                    return int(row[0]) if row else 0
                # a trigger's creation holds off every writer of the table until it
                # commits, so no write falls between the first count and the triggers
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{table}:count",))
                if not _counted(conn, table):
                    for statement in _COUNT_DDL:
                        conn.execute(statement)
                    for event, when in _COUNT_TRIGGERS.items():
                        conn.execute(
                            f"CREATE OR REPLACE TRIGGER {table}_counted_{event}"
                            f" {when.format(table=table)} EXECUTE FUNCTION count_rows()"
                        )
                    conn.execute("DELETE FROM row_counts WHERE tbl = %s", (table,))
                    conn.execute(
                        f"INSERT INTO row_counts SELECT %s, count(*) FROM {table}", (table,)
                    )
            row = conn.execute(
                "SELECT coalesce(sum(n), 0), count(*) FROM row_counts WHERE tbl = %s", (table,)
            ).fetchone()
            total, rows = (int(row[0]), int(row[1])) if row else (0, 0)
            if rows > _COUNT_ROWS:
                conn.execute(
                    "WITH folded AS (DELETE FROM row_counts WHERE tbl = %s RETURNING n)"
                    " INSERT INTO row_counts SELECT %s, sum(n) FROM folded HAVING count(*) > 0",
                    (table, table),
                )
        return total

    def _by_ids(self, action: str, table: str, columns: str, ids: Sequence[str]) -> dict[str, Any]:
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        with self._conn(action, transaction=False) as conn:
            rows = conn.execute(
                f"SELECT {columns} FROM {table} WHERE id = ANY(%s)", (unique,)
            ).fetchall()
        return {row[0]: row for row in rows}


class PgStatusStore(PgStore):
    """:class:`~quillian.stores.protocols.StatusStore` in PostgreSQL; an empty ``source``
    keeps the one recorded."""

    def set_status(
        self, doc_ids: Sequence[str], status: DocStatus, *, error: str = "", source: str = ""
    ) -> None:
        """Set the status of ``doc_ids`` (with an error text and a source) in one transaction."""
        value = _status(status)
        _require_str(error, "error")
        _require_str(source, "source")
        for doc_id in doc_ids:
            _require_str(doc_id, "doc_id")
        rows = [(d, value.value, error, source) for d in dict.fromkeys(doc_ids)]
        with self._conn("set document status") as conn:
            if rows:
                conn.cursor().executemany(
                    "INSERT INTO doc_status (doc_id, status, error, source) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (doc_id) DO UPDATE SET "
                    "status = excluded.status, error = excluded.error, source = CASE "
                    "WHEN excluded.source = '' THEN doc_status.source ELSE excluded.source END",
                    rows,
                )

    def delete(self, doc_ids: Sequence[str]) -> None:
        """Forget the status of ``doc_ids``; unknown ids are ignored."""
        with self._conn("delete document status") as conn:
            if doc_ids:
                conn.execute("DELETE FROM doc_status WHERE doc_id = ANY(%s)", (list(doc_ids),))

    def get_status(self, doc_ids: Sequence[str]) -> dict[str, StatusRecord]:
        """Records of the known ids among ``doc_ids``; unknown ids are left out."""
        with self._conn("read document status", transaction=False) as conn:
            rows = conn.execute(
                "SELECT doc_id, status, error, source FROM doc_status WHERE doc_id = ANY(%s)",
                (list(dict.fromkeys(doc_ids)),),
            ).fetchall()
        return {row[0]: _record(row) for row in rows}

    def with_status(self, status: DocStatus) -> list[StatusRecord]:
        """Every record with ``status``, ordered by document id."""
        value = _status(status).value
        with self._conn("read document status", transaction=False) as conn:
            rows = conn.execute(
                "SELECT doc_id, status, error, source FROM doc_status WHERE status = %s "
                "ORDER BY doc_id",
                (value,),
            ).fetchall()
        return [_record(r) for r in rows]

    def ids_with_status(self, status: DocStatus) -> list[str]:
        """The id of every document with ``status``, ordered."""
        value = _status(status).value
        with self._conn("read document status", transaction=False) as conn:
            rows = conn.execute(
                "SELECT doc_id FROM doc_status WHERE status = %s ORDER BY doc_id", (value,)
            ).fetchall()
        return [r[0] for r in rows]

    def counts(self, statuses: Collection[DocStatus] | None = None) -> dict[DocStatus, int]:
        """Number of documents per status, of each of ``statuses`` (every status where
        None), zeros included; those named counted in the status index's ranges."""
        wanted = list(DocStatus) if statuses is None else [_status(s) for s in statuses]
        with self._conn("count document status") as conn:
            if statuses is None:
                rows = conn.execute(
                    "SELECT status, count(*) FROM doc_status GROUP BY status"
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT status, count(*) FROM doc_status WHERE status = ANY(%s)"
                    " GROUP BY status",
                    ([s.value for s in wanted],),
                ).fetchall()
        counts = dict.fromkeys(wanted, 0)
        counts.update({DocStatus(s): int(n) for s, n in rows})
        return counts


#: A snapshot as ``pg_snapshot``'s text gives it: ``xmin:xmax:xip,...``.
_SNAPSHOT = re.compile(r"[0-9]{1,20}:[0-9]{1,20}:(?:[0-9]{1,20}(?:,[0-9]{1,20})*)?")


class PgChangeLog(PgStore):
    """:class:`~quillian.stores.protocols.ChangeLog` of the workspace's chunks and
    statuses (``CHANGE_LOG_DDL``): a mark is the log's random id and a snapshot; the
    documents changed since are those logged by transactions the snapshot does not
    see (committed since, or running then), so concurrent writers are never missed. A
    workspace made before the log gets it from the first :meth:`mark` (a build's): the
    triggers and the log are made in one transaction, and no mark precedes them."""

    def mark(self) -> str:
        """The log's present end: its id and the present snapshot."""
        with self._conn("read the change log") as conn:
            if not _has_log(conn):
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext('doc_changes'))")
                    for statement in CHANGE_LOG_DDL:
                        conn.execute(statement)
            log, now = _meta(conn, "log, pg_current_snapshot()::text")
        return f"{log}:{now}"

    def changed_since(self, mark: str) -> tuple[str, list[str]] | None:
        """The documents changed after ``mark`` (sorted) and the new mark; None where
        ``mark`` is not this log's, precedes what it keeps, or follows the present."""
        parsed = _parsed(mark)
        if parsed is None:
            return None
        log, snapshot, start = parsed
        with self._conn("read the change log") as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            if not _has_log(conn):
                return None
            ours, floor, now = _meta(conn, "log, floor::text, pg_current_snapshot()::text")
            # a mark past the present: the workspace was put back to an older copy
            if log != ours or not int(floor) <= start <= _xmin(now):
                return None
            rows = conn.execute(
                "SELECT DISTINCT doc_id FROM doc_changes WHERE xid >= %s::xid8"
                " AND NOT pg_visible_in_snapshot(xid, %s::pg_snapshot) ORDER BY doc_id",
                (str(start), snapshot),
            ).fetchall()
        return f"{ours}:{now}", [r[0] for r in rows]

    def forget(self, mark: str) -> None:
        """Drop the entries every transaction of ``mark``'s snapshot sees (of this log;
        another's is ignored)."""
        parsed = _parsed(mark)
        if parsed is None:
            return
        log, _, start = parsed
        with self._conn("forget the change log") as conn:
            if not _has_log(conn):
                return
            (ours,) = _meta(conn, "log")
            if log == ours:
                conn.execute("DELETE FROM doc_changes WHERE xid < %s::xid8", (str(start),))
                conn.execute(
                    "UPDATE doc_changes_meta SET floor = greatest(floor, %s::xid8)", (str(start),)
                )


def _parsed(mark: str) -> tuple[str, str, int] | None:
    """A mark's log id, snapshot and the snapshot's oldest running transaction id;
    None where it does not parse."""
    log, _, snapshot = mark.partition(":")
    return (log, snapshot, _xmin(snapshot)) if _SNAPSHOT.fullmatch(snapshot) else None


def _xmin(snapshot: str) -> int:
    """The oldest transaction id a snapshot's text (``xmin:xmax:xip,...``) names running."""
    return int(snapshot.partition(":")[0])


def _meta(conn: psycopg.Connection[Any], columns: str) -> tuple[Any, ...]:
    """``columns`` of the change log's one row of metadata."""
    row = conn.execute(f"SELECT {columns} FROM doc_changes_meta").fetchone()
    if row is None:
        raise StoreError("the change log's metadata row is missing")
    return tuple(row)


def _counted(conn: psycopg.Connection[Any], table: str) -> bool:
    """Whether the workspace's ``table`` is counted by the triggers of :data:`_COUNT_DDL`."""
    row = conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = ANY(%s)",
        (table, [f"{table}_counted_{event}" for event in _COUNT_TRIGGERS]),
    ).fetchone()
    return row is not None and int(row[0]) == len(_COUNT_TRIGGERS)


def _has_log(conn: psycopg.Connection[Any]) -> bool:
    """Whether the workspace (the connection's search path) holds the change log."""
    row = conn.execute("SELECT to_regclass('doc_changes_meta') IS NOT NULL").fetchone()
    return bool(row and row[0])


class PgKeyValueStore(PgStore):
    """:class:`~quillian.stores.protocols.KeyValueStore` in PostgreSQL: ``bytea`` values."""

    def get_many(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        """Values in the order asked for, ``None`` for an absent key."""
        _require_namespace(namespace)
        with self._conn("read values", transaction=False) as conn:
            rows = conn.execute(
                "SELECT key, value FROM kv WHERE namespace = %s AND key = ANY(%s)",
                (namespace, list(dict.fromkeys(keys))),
            ).fetchall()
        found = {k: bytes(v) for k, v in rows}
        return [found.get(k) for k in keys]

    def put_many(self, namespace: str, items: Mapping[str, bytes]) -> None:
        """Store ``items`` under ``namespace`` in one transaction (replacing values)."""
        _require_namespace(namespace)
        rows = [(namespace, *_kv_item(namespace, k, v)) for k, v in items.items()]
        with self._conn("store values") as conn:
            if rows:
                conn.cursor().executemany(
                    "INSERT INTO kv (namespace, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
                    rows,
                )

    def delete_many(self, namespace: str, keys: Sequence[str]) -> None:
        """Delete ``keys`` from ``namespace``; absent keys are ignored."""
        _require_namespace(namespace)
        with self._conn("delete values") as conn:
            if keys:
                conn.execute(
                    "DELETE FROM kv WHERE namespace = %s AND key = ANY(%s)",
                    (namespace, list(keys)),
                )

    def keys(self, namespace: str) -> Iterator[str]:
        """Keys of ``namespace`` in sorted order, read page by page."""
        _require_namespace(namespace)

        # Each page starts at its own bound (a generic plan for ``(%s IS NULL OR key >
        # %s)`` would scan the namespace from its first key on every page).
        def page(sql: str, args: tuple[object, ...]) -> list[tuple[str]]:
            with self._conn("list keys") as conn:
                return conn.execute(sql, args).fetchall()

        rows = page(
            "SELECT key FROM kv WHERE namespace = %s ORDER BY key LIMIT %s", (namespace, PAGE)
        )
        while True:
            yield from (r[0] for r in rows)
            if len(rows) < PAGE:
                return
            rows = page(
                "SELECT key FROM kv WHERE namespace = %s AND key > %s ORDER BY key LIMIT %s",
                (namespace, rows[-1][0], PAGE),
            )


def _document(row: Sequence[Any]) -> Document:
    return Document(text=_text(row[2]), title=row[1], source=row[3], metadata=json.loads(row[4]))


def _chunk(row: Sequence[Any]) -> Chunk:
    """A chunk from its stored columns (:data:`_CHUNK_COLUMNS`), with its stored id."""
    chunk_id, doc_id, index, text, *rest = row
    return Chunk.stored(chunk_id, doc_id, index, _text(text), *rest)


#: How a long text written from ``d35b690`` until its fix begins: those versions gave
#: PostgreSQL the text as its zlib stream (bytes, SQLite's form), which the text column
#: stored as the bytes' hex: a backslash, ``x`` and the digits, zlib's default header
#: ``78 9c`` first.
_HEX_ZLIB = "\\x789c"


def _text(stored: str) -> str:
    """A stored document's or chunk's text. One written compressed (:data:`_HEX_ZLIB`)
    is read back as the text it holds: those workspaces read right, and are written
    right by their next put. A text that merely looks so but does not decompress is
    returned as it is."""
    if not stored.startswith(_HEX_ZLIB):
        return stored
    try:
        return zlib.decompress(bytes.fromhex(stored[2:])).decode()
    except (ValueError, zlib.error):  # UnicodeDecodeError is a ValueError
        return stored
