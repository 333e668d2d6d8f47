"""The graph in PostgreSQL, with its CSR snapshot cached on local disk.

A graph written whole (:meth:`PgGraphStore.write_snapshot`, what a build does) is kept
as its snapshot's files in ``graph_arrays`` (each file in parts of at most 64 MB), so a
build sends and a replica reads the arrays as they are, a few bytes per edge, instead
of a row per node and per edge. A graph written node by node (``add_nodes``,
``add_edges``) is kept in plain tables: ``graph_nodes`` holds typed nodes (dense ints
follow the order they were first added); ``graph_edges`` holds weighted, typed edges
between node rows with the relation each carries. Adding to a graph kept as arrays
moves it into the tables first. Every write bumps the workspace's ``graph_version`` in
the same transaction. :meth:`PgGraphStore.snapshot` reads the graph in one
repeatable-read transaction and saves it under the cache directory stamped with the
workspace id and the version it reflects; the next snapshot of an unchanged graph is
the cached one, memory-mapped, with one query to check the version. Graph algorithms
stay in numpy; no graph extension is needed.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from quillian.errors import IndexDamagedError, InputError, StoreError
from quillian.stores.embedded.graph import _column, edge_columns
from quillian.stores.postgres._pg import GRAPH_ARRAYS_DDL, PgStore, Workspace
from quillian.stores.snapshot import GraphSnapshot, IdMap

logger = logging.getLogger(__name__)

__all__ = ["PgGraphStore"]

_VERSION_KEY = "graph_version"
#: Bytes per row of ``graph_arrays`` (a ``bytea`` value holds at most 1 GB).
_PART = 64 << 20
_PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
# One edge row in binary COPY: field count, then (length, value) per column.
_EDGE_ROW = np.dtype(
    [
        ("fields", ">i2"),
        ("source_len", ">i4"),
        ("source", ">i8"),
        ("target_len", ">i4"),
        ("target", ">i8"),
        ("kind_len", ">i4"),
        ("kind", ">i2"),
        ("weight_len", ">i4"),
        ("weight", ">f4"),
        ("relation_len", ">i4"),
        ("relation", ">i4"),
    ]
)


class PgGraphStore(PgStore):
    """:class:`~quillian.stores.protocols.GraphStore` in PostgreSQL tables.

    Args:
        workspace: the workspace (or its location).
        cache: the local directory for snapshots.
        fresh: empty the graph first (a build rewrites it whole).

    Each :meth:`add_nodes` or :meth:`add_edges` batch is validated whole and written in
    one transaction, so a rejected batch changes nothing and nothing waits for ``close``.
    """

    def __init__(self, workspace: Workspace | str, cache: str | Path, *, fresh: bool = False):
        super().__init__(workspace)
        self.cache = Path(cache)
        # emptied in the transaction of the first write (or at close), so that no
        # reader sees an empty graph between a build's clearing and its writing
        self._fresh = fresh

    def close(self) -> None:
        """Release the store; a fresh store nothing was written to is emptied first."""
        if not self._closed and self._fresh:
            with self._writing("empty the graph"):
                pass
        super().close()

    def add_nodes(self, node_ids: Sequence[str], kinds: npt.ArrayLike) -> None:
        """Add typed nodes; ``kinds`` is one small int per node, or one for all."""
        kind_array = _column(kinds, len(node_ids), np.int8, "kinds")
        staged: dict[str, int] = {}
        for node_id, kind in zip(node_ids, kind_array.tolist(), strict=True):
            if not isinstance(node_id, str):
                raise InputError(f"node id {node_id!r} is not a string", field="node_ids")
            if staged.setdefault(node_id, kind) != kind:
                raise InputError(f"node {node_id!r} has kind {staged[node_id]}, cannot add {kind}")
        with self._writing("add graph nodes") as conn:
            if not staged:
                return
            known = dict(
                conn.execute(
                    "SELECT id, kind FROM graph_nodes WHERE id = ANY(%s)", (list(staged),)
                ).fetchall()
            )
            for node_id, kind in staged.items():
                if node_id in known and known[node_id] != kind:
                    raise InputError(
                        f"node {node_id!r} has kind {known[node_id]}, cannot add it with {kind}"
                    )
            new = [(i, k) for i, k in staged.items() if i not in known]
            if new:
                with conn.cursor().copy("COPY graph_nodes (id, kind) FROM STDIN") as copy:
                    for row in new:
                        copy.write_row(row)
                _bump(conn)

    def add_edges(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        kinds: npt.ArrayLike,
        weights: npt.ArrayLike | None = None,
        relations: npt.ArrayLike | None = None,
    ) -> None:
        """Add directed edges between known nodes; weights default to 1, relations to -1."""
        kind_col, weight_col, relation_col = edge_columns(
            sources, targets, kinds, weights, relations
        )
        m = len(sources)
        with self._writing("add graph edges") as conn:
            if not m:
                return
            names = list(dict.fromkeys([*sources, *targets]))
            seq = dict(
                conn.execute(
                    "SELECT id, seq FROM graph_nodes WHERE id = ANY(%s)", (names,)
                ).fetchall()
            )
            ends = []
            for field, ids in (("source", sources), ("target", targets)):
                for node_id in ids:
                    if node_id not in seq:
                        raise InputError(
                            f"edge names unknown node id {node_id!r}", field=field + "s"
                        )
                ends.append(np.array([seq[i] for i in ids], np.int64))
            _copy_edges(conn, ends[0], ends[1], kind_col, weight_col, relation_col)
            _bump(conn)

    def write_snapshot(self, snapshot: GraphSnapshot) -> GraphSnapshot:
        """Write ``snapshot`` whole as this store's graph, which must hold nothing (or
        be fresh), as its files in ``graph_arrays``: one transaction, so readers see the
        previous graph until it commits. Returns it as cached, memory-mapped."""
        staging = self._staging("write")
        try:
            snapshot.save(staging)
            with self._writing("write the graph") as conn:
                if _holds_graph(conn):
                    raise StoreError(
                        f"{self.workspace.name}: write_snapshot needs an empty graph store"
                    )
                with conn.cursor().copy(
                    "COPY graph_arrays (name, part, data) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["text", "int4", "bytea"])
                    for path in sorted(staging.iterdir()):
                        data = path.read_bytes()
                        for part, start in enumerate(range(0, max(len(data), 1), _PART)):
                            copy.write_row((path.name, part, data[start : start + _PART]))
                version = _bump(conn)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self._cached(staging, version, verify=False)  # just written

    def snapshot(self) -> GraphSnapshot:
        """The graph as a CSR snapshot: the cached one when the graph has not changed
        since it was built, else read from the workspace and cached."""
        if self._fresh:
            with self._writing("empty the graph"):
                pass
        with self._conn("read the graph") as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            version = _version(conn)
            target = self._target(version)
            if (target / "snapshot.json").exists():
                try:
                    return GraphSnapshot.load(target, mmap=True)
                except IndexDamagedError as exc:  # the workspace is the truth: cache again
                    logger.warning("%s; caching it again from the workspace", exc)
                    shutil.rmtree(target, ignore_errors=True)
            files = _read_arrays(conn)
            snapshot = None if files else _read_snapshot(conn)
        staging = self._staging(str(version))
        if snapshot is not None:
            snapshot.save(staging)
        for name, data in files.items():
            (staging / name).write_bytes(data)
        return self._cached(staging, version, verify=True)

    def version(self) -> int:
        """The graph tables' version: bumped by every write."""
        with self._conn("read the graph version") as conn:
            return _version(conn)

    @contextmanager
    def _writing(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        """A transaction that writes the graph, locked against other writers, in which
        the graph takes nodes and edges by id: emptied first where the store is fresh
        (it is no longer once that commits), else moved from ``graph_arrays`` into the
        tables where it is kept there."""
        with self._conn(action) as conn:
            if conn.execute("SELECT to_regclass('graph_arrays') IS NULL").fetchone() == (True,):
                for statement in GRAPH_ARRAYS_DDL:
                    conn.execute(statement)
            conn.execute("LOCK TABLE graph_nodes IN SHARE ROW EXCLUSIVE MODE")
            if self._fresh:
                _clear(conn)
                _bump(conn)
            else:
                _move_arrays_to_tables(conn, lambda: self._staging("move"))
            yield conn
        self._fresh = False

    def _target(self, version: int) -> Path:
        return self.cache / f"{self.workspace.id}-{version}"

    def _staging(self, tag: str) -> Path:
        staging = self.cache / f".staging-{os.getpid()}-{threading.get_ident()}-{tag}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        return staging

    def _cached(self, staging: Path, version: int, *, verify: bool) -> GraphSnapshot:
        """``staging`` moved into place as the cached snapshot of ``version`` (another
        process's copy of it kept where it was first), older ones removed."""
        target = self._target(version)
        try:
            staging.rename(target)
        except OSError:  # another process cached the same version first
            shutil.rmtree(staging, ignore_errors=True)
        for old in self.cache.iterdir():
            if old != target and not old.name.startswith(".staging"):
                shutil.rmtree(old, ignore_errors=True)  # open memory maps stay valid
        return GraphSnapshot.load(target, mmap=True, verify=verify)


def _bump(conn: psycopg.Connection[Any]) -> int:
    """Count one more write of the graph; returns its new version."""
    row = conn.execute(
        "INSERT INTO quillian_meta (key, value) VALUES (%s, '1') ON CONFLICT (key) "
        "DO UPDATE SET value = (quillian_meta.value::bigint + 1)::text RETURNING value",
        (_VERSION_KEY,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _clear(conn: psycopg.Connection[Any]) -> None:
    """Empty the graph. The arrays' rows are deleted, not truncated, so that readers
    keep reading the graph they had (a TRUNCATE would make them wait for the commit);
    the tables are truncated only where they hold a graph."""
    conn.execute("DELETE FROM graph_arrays")
    if conn.execute("SELECT EXISTS (SELECT 1 FROM graph_nodes)").fetchone() == (True,):
        conn.execute("TRUNCATE graph_nodes, graph_edges RESTART IDENTITY")


def _holds_graph(conn: psycopg.Connection[Any]) -> bool:
    """Whether the workspace holds a graph, in its tables or as arrays."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM graph_nodes) OR EXISTS (SELECT 1 FROM graph_arrays)"
    ).fetchone()
    return bool(row and row[0])


def _move_arrays_to_tables(conn: psycopg.Connection[Any], staging: Callable[[], Path]) -> None:
    """The graph kept in ``graph_arrays``, if any, moved into the tables (nodes in
    their snapshot order, each node's edges in CSR order); ``staging`` gives a folder
    to read it in."""
    files = _read_arrays(conn)
    if not files:
        return
    folder = staging()
    try:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        snapshot = GraphSnapshot.load(folder, mmap=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _clear(conn)
    with conn.cursor().copy("COPY graph_nodes (id, kind) FROM STDIN") as copy:
        ids = snapshot.ids.ids_of(range(snapshot.n_nodes))
        for row in zip(ids, snapshot.kinds.tolist(), strict=True):
            copy.write_row(row)
    seqs = np.array(
        [r[0] for r in conn.execute("SELECT seq FROM graph_nodes ORDER BY seq")], np.int64
    )
    _copy_edges(
        conn,
        seqs[snapshot.edge_sources()],
        seqs[snapshot.indices],
        snapshot.edge_kinds,
        snapshot.weights,
        snapshot.edge_relations,
    )


def _read_arrays(conn: psycopg.Connection[Any]) -> dict[str, bytes]:
    """The snapshot files kept in ``graph_arrays`` (none in a workspace made before
    the table, or holding its graph in the tables), joined from their parts."""
    if conn.execute("SELECT to_regclass('graph_arrays') IS NULL").fetchone() == (True,):
        return {}
    files: dict[str, bytearray] = {}
    cursor = conn.cursor(binary=True)
    for name, data in cursor.execute("SELECT name, data FROM graph_arrays ORDER BY name, part"):
        files.setdefault(name, bytearray()).extend(data)
    return {name: bytes(data) for name, data in files.items()}


def _copy_edges(
    conn: psycopg.Connection[Any],
    sources: npt.NDArray[np.int64],
    targets: npt.NDArray[np.int64],
    kinds: npt.ArrayLike,
    weights: npt.ArrayLike,
    relations: npt.ArrayLike,
) -> None:
    """Edges between node rows ``sources`` and ``targets`` (their ``seq``), in one
    binary COPY."""
    rows = np.zeros(len(sources), dtype=_EDGE_ROW)
    rows["source"], rows["target"] = sources, targets
    rows["fields"] = 5
    rows["source_len"] = rows["target_len"] = 8
    rows["kind_len"], rows["weight_len"], rows["relation_len"] = 2, 4, 4
    rows["kind"], rows["weight"], rows["relation"] = kinds, weights, relations
    with conn.cursor().copy(
        "COPY graph_edges (source, target, kind, weight, relation) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.write(_PGCOPY_HEADER + rows.tobytes() + struct.pack("!h", -1))


def _version(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT value FROM quillian_meta WHERE key = %s", (_VERSION_KEY,)).fetchone()
    return int(row[0]) if row else 0


def _read_snapshot(conn: psycopg.Connection[Any]) -> GraphSnapshot:
    """Both tables as one snapshot (nodes by ``seq``, each node's edges in added order)."""
    nodes = conn.execute("SELECT seq, id, kind FROM graph_nodes ORDER BY seq").fetchall()
    seqs = np.fromiter((n[0] for n in nodes), dtype=np.int64, count=len(nodes))
    buffer = bytearray()
    with conn.cursor().copy(
        "COPY (SELECT source, target, kind, weight, relation FROM graph_edges ORDER BY seq) "
        "TO STDOUT (FORMAT BINARY)"
    ) as copy:
        for block in copy:
            buffer += block
    body = bytes(buffer[len(_PGCOPY_HEADER) : -2])
    edges = np.frombuffer(body, dtype=_EDGE_ROW)
    return GraphSnapshot.from_arrays(
        IdMap.from_ids([n[1] for n in nodes]),
        np.fromiter((n[2] for n in nodes), dtype=np.int8, count=len(nodes)),
        np.searchsorted(seqs, edges["source"]).astype(np.int64),
        np.searchsorted(seqs, edges["target"]).astype(np.int64),
        edges["kind"].astype(np.int8),
        edges["weight"].astype(np.float32),
        edges["relation"].astype(np.int32),
    )
