"""Whether the graph tables database could be a base plus a delta behind SQLite views.

An update copies ``tables/graph.sqlite`` whole (70 MB at 100k passages) before
patching a few rows of it: the copy and the digest of the copy are most of what an
update at 100k pays beyond 20k outside the positions (docs/sections/stable-positions.md,
"The tables database"). One way out would keep an immutable base (hard-linked into each
new tables folder) and a small delta of the rows changed since it, read through TEMP
views ``SELECT ... FROM delta.T UNION ALL SELECT ... FROM base.T WHERE NOT EXISTS (a row
of the delta or of its list of deleted keys with the same key)``, with INSTEAD OF
triggers taking the patch's writes to the delta.

This script builds such a pair at the size of the 100k index's ``texts`` and
``relations`` tables (200k and 180k rows, a delta of 200 texts and 180 deleted
relations) and times the readers' shapes of query through the views against the same
queries on one table holding the same rows, printing SQLite's plan: a view that
UNION ALL makes is materialized where it is joined (SQLite does not flatten a compound
subquery into a join), so every lookup reads the whole base.

Run ``python research/tables_delta_views.py [--rows 200000] [--repeats 5]``; it prints
one JSON object (milliseconds, best of the repeats).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT, refs INTEGER NOT NULL);
CREATE TABLE relations (row INTEGER PRIMARY KEY, description INTEGER, chunk INTEGER NOT NULL);
CREATE INDEX relations_chunk ON relations (chunk);
"""
TABLES = {"texts": ("id", "id, text, refs"), "relations": ("row", "row, description, chunk")}
QUERIES = {
    "relations by key, their texts joined": (
        "SELECT r.row, d.text FROM relations r LEFT JOIN texts d ON d.id = r.description"
        " WHERE r.row IN (1000, 2000, 77777)"
    ),
    "relations of two chunks, their texts joined": (
        "SELECT r.row, d.text FROM relations r LEFT JOIN texts d ON d.id = r.description"
        " WHERE r.chunk IN (500, 1000)"
    ),
    "one text by key": "SELECT text FROM texts WHERE id = 4321",
    "largest relation key": "SELECT max(row) FROM relations",
}


def build(folder: Path, rows: int) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """The base and delta behind views, and one database holding what they show."""
    texts = [(i, f"text {i}", 1) for i in range(rows)]
    relations = [(i, i, i // 2) for i in range(rows * 9 // 10)]
    changed = {i: (i, f"new {i}", 2) for i in range(0, rows, 1000)}
    gone = set(range(5, len(relations), 997))
    with sqlite3.connect(folder / "base.db") as base:
        base.executescript(SCHEMA)
        base.executemany("INSERT INTO texts VALUES (?, ?, ?)", texts)
        base.executemany("INSERT INTO relations VALUES (?, ?, ?)", relations)
    base.close()
    delta = sqlite3.connect(folder / "delta.db")
    delta.executescript(
        SCHEMA + "CREATE TABLE texts_gone (id INTEGER PRIMARY KEY);"
        "CREATE TABLE relations_gone (row INTEGER PRIMARY KEY);"
    )
    delta.executemany("INSERT INTO texts VALUES (?, ?, ?)", list(changed.values()))
    delta.executemany("INSERT INTO relations_gone VALUES (?)", ((r,) for r in sorted(gone)))
    delta.commit()
    delta.execute("ATTACH DATABASE ? AS base", (str(folder / "base.db"),))
    for table, (key, columns) in TABLES.items():
        delta.execute(
            f"CREATE TEMP VIEW {table} AS SELECT {columns} FROM main.{table} UNION ALL"
            f" SELECT {columns} FROM base.{table} b WHERE NOT EXISTS (SELECT 1 FROM"
            f" main.{table} m WHERE m.{key} = b.{key}) AND NOT EXISTS (SELECT 1 FROM"
            f" main.{table}_gone g WHERE g.{key} = b.{key})"
        )
    whole = sqlite3.connect(folder / "whole.db")
    whole.executescript(SCHEMA)
    whole.executemany("INSERT INTO texts VALUES (?, ?, ?)", [changed.get(t[0], t) for t in texts])
    whole.executemany(
        "INSERT INTO relations VALUES (?, ?, ?)", (r for r in relations if r[0] not in gone)
    )
    whole.commit()
    return delta, whole


def best_ms(conn: sqlite3.Connection, sql: str, repeats: int) -> tuple[float, list[object]]:
    times, rows = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        rows = conn.execute(sql).fetchall()
        times.append((time.perf_counter() - start) * 1e3)
    return round(min(times), 3), sorted(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        views, whole = build(Path(tmp), args.rows)
        report: dict[str, object] = {"sqlite": sqlite3.sqlite_version, "rows": args.rows}
        for name, sql in QUERIES.items():
            through, found = best_ms(views, sql, args.repeats)
            direct, expected = best_ms(whole, sql, args.repeats)
            plan = [row[3] for row in views.execute("EXPLAIN QUERY PLAN " + sql)]
            report[name] = {
                "views_ms": through,
                "one_table_ms": direct,
                "same_rows": found == expected,
                "materialized": any(step.startswith("MATERIALIZE") for step in plan),
            }
        views.close()
        whole.close()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
