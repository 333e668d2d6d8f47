"""Row counts SQLite keeps as rows come and go, read in constant time.

``SELECT count(*)`` walks every page of a table's smallest index: 0.5 to 1.3 ms a table
at 100k passages, and an update checked five such counts, a cost that grows with the
corpus (``research/update_sql.py``; docs/scale.md, stop 96). Here a table's count is a
row of ``row_counts`` that two triggers keep as rows are inserted and deleted, in the
same transactions, so the count is what the table holds at every commit, whichever
connection or version of Quillian wrote it. A trigger costs about 1.5 µs a row
inserted; a bulk write makes its table's triggers after its rows are in.

The PostgreSQL store keeps its counts the same way (``stores/postgres/documents.py``).
"""

from __future__ import annotations

import sqlite3

__all__ = ["keep_counts", "row_count"]

TABLE = "row_counts"


def _triggers(table: str) -> tuple[str, str]:
    return f"{table}_counted_in", f"{table}_counted_out"


def keep_counts(conn: sqlite3.Connection, tables: tuple[str, ...], schema: str = "main") -> None:
    """Have SQLite count the rows of ``tables`` (of the database ``schema``) as they
    change: the table of counts and each table's two triggers made where missing, its
    count taken once then. Run it in the caller's write transaction, so that the count
    and the triggers come together."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {schema}.{TABLE}"
        " (tbl TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID"
    )
    listed = conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'trigger'")
    made = {name for (name,) in listed}
    for table in tables:
        inserted, deleted = _triggers(table)
        if inserted in made and deleted in made:
            continue
        conn.execute(
            f"INSERT OR REPLACE INTO {schema}.{TABLE} SELECT ?, count(*) FROM {schema}.{table}",
            (table,),
        )
        for name, event, step in ((inserted, "INSERT", "+"), (deleted, "DELETE", "-")):
            conn.execute(
                f"CREATE TRIGGER IF NOT EXISTS {schema}.{name} AFTER {event} ON {table}"
                f" BEGIN UPDATE {TABLE} SET n = n {step} 1 WHERE tbl = '{table}'; END"
            )


def row_count(conn: sqlite3.Connection, table: str, schema: str = "main") -> int:
    """How many rows ``table`` (of the database ``schema``) holds: its kept count where
    :func:`keep_counts` keeps one (its triggers still there), else counted now."""
    try:
        found = conn.execute(
            f"SELECT n FROM {schema}.{TABLE} WHERE tbl = ? AND (SELECT count(*) FROM"
            f" {schema}.sqlite_master WHERE type = 'trigger' AND name IN (?, ?)) = 2",
            (table, *_triggers(table)),
        ).fetchone()
    except sqlite3.OperationalError:  # no table of counts
        found = None
    if found is None:
        found = conn.execute(f"SELECT count(*) FROM {schema}.{table}").fetchone()
    return int(found[0])
