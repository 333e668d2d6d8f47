"""Vector collections in pgvector: one table per collection, searched through an HNSW
index on inner product (vectors are L2-normalised, so that is cosine similarity).

Semantics of :class:`~quillian.stores.protocols.VectorIndex`: adding an existing id
replaces its vector (later wins, also within a batch); a rejected batch changes nothing;
``get`` of an unknown id raises :class:`~quillian.errors.UnknownIdError`; a query for
which HNSW finds fewer than ``min(k, len)`` neighbours is padded with id -1 and score
-inf. Writes go straight to the server (binary ``COPY`` into a temporary table, then one
upsert, in one transaction). A collection opened ``fresh`` (a build rewriting it whole)
drops its HNSW index and :meth:`flush` (or :meth:`close`) builds it again once, over
every vector, as pgvector advises for bulk loads; until then a search is exact. A
collection of at most :data:`EXACT_LIMIT` vectors is always searched exactly, ties
ranked by id, so two builds of the same vectors answer alike.

Recall beyond :data:`EXACT_LIMIT`: HNSW (m 16, ef_construction 64) searched
:data:`HNSW_EF_SEARCH` (200) wide found 0.994 to 0.999 of the exact top 5 (recall@10
0.992 to 0.996) on 20,000 and 50,000 MiniLM-int8 embeddings of real passages and
WordNet glosses, 200 held-out queries, at a p50 of 19 to 35 ms (20,000) and 52 ms
(50,000) against 88 to 106 and 222 ms for an exact scan, on a loaded 2-core machine
(``python research/pg_recall.py``; docs/benchmarks.md). The breadth used before,
64, found 0.970 to 0.974; pgvector's default, 40, 0.943 to 0.955.

Deletes are deferred. A build updates a collection keyed by content in place (it adds the
keys it lacks and deletes those no longer used), while server replicas keep answering
from the index generation they opened, whose keys may include vectors the build deletes.
So :meth:`~PgVectorIndex.delete` only marks a row retired: its id, with the time, in
the workspace's table ``retired_vectors`` (the collection's own rows are left as they
are: a changed row is a new version of it, which pgvector puts into the HNSW graph
again, 1.8-2.0 ms a vector at 100k passages against 1.0-1.1 ms at 20k, and 0.06-0.09 ms
by the table, ``research/pg_vector_retire.py``); it is left out of ``len``, ``ids``, ``get`` and
``search`` of a handle opened plainly,
and still served by one opened with ``retired=True`` (what an opened index reads:
:class:`~quillian.components.retrieval.keyed.KeyedVectors` drops the keys its generation
does not name). A later build's :meth:`~PgVectorIndex.flush` purges the rows retired
more than :data:`RETIRED_GRACE_S` (an hour) before. The rule rests on readers following
the newest generation: a server replica reopens within seconds of a build completing
(:mod:`quillian.server.refresh`), so no opened index still names a vector an hour after
the build that deleted it (one held open longer, or one left on an older generation by a
build that was killed and rerun an hour later, finds such vectors gone: its searches skip
them, its reads name them unknown). Adding a retired id again revives it. A collection
an older Quillian retired rows of (in its column ``retired_at``) has them moved to the
table by a writer's flush.

``get`` reads only the ids asked for (one statement) and keeps the last
:data:`CACHE_VECTORS` vectors it read; nothing reads a whole collection into the process.

A collection stores ``float32`` (pgvector's ``vector``) or ``float16`` (``halfvec``:
half the bytes in the table and in its HNSW index); vectors are sent and read as
float32 either way, and the server rounds them to float16 as it stores them.
"""

from __future__ import annotations

import re
import struct
from collections import OrderedDict
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from quillian.errors import ConfigError, InputError, StoreError
from quillian.stores.embedded._vecutil import (
    UnknownIdError,
    as_ids,
    as_matrix,
    check_dim,
    check_k,
    keep_last,
)
from quillian.stores.postgres._connect import connect
from quillian.stores.postgres._pg import EF_SEARCH, PgStore, Workspace, parse_location

__all__ = ["HALFVEC_SINCE", "PgVectorIndex", "check_dtype", "check_vector_dtype"]

#: The first pgvector release with ``halfvec``, what float16 is stored in.
HALFVEC_SINCE = (0, 7, 0)
#: A collection's name: a-z, 0-9, ``_`` and ``-`` (``kags-triples``), never two of
#: ``_-`` in a row; its table spells ``-`` as ``__``, so two names never share a table.
_NAME = re.compile(r"[a-z](?:[a-z0-9]|[_-](?![_-]))*")
#: PostgreSQL's longest identifier: the index's name ``vectors_<name>_hnsw`` fits it.
_MAX_TABLE = 63 - len("_hnsw")
#: Vectors a handle keeps after :meth:`PgVectorIndex.get` (6 MB at 384 dimensions).
CACHE_VECTORS = 4096
F32 = npt.NDArray[np.float32]
#: Collections up to this many vectors are searched exactly: a scan ranked by score,
#: then id, so two builds of the same vectors answer alike (HNSW's graph is built with
#: random levels, and its ranking of ties follows the table's physical order).
EXACT_LIMIT = 20_000
#: HNSW's search breadth (``hnsw.ef_search``) for a collection above EXACT_LIMIT: see
#: the module doc for the recall it gives.
HNSW_EF_SEARCH = 200
#: Seconds a deleted vector is kept (retired) before a later build's flush purges it:
#: see the module doc.
RETIRED_GRACE_S = 3600
#: HNSW build parameters (pgvector's defaults).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: pgvector's column type and HNSW operator class for each stored dtype.
_TYPES = {"float32": ("vector", "vector_ip_ops"), "float16": ("halfvec", "halfvec_ip_ops")}
#: The live ids of each collection summed up as they change (:meth:`PgVectorIndex.
#: ids_summary`): a statement trigger on a collection's table adds a row of the sums
#: its statement added to or took from the live ids (count, XOR, high and low halves),
#: in the writing transaction, so a writer's sums are never missed, and concurrent
#: writers add rows rather than wait on one. Reading them sums a collection's rows;
#: a writer's :meth:`~PgVectorIndex.flush` folds them into one. Summing the table
#: itself took 0.02 s a collection at 100k passages, in every update (docs/scale.md).
_ID_SUMS_DDL = (
    "CREATE TABLE IF NOT EXISTS vector_id_sums (collection text NOT NULL, "
    "n bigint NOT NULL, xor bigint NOT NULL, high bigint NOT NULL, low bigint NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vector_id_sums_by_collection ON vector_id_sums (collection)",
    "CREATE OR REPLACE FUNCTION sum_vector_ids() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path FROM CURRENT AS $$ BEGIN "
    "IF TG_OP = 'INSERT' THEN INSERT INTO vector_id_sums SELECT TG_ARGV[0], count(*),"
    " bit_xor(id), sum(id >> 32), sum(id & 4294967295) FROM new_rows"
    " WHERE retired_at IS NULL HAVING count(*) > 0; "
    "ELSIF TG_OP = 'DELETE' THEN INSERT INTO vector_id_sums SELECT TG_ARGV[0], -count(*),"
    " bit_xor(id), -sum(id >> 32), -sum(id & 4294967295) FROM old_rows"
    " WHERE retired_at IS NULL HAVING count(*) > 0; "
    "ELSE INSERT INTO vector_id_sums SELECT TG_ARGV[0], sum(s), bit_xor(id),"
    " sum(s * (id >> 32)), sum(s * (id & 4294967295)) FROM ("
    "SELECT 1 AS s, id FROM new_rows WHERE retired_at IS NULL UNION ALL"
    " SELECT -1, id FROM old_rows WHERE retired_at IS NULL) AS changed"
    " HAVING sum(s) <> 0 OR bit_xor(id) <> 0; END IF; "
    "RETURN NULL; END $$",
)
#: The triggers of :data:`_ID_SUMS_DDL` on one collection's table, by event.
_ID_SUMS_TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS new_rows",
    "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "REFERENCING OLD TABLE AS old_rows",
}
#: The vectors deleted but not yet purged, of every collection (see the module doc),
#: with the triggers that take them out of, and put them back into, their collection's
#: id sums as they are retired, and revived or purged. A workspace made before it gets
#: it from the first handle that opens a collection.
_RETIRED_DDL = (
    "CREATE TABLE IF NOT EXISTS retired_vectors (collection text NOT NULL, id bigint NOT NULL,"
    " retired_at timestamptz NOT NULL, PRIMARY KEY (collection, id))",
    "CREATE OR REPLACE FUNCTION sum_retired_vector_ids() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path FROM CURRENT AS $$ BEGIN "
    "IF TG_OP = 'INSERT' THEN INSERT INTO vector_id_sums SELECT collection, -count(*),"
    " bit_xor(id), -sum(id >> 32), -sum(id & 4294967295) FROM new_rows GROUP BY collection; "
    "ELSE INSERT INTO vector_id_sums SELECT collection, count(*), bit_xor(id),"
    " sum(id >> 32), sum(id & 4294967295) FROM old_rows GROUP BY collection; END IF; "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE TRIGGER retired_sums_insert AFTER INSERT ON retired_vectors"
    " REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION sum_retired_vector_ids()",
    "CREATE OR REPLACE TRIGGER retired_sums_delete AFTER DELETE ON retired_vectors"
    " REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION sum_retired_vector_ids()",
)
#: One statement summing up a collection's live ids by reading them all.
_SUM_IDS = (
    "SELECT count(*), coalesce(bit_xor(id), 0), coalesce(sum(id >> 32), 0),"
    " coalesce(sum(id & 4294967295), 0) FROM {} WHERE {}"
)


class PgVectorIndex(PgStore):
    """:class:`~quillian.stores.protocols.VectorIndex` in a pgvector table.

    Args:
        workspace: the workspace (or its location).
        name: the collection (``chunks``, ``texts``, ...).
        dim: vector dimension; required for a new collection, checked against an
            existing one (a mismatch is a :class:`~quillian.errors.ConfigError` naming
            both, raised before anything is written).
        fresh: empty the collection first (a build rewrites it whole).
        dtype: what a new collection stores, ``float32`` (``vector``, the default) or
            ``float16`` (``halfvec``); checked against an existing one (a mismatch is a
            :class:`~quillian.errors.ConfigError`); None: as stored.
        ef_search: HNSW's search breadth (raised to twice ``k``, at most 1,000).
        exact_limit: the largest collection searched exactly.
        retired: also serve the vectors deleted but not yet purged (an index opened
            before the build that deleted them still names them; see the module doc).
        grace_s: seconds a deleted vector is kept before :meth:`flush` purges it.
    """

    def __init__(
        self,
        workspace: Workspace | str,
        name: str,
        dim: int | None = None,
        *,
        fresh: bool = False,
        dtype: str | None = None,
        ef_search: int = HNSW_EF_SEARCH,
        exact_limit: int = EXACT_LIMIT,
        retired: bool = False,
        grace_s: float = RETIRED_GRACE_S,
    ) -> None:
        super().__init__(workspace)
        self.retired = retired
        self.grace_s = grace_s
        self._wrote = False
        self._live: sql.Composable = sql.SQL("TRUE")  # set by _open for a plain handle
        self._needs_index = False
        try:
            for field, value, top in (
                ("ef_search", ef_search, 1000),
                ("exact_limit", exact_limit, None),
            ):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConfigError(f"{field} must be a positive integer, got {value!r}")
                if top is not None and value > top:
                    raise ConfigError(f"{field} must be at most {top} (pgvector), got {value}")
            self.ef_search = ef_search
            self.exact_limit = exact_limit
            table = "vectors_" + name.replace("-", "__")
            if not _NAME.fullmatch(name) or len(table) > _MAX_TABLE:
                raise ConfigError(
                    f"vector collection name {name!r}: use a-z, 0-9, and single _ or -, "
                    f"starting with a letter, at most {_MAX_TABLE - len('vectors_')} long"
                )
            self.name = name
            self._table = sql.Identifier(table)
            self._table_name = table
            self._index = sql.Identifier(f"{table}_hnsw")
            self._index_name = f"{table}_hnsw"
            self._count: int | None = None
            self._cache: OrderedDict[int, F32] = OrderedDict()
            if dtype is not None and dtype not in _TYPES:
                raise ConfigError(f"dtype must be one of {', '.join(_TYPES)}, got {dtype!r}")
            self._dim, self._dtype = self._open(dim, fresh, dtype)
            self._type = sql.SQL(_TYPES[self._dtype][0])
        except BaseException:
            self.close()
            raise

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    @property
    def dtype(self) -> str:
        """What the collection stores: ``"float32"`` or ``"float16"``."""
        return self._dtype

    def __len__(self) -> int:
        """The number of vectors (counted once, then kept up to date by this handle's
        writes; another process's writes show in a handle opened after them)."""
        if self._count is None:
            with self._conn("count vectors", transaction=False) as conn:
                self._count = self._count_rows(conn)
        return self._count

    def close(self) -> None:
        """Build the HNSW index if a fresh collection still lacks it, then release."""
        if not self._closed:
            try:
                self.flush()
            finally:
                super().close()

    def __repr__(self) -> str:
        return f"PgVectorIndex({self.workspace.name!r}, {self.name!r}, dim={self._dim})"

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        """Add vectors in one transaction; an id already present gets the new vector."""
        ids = as_ids(ids)
        matrix = as_matrix(vectors, self._dim)
        if len(ids) != len(matrix):
            raise InputError(f"{len(ids)} ids but {len(matrix)} vectors", field="ids")
        ids, matrix = keep_last(ids, matrix)
        with self._conn("add vectors") as conn:
            if not len(ids):
                return
            conn.execute(
                sql.SQL(
                    "CREATE TEMPORARY TABLE IF NOT EXISTS staged_vectors (id bigint, "
                    "embedding vector({})) ON COMMIT DELETE ROWS"
                ).format(sql.Literal(self._dim))
            )
            with conn.cursor().copy(
                "COPY staged_vectors (id, embedding) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.write(_binary_copy(ids, matrix))
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, embedding) SELECT id, embedding::{} FROM staged_vectors "
                    "ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding, "
                    "retired_at = NULL"
                ).format(self._table, self._type)
            )
            conn.execute(  # revived: no longer retired
                "DELETE FROM retired_vectors WHERE collection = %s"
                " AND id IN (SELECT id FROM staged_vectors)",
                (self.name,),
            )
            conn.execute("DROP TABLE staged_vectors")
            self._count = None
            self._cache.clear()
            self._wrote = True

    def delete(self, ids: npt.ArrayLike) -> None:
        """Delete vectors (unknown ids are ignored): marked retired now, in one
        statement that leaves the collection's rows as they are, and purged by a later
        :meth:`flush` once ``grace_s`` has passed (see the module doc)."""
        ids = np.unique(as_ids(ids))
        if not len(ids):
            return
        with self._conn("delete vectors") as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO retired_vectors (collection, id, retired_at)"
                    " SELECT %s, id, now() FROM {} WHERE id = ANY(%s::bigint[])"
                    " AND retired_at IS NULL ON CONFLICT (collection, id) DO NOTHING"
                ).format(self._table),
                (self.name, ids.tolist()),
            )
        self._count = None
        self._cache.clear()
        self._wrote = True

    def ids(self) -> npt.NDArray[np.int64]:
        """Every id this handle serves, ascending (one statement)."""
        with self._conn("list vector ids", transaction=False) as conn:
            rows = conn.execute(
                sql.SQL("SELECT id FROM {} WHERE {} ORDER BY id").format(self._table, self._live)
            ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def ids_summary(self) -> tuple[int, int, int, int]:
        """:func:`~quillian.stores.protocols.ids_summary` of the ids this handle serves,
        summed up by the server, nothing listed: from the sums its triggers keep (see
        :data:`_ID_SUMS_DDL`), made with their first sums from every row where the
        collection has none yet; by reading every id where the handle also serves the
        retired ones."""
        with self._conn("sum up vector ids") as conn:
            if self.retired:
                row = conn.execute(sql.SQL(_SUM_IDS).format(self._table, self._live)).fetchone()
            else:
                if not self._summed(conn):
                    self._sum_ids(conn)
                row = conn.execute(
                    "SELECT coalesce(sum(n), 0), coalesce(bit_xor(xor), 0),"
                    " coalesce(sum(high), 0), coalesce(sum(low), 0)"
                    " FROM vector_id_sums WHERE collection = %s",
                    (self.name,),
                ).fetchone()
        return (int(row[0]), int(row[1]), int(row[2]), int(row[3])) if row else (0, 0, 0, 0)

    def _summed(self, conn: Any) -> bool:
        """Whether the collection's table has the triggers that sum its ids up."""
        row = conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s)"
            " AND tgname LIKE 'id_sums_%%'",
            (self._table_name,),
        ).fetchone()
        return bool(row) and int(row[0]) == len(_ID_SUMS_TRIGGERS)

    def _sum_ids(self, conn: Any) -> None:
        """Give the collection its id sums' triggers and first sums, from every row, in
        the caller's transaction: a trigger's creation holds off every writer of the
        table until it commits, so no write falls between the sums and the triggers."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"vectors:{self.name}",))
        if self._summed(conn):
            return
        for statement in _ID_SUMS_DDL:
            conn.execute(statement)
        for event, tables in _ID_SUMS_TRIGGERS.items():
            conn.execute(
                sql.SQL(
                    "CREATE OR REPLACE TRIGGER {} AFTER {} ON {} {} FOR EACH STATEMENT "
                    "EXECUTE FUNCTION sum_vector_ids({})"
                ).format(
                    sql.Identifier(f"id_sums_{event.lower()}"),
                    sql.SQL(event),
                    self._table,
                    sql.SQL(tables),
                    sql.Literal(self.name),
                )
            )
        conn.execute("DELETE FROM vector_id_sums WHERE collection = %s", (self.name,))
        conn.execute(
            sql.SQL(
                "INSERT INTO vector_id_sums SELECT %s, * FROM (" + _SUM_IDS + ") AS every"
            ).format(self._table, self._plain_live()),
            (self.name,),
        )

    def search(
        self, queries: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best ids and inner-product scores per query, best first: exact up
        to ``exact_limit`` vectors (ties by id), through HNSW beyond (recall: see the
        module doc)."""
        q = as_matrix(queries, self._dim, field="queries")
        k = check_k(k)
        found: list[list[tuple[int, float]]] = []
        ef = max(self.ef_search, min(1000, 2 * k))
        with self._conn("search vectors") as conn:
            exact = self._rows(conn) <= self.exact_limit
            order = "embedding <#> %s::{type}" + (", id" if exact else "")
            statement = sql.SQL(
                "SELECT id, (embedding <#> %s::{type}) FROM {table} WHERE {live} ORDER BY "
                + order
                + " LIMIT %s"
            ).format(type=self._type, table=self._table, live=self._live)
            if exact:  # a second sort key already keeps the planner off the HNSW index
                conn.execute("SET LOCAL enable_indexscan = off")
            else:
                if ef != EF_SEARCH:  # pooled connections search EF_SEARCH wide
                    conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
                if k > ef or not self.retired:  # HNSW alone returns at most ef rows, and
                    # fewer where retired rows are filtered out: scan on, in order
                    conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            for row in q:
                text = _vector_text(row)
                found.append(conn.execute(statement, (text, text, k)).fetchall())
            width = k
            if any(len(hits) < k for hits in found):
                width = min(k, self._count_rows(conn))
        ids = np.full((len(q), width), -1, dtype=np.int64)
        scores = np.full((len(q), width), -np.inf, dtype=np.float32)
        for i, hits in enumerate(found):
            hits = hits[:width]
            if hits:
                ids[i, : len(hits)] = [h[0] for h in hits]
                scores[i, : len(hits)] = [-h[1] for h in hits]  # <#> is the negated product
        return ids, scores

    def get(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Vectors (float32) in the order of ``ids``; raises :class:`UnknownIdError`
        naming every unknown id.

        Reads only the ids asked for that this handle does not hold: one round trip
        (``id = ANY(...)``). The last :data:`CACHE_VECTORS` vectors read are kept
        (least recently used dropped first) until this handle writes, as a retriever
        asks for the same relations' vectors several times in one query."""
        ids = as_ids(ids)
        unique = np.unique(ids)
        cache = self._cache
        missing = np.array([i for i in unique.tolist() if i not in cache], dtype=np.int64)
        if len(missing):
            got, matrix = self._read(missing)
            if len(got) < len(missing):
                raise UnknownIdError(np.setdiff1d(missing, got))
            for i, row in zip(got.tolist(), matrix, strict=True):
                cache[i] = row
        out = np.empty((len(ids), self._dim), dtype=np.float32)
        for i, row in enumerate(ids.tolist()):
            out[i] = cache[row]
            cache.move_to_end(row)
        while len(cache) > CACHE_VECTORS:
            cache.popitem(last=False)
        return out

    def _read(self, unique: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], F32]:
        """The stored ``(ids, vectors)`` among ``unique``, by id, in one statement."""
        with self._conn("read vectors", transaction=False) as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT id, vector_send(embedding::vector) FROM {} "
                    "WHERE id = ANY(%s::bigint[]) AND {} ORDER BY id"
                ).format(self._table, self._live),
                (unique.tolist(),),
            ).fetchall()
        got = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        # vector_send: int16 dim, int16 unused, then big-endian float4s
        raw = b"".join(bytes(r[1])[4:] for r in rows)
        return got, np.frombuffer(raw, dtype=">f4").astype(np.float32).reshape(-1, self._dim)

    def flush(self) -> None:
        """After writes through this handle, purge the vectors retired more than
        ``grace_s`` seconds ago; build
        the HNSW index if this collection lacks it (every :meth:`add` and
        :meth:`delete` is already committed when it returns)."""
        if self._closed:
            raise StoreError(f"{self.workspace.name}: the vector index is closed")
        if self._wrote and not self.retired:
            with self._conn("purge retired vectors") as conn:
                self._move_retired(conn)
                conn.execute(
                    sql.SQL(
                        "WITH gone AS (DELETE FROM retired_vectors WHERE collection = %s"
                        " AND retired_at < now() - make_interval(secs => %s) RETURNING id)"
                        " DELETE FROM {} WHERE id IN (SELECT id FROM gone)"
                    ).format(self._table),
                    (self.name, self.grace_s),
                )
                if self._summed(conn):  # the writes' rows of sums folded into one
                    conn.execute(
                        "WITH folded AS (DELETE FROM vector_id_sums WHERE collection = %s"
                        " RETURNING n, xor, high, low) INSERT INTO vector_id_sums"
                        " SELECT %s, sum(n), bit_xor(xor), sum(high), sum(low) FROM folded"
                        " HAVING count(*) > 0",
                        (self.name, self.name),
                    )
            self._wrote = False
        if not self._needs_index:
            return
        with self._conn("build the HNSW index") as conn:
            conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding {}) "
                    "WITH (m = {}, ef_construction = {})"
                ).format(
                    self._index,
                    self._table,
                    sql.SQL(_TYPES[self._dtype][1]),
                    sql.Literal(HNSW_M),
                    sql.Literal(HNSW_EF_CONSTRUCTION),
                )
            )
        self._needs_index = False

    def _move_retired(self, conn: Any) -> None:
        """Move the rows an older Quillian retired in the collection's own column to
        ``retired_vectors``, found by an index of their own (made here where the
        collection lacks it, by a writer's flush, never by a reader's open), so that
        looking for them does not read every row (0.03-0.04 s a collection at 100k)."""
        name = f"{self._table_name}_ret"  # no longer than the HNSW index's name
        if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone() in (None, (None,)):
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} (retired_at) WHERE retired_at IS NOT NULL"
                ).format(sql.Identifier(name), self._table)
            )
        conn.execute(
            sql.SQL(
                "WITH moved AS (INSERT INTO retired_vectors SELECT %s, id, retired_at FROM {}"
                " WHERE retired_at IS NOT NULL ON CONFLICT (collection, id) DO NOTHING)"
                " UPDATE {} SET retired_at = NULL WHERE retired_at IS NOT NULL"
            ).format(self._table, self._table),
            (self.name,),
        )

    def _plain_live(self) -> sql.Composable:
        """Which rows a handle opened plainly serves: those not retired."""
        return sql.SQL(
            "retired_at IS NULL AND id NOT IN"
            " (SELECT id FROM retired_vectors WHERE collection = {})"
        ).format(sql.Literal(self.name))

    def _ensure_retired(self, conn: Any) -> None:
        """Give a workspace made before it the table of retired vectors (checked first:
        a statement that makes it would wait for, and then block, every reader), under
        a lock of its own, so two collections opened at once do not both make it."""
        if conn.execute("SELECT to_regclass('retired_vectors')").fetchone() not in (None, (None,)):
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('vectors:retired'))")
        for statement in (*_ID_SUMS_DDL[:2], *_RETIRED_DDL):
            conn.execute(statement)

    def _rows(self, conn: Any) -> int:
        """How many vectors the collection holds (counted once per handle, again after
        it writes)."""
        return self._count if self._count is not None else self._count_rows(conn)

    def _count_rows(self, conn: Any) -> int:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE {}").format(self._table, self._live)
        ).fetchone()
        self._count = int(row[0]) if row else 0
        return self._count

    def _open(self, dim: int | None, fresh: bool, dtype: str | None) -> tuple[int, str]:
        """Create the collection or check it; returns its dimension and dtype."""
        with self._conn(f"open vector collection {self.name!r}") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"vectors:{self.name}",))
            if fresh or not self.retired:  # a reader serves the retired rows too
                self._ensure_retired(conn)
            if not self.retired:
                self._live = self._plain_live()
            row = conn.execute(  # the dimension, and the type its table's column has
                "SELECT c.dim, t.typname FROM vector_collections c"
                " LEFT JOIN pg_attribute a"
                " ON a.attrelid = to_regclass(%s) AND a.attname = 'embedding'"
                " LEFT JOIN pg_type t ON t.oid = a.atttypid WHERE c.name = %s",
                (self._table_name, self.name),
            ).fetchone()
            if row is not None:
                stored = int(row[0])
                if dim is not None and dim != stored:
                    raise ConfigError(
                        f"{self.workspace.name}: vector collection {self.name!r} holds "
                        f"{stored}-dimensional vectors, not {dim}; the workspace was built "
                        "with another embedding model"
                    )
                stored_dtype = self._stored_dtype(row[1])
                if dtype is not None and dtype != stored_dtype and not fresh:
                    raise ConfigError(
                        f"{self.workspace.name}: vector collection {self.name!r} stores "
                        f"{stored_dtype}, asked for {dtype}"
                    )
                if fresh:
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(self._index))
                    conn.execute(sql.SQL("TRUNCATE {}").format(self._table))
                    conn.execute("DELETE FROM retired_vectors WHERE collection = %s", (self.name,))
                    if self._summed(conn):  # a TRUNCATE fires no statement trigger
                        conn.execute(
                            "DELETE FROM vector_id_sums WHERE collection = %s", (self.name,)
                        )
                    if dtype is not None and dtype != stored_dtype:  # emptied: retyped at once
                        check_dtype(conn, dtype, self.workspace.name)
                        conn.execute(
                            sql.SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE {}({})").format(
                                self._table, sql.SQL(_TYPES[dtype][0]), sql.Literal(stored)
                            )
                        )
                        stored_dtype = dtype
                    self._needs_index = True
                else:  # a build that stopped before its flush left no index
                    found = conn.execute("SELECT to_regclass(%s)", (self._index_name,)).fetchone()
                    self._needs_index = found is None or found[0] is None
                self._add_retired_column(conn)
                return stored, stored_dtype
            dim = check_dim(dim, f"{self.workspace.name} vector collection {self.name!r}")
            dtype = dtype or "float32"
            check_dtype(conn, dtype, self.workspace.name)
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigint PRIMARY KEY, embedding {}({}) NOT NULL, "
                    "retired_at timestamptz)"
                ).format(self._table, sql.SQL(_TYPES[dtype][0]), sql.Literal(dim))
            )
            self._needs_index = True  # built by flush, over what was added by then
            conn.execute(
                "INSERT INTO vector_collections (name, dim) VALUES (%s, %s)", (self.name, dim)
            )
            return dim, dtype

    def _stored_dtype(self, type_name: str | None) -> str:
        """What the collection's table stores, by its column's type name."""
        found = {name: dtype for dtype, (name, _) in _TYPES.items()}.get(type_name or "")
        if found is None:
            raise StoreError(
                f"{self.workspace.name}: vector collection {self.name!r} has no vectors column"
            )
        return found

    def _add_retired_column(self, conn: Any) -> None:
        """Give a collection written before deletes its ``retired_at`` column (checked
        first: an ``ALTER TABLE`` would wait for, and then block, every reader)."""
        found = conn.execute(
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = 'retired_at' AND NOT attisdropped",
            (self._table_name,),
        ).fetchone()
        if found is None:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN retired_at timestamptz").format(self._table)
            )


def _vector_text(row: npt.NDArray[np.float32]) -> str:
    """pgvector's text form of one vector (9 significant digits: exact for float32)."""
    return "[" + ",".join(["%.9g"] * len(row)) % tuple(row.tolist()) + "]"


def _row_dtype(dim: int) -> np.dtype[Any]:
    """One ``(id, vector)`` row in binary ``COPY``: field count, then length and value
    per column (pgvector's binary vector: int16 dim, int16 unused, float4s)."""
    return np.dtype(
        [
            ("fields", ">i2"),
            ("id_len", ">i4"),
            ("id", ">i8"),
            ("vec_len", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("values", ">f4", (dim,)),
        ]
    )


_PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)


def _binary_copy(ids: npt.NDArray[np.int64], matrix: npt.NDArray[np.float32]) -> bytes:
    """The rows ``(id, vector)`` in PostgreSQL's binary ``COPY`` format, built with numpy.

    Per row: the field count, the int8 id (length 8), then the vector (length
    ``4 + 4 * dim``: pgvector's binary form is int16 dim, int16 unused, float4s).
    """
    n, dim = matrix.shape
    rows = np.zeros(n, dtype=_row_dtype(dim))
    rows["fields"] = 2
    rows["id_len"] = 8
    rows["id"] = ids
    rows["vec_len"] = 4 + 4 * dim
    rows["dim"] = dim
    rows["values"] = matrix
    return _PGCOPY_HEADER + rows.tobytes() + struct.pack("!h", -1)


def check_dtype(conn: Any, dtype: str, where: str) -> None:
    """Refuse ``dtype`` where the server's pgvector cannot store it: ``halfvec``
    (float16) came with pgvector 0.7 (:data:`HALFVEC_SINCE`). The version is the one
    installed in the database, else the one ``CREATE EXTENSION`` would install; a
    server with neither is left to the extension's own check."""
    if dtype != "float16":
        return
    row = conn.execute(
        "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'),"
        " (SELECT default_version FROM pg_available_extensions WHERE name = 'vector'))"
    ).fetchone()
    version = row[0] if row else None
    if version is not None and _version(version) < HALFVEC_SINCE:
        raise ConfigError(
            f"{where}: pgvector {version} on this server cannot store float16 vectors "
            "(halfvec needs pgvector 0.7 or later); upgrade pgvector, or index with "
            "--vector-dtype float32"
        )


def check_vector_dtype(location: str, dtype: str) -> None:
    """:func:`check_dtype` on the server ``location`` names: a build asks it before
    its manifest records the dtype, so no index is left made for vectors its server
    cannot store."""
    if dtype != "float16":
        return
    where = parse_location(location)
    with connect(where, autocommit=True) as conn:
        check_dtype(conn, dtype, where.display)


def _version(text: str) -> tuple[int, ...]:
    """``"0.6.2"`` as ``(0, 6, 2)``; each part's leading digits (``"0.8.0-rc1"``)."""
    parts = []
    for part in text.split("."):
        digits = re.match(r"\d*", part)
        parts.append(int(digits.group()) if digits and digits.group() else 0)
    return tuple(parts)
