"""Every SQLite statement of one update, timed, with its query plan: where an update's
SQL reads more than it changes (docs/scale.md, "The node-id map from bytes, the patch's
joins by key").

Run ``python research/update_sql.py INDEX FILE`` on a copy of an embedded index (it is
changed): adds FILE's documents and deletes them again, not measured (the first update
after a format change brings the stored state to it), then adds them once more with
every ``sqlite3`` connection the process opens timing each statement it executes, and
asks SQLite for the plan of each SELECT, INSERT, DELETE and UPDATE before it runs.
Prints one JSON object: the statements' total seconds and count, and the slowest
``--top`` with their seconds and plans. A plan step ``SCAN t`` of a large table ``t``
in a statement about a few logged rows is what to look for.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

_PLANNED = ("SELECT", "INSERT", "DELETE", "UPDATE", "WITH", "REPLACE")


class _Recorded:
    def __init__(self) -> None:
        self.on = False
        self.rows: list[tuple[float, str, list[str] | None]] = []


RECORDED = _Recorded()


class _Timed(sqlite3.Connection):
    """A connection timing its ``execute`` and ``executemany`` calls while recording."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        plan = None
        if RECORDED.on and sql.lstrip().upper().startswith(_PLANNED):
            try:
                rows = super().execute("EXPLAIN QUERY PLAN " + sql, *args).fetchall()
                plan = [str(r[3]) for r in rows]
            except sqlite3.Error as exc:  # a statement its plan cannot be asked of
                plan = [f"no plan: {exc}"]
        start = time.perf_counter()
        cursor = super().execute(sql, *args)
        self._note(time.perf_counter() - start, sql, plan)
        return cursor

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        start = time.perf_counter()
        cursor = super().executemany(sql, *args)
        self._note(time.perf_counter() - start, "(many) " + sql, None)
        return cursor

    def _note(self, seconds: float, sql: str, plan: list[str] | None) -> None:
        if RECORDED.on:
            RECORDED.rows.append((seconds, " ".join(sql.split()), plan))


def _timed_connections() -> None:
    """Every ``sqlite3.connect`` of this process from now on makes a :class:`_Timed`."""
    connect = sqlite3.connect

    def timed(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", _Timed)
        return connect(*args, **kwargs)

    sqlite3.connect = timed  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", help="an embedded index directory (a copy: it is changed)")
    parser.add_argument("file", type=Path, help="documents to add (a one-line JSONL, say)")
    parser.add_argument("--top", type=int, default=15, help="how many statements to list")
    args = parser.parse_args()
    _timed_connections()
    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import IndexSettings, delete_documents, index_documents

    docs = list(read_documents(args.file))
    index_documents(args.index, docs, IndexSettings())
    delete_documents(args.index, [d.id for d in docs])
    RECORDED.on = True
    start = time.perf_counter()
    index_documents(args.index, docs, IndexSettings())
    call = time.perf_counter() - start
    RECORDED.on = False
    rows = sorted(RECORDED.rows, key=lambda r: -r[0])
    out = {
        "call_s": round(call, 3),
        "statements": len(rows),
        "statements_s": round(sum(r[0] for r in rows), 3),
        "slowest": [
            {"s": round(s, 4), "sql": sql[:300], "plan": plan} for s, sql, plan in rows[: args.top]
        ],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
