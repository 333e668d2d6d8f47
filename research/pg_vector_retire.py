"""What retiring a deleted vector costs on PostgreSQL, by the collection's size: the
statement stop 90's code ran (``UPDATE ... SET retired_at = now()``: a new version of
each row, which pgvector puts into the HNSW graph again) against stop 91's (the ids
inserted into ``retired_vectors``, the collection's rows left as they are), on copies
of the same bases, interleaved round by round, each statement in a savepoint rolled
back so that every round finds the collection as the base left it (docs/scale.md,
stop 91).

Run ``python research/pg_vector_retire.py --work WORK --base-of LABEL --sizes 20k,100k``
with the PostgreSQL bases that ``research/updates.py --backends postgres`` built under
``WORK`` (``--base-of``: the label of the tree that built them). Per size and
collection it prints the median milliseconds per retired vector of each statement
over ``--rounds`` rounds of ``--ids`` random live ids, their ratio, and the plan a
plain handle's search takes through HNSW with the retired ids left out.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pg_bench import PgServer  # noqa: E402
from updates import Backend  # noqa: E402

OLD = "UPDATE {t} SET retired_at = now() WHERE id = ANY(%s::bigint[]) AND retired_at IS NULL"
NEW = (
    "INSERT INTO retired_vectors (collection, id, retired_at) SELECT %s, id, now() FROM {t}"
    " WHERE id = ANY(%s::bigint[]) AND retired_at IS NULL ON CONFLICT (collection, id) DO NOTHING"
)


def _timed(conn: Any, statement: str, args: tuple[Any, ...]) -> float:
    """Seconds ``statement`` took, in a savepoint rolled back after it."""
    conn.execute("SAVEPOINT retire")
    start = time.perf_counter()
    conn.execute(statement, args)
    seconds = time.perf_counter() - start
    conn.execute("ROLLBACK TO SAVEPOINT retire")
    return seconds


def measure(location: str, rounds: int, n_ids: int) -> dict[str, Any]:
    """Per collection of the workspace at ``location``: both statements' milliseconds
    per vector (each round's random ids, the statements' order alternating) and the
    plan of a plain handle's search."""
    from quillian.stores.postgres import PgVectorIndex
    from quillian.stores.postgres._pg import Workspace

    workspace = Workspace(location)
    found: dict[str, Any] = {}
    try:
        with workspace.connection("list the collections") as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM vector_collections ORDER BY 1")]
        for name in names:
            index = PgVectorIndex(workspace, name)  # makes retired_vectors on a base before it
            table = index._table_name
            index.close()
            times: dict[str, list[float]] = {"old": [], "new": []}
            with workspace.connection("retire vectors, rolled back") as conn:
                (rows,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
                for r in range(rounds):
                    ids = [
                        row[0]
                        for row in conn.execute(
                            f"SELECT id FROM {table} TABLESAMPLE BERNOULLI (5) REPEATABLE (%s)"
                            " ORDER BY random() LIMIT %s",
                            (r, n_ids),
                        )
                    ]
                    turns = [("old", OLD, (ids,)), ("new", NEW, (name, ids))]
                    for label, statement, args in turns if r % 2 == 0 else turns[::-1]:
                        seconds = _timed(conn, statement.format(t=table), args)
                        times[label].append(1000 * seconds / len(ids))
                conn.execute("SAVEPOINT plan")
                conn.execute(NEW.format(t=table), (name, ids))
                plan = _search_plan(conn, table, name)
                conn.execute("ROLLBACK TO SAVEPOINT plan")
            old, new = statistics.median(times["old"]), statistics.median(times["new"])
            found[name] = {
                "vectors": rows,
                "old_ms_per_vector": round(old, 3),
                "new_ms_per_vector": round(new, 3),
                "ratio": round(old / new, 1),
                "rounds": {k: [round(v, 3) for v in vs] for k, vs in times.items()},
                "search_plan": plan,
            }
    finally:
        workspace.close()
    return found


def _search_plan(conn: Any, table: str, name: str) -> list[str]:
    """The plan of a plain handle's search through HNSW (the statement it runs)."""
    conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
    vector = conn.execute(f"SELECT embedding FROM {table} LIMIT 1").fetchone()[0]
    live = "retired_at IS NULL AND id NOT IN (SELECT id FROM retired_vectors WHERE collection = %s)"
    rows = conn.execute(
        f"EXPLAIN SELECT id, (embedding <#> %s) FROM {table} WHERE {live}"
        " ORDER BY embedding <#> %s LIMIT 5",
        (vector, name, vector),
    ).fetchall()
    return [re.sub(r"'\[[^]]*\]'", "'[...]'", row[0]) for row in rows]  # the vector left out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="updates.py's --work")
    parser.add_argument("--base-of", required=True, help="the label of the bases' tree")
    parser.add_argument("--sizes", default="20k,100k")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ids", type=int, default=20, help="vectors retired a round")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    with PgServer(args.work / "pg") as pg:
        backend = Backend("postgres", args.work / "postgres", pg, args.base_of)
        for size in args.sizes.split(","):
            location = backend.copy(args.base_of, size)
            try:
                result[size] = measure(location, args.rounds, args.ids)
            finally:
                backend.drop(location)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
