"""The graph in plain PostgreSQL tables, with its CSR snapshot cached on local disk.

``graph_nodes`` holds typed nodes (dense ints follow the order they were first added);
``graph_edges`` holds weighted, typed edges between node rows with the relation each
carries. Every write bumps the workspace's ``graph_version`` in the same transaction.
:meth:`PgGraphStore.snapshot` reads both tables in one repeatable-read transaction,
builds the :class:`~quillian.stores.snapshot.GraphSnapshot` in numpy and saves it under
the cache directory stamped with the workspace id and the version it reflects; the next
snapshot of an unchanged graph is the cached one, memory-mapped, with one query to check
the version. Graph algorithms stay in numpy; no graph extension is needed.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from quillian.errors import IndexDamagedError, InputError
from quillian.stores.embedded.graph import _column, edge_columns
from quillian.stores.postgres._pg import PgStore, Workspace
from quillian.stores.snapshot import GraphSnapshot, IdMap

logger = logging.getLogger(__name__)

__all__ = ["PgGraphStore"]

_VERSION_KEY = "graph_version"
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
        if fresh:
            with self._conn("empty the graph") as conn:
                conn.execute("TRUNCATE graph_nodes, graph_edges RESTART IDENTITY")
                _bump(conn)

    def add_nodes(self, node_ids: Sequence[str], kinds: npt.ArrayLike) -> None:
        """Add typed nodes; ``kinds`` is one small int per node, or one for all."""
        kind_array = _column(kinds, len(node_ids), np.int8, "kinds")
        staged: dict[str, int] = {}
        for node_id, kind in zip(node_ids, kind_array.tolist(), strict=True):
            if not isinstance(node_id, str):
                raise InputError(f"node id {node_id!r} is not a string", field="node_ids")
            if staged.setdefault(node_id, kind) != kind:
                raise InputError(f"node {node_id!r} has kind {staged[node_id]}, cannot add {kind}")
        with self._conn("add graph nodes") as conn:
            if not staged:
                return
            conn.execute("LOCK TABLE graph_nodes IN SHARE ROW EXCLUSIVE MODE")
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
        with self._conn("add graph edges") as conn:
            if not m:
                return
            names = list(dict.fromkeys([*sources, *targets]))
            seq = dict(
                conn.execute(
                    "SELECT id, seq FROM graph_nodes WHERE id = ANY(%s)", (names,)
                ).fetchall()
            )
            rows = np.zeros(m, dtype=_EDGE_ROW)
            for field, ids in (("source", sources), ("target", targets)):
                for node_id in ids:
                    if node_id not in seq:
                        raise InputError(
                            f"edge names unknown node id {node_id!r}", field=field + "s"
                        )
                rows[field] = [seq[i] for i in ids]
            rows["fields"] = 5
            rows["source_len"] = rows["target_len"] = 8
            rows["kind_len"], rows["weight_len"], rows["relation_len"] = 2, 4, 4
            rows["kind"], rows["weight"], rows["relation"] = kind_col, weight_col, relation_col
            with conn.cursor().copy(
                "COPY graph_edges (source, target, kind, weight, relation) FROM STDIN "
                "(FORMAT BINARY)"
            ) as copy:
                copy.write(_PGCOPY_HEADER + rows.tobytes() + struct.pack("!h", -1))
            _bump(conn)

    def snapshot(self) -> GraphSnapshot:
        """The graph as a CSR snapshot: the cached one when the tables have not changed
        since it was built, else rebuilt from the tables and cached."""
        with self._conn("read the graph") as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            version = _version(conn)
            target = self.cache / f"{self.workspace.id}-{version}"
            if (target / "snapshot.json").exists():
                try:
                    return GraphSnapshot.load(target, mmap=True)
                except IndexDamagedError as exc:  # the tables are the truth: cache again
                    logger.warning("%s; caching it again from the graph tables", exc)
                    shutil.rmtree(target, ignore_errors=True)
            snapshot = _read_snapshot(conn)
        staging = self.cache / f".staging-{os.getpid()}-{version}"
        shutil.rmtree(staging, ignore_errors=True)
        snapshot.save(staging)
        try:
            staging.rename(target)
        except OSError:  # another process cached the same version first
            shutil.rmtree(staging, ignore_errors=True)
        for old in self.cache.iterdir():
            if old != target and not old.name.startswith(".staging"):
                shutil.rmtree(old, ignore_errors=True)  # open memory maps stay valid
        return GraphSnapshot.load(target, mmap=True)

    def version(self) -> int:
        """The graph tables' version: bumped by every write."""
        with self._conn("read the graph version") as conn:
            return _version(conn)


def _bump(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO quillian_meta (key, value) VALUES (%s, '1') ON CONFLICT (key) "
        "DO UPDATE SET value = (quillian_meta.value::bigint + 1)::text",
        (_VERSION_KEY,),
    )


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
