"""What a long-running process pays to add and delete one document in a PostgreSQL
workspace, source trees side by side in one run: the PostgreSQL counterpart of
``research/update_pairs_served.sh`` (docs/scale.md, "No copy of what a row can find").

Run ``python research/update_pairs_pg.py DATA BASE_DB ADD_FILE --rounds 3 --src TREE
...``: DATA is the data directory of :class:`pg_bench.PgServer` (the embedded server,
started on it and stopped at the end), BASE_DB a database holding a built workspace
(``quillian index ... --out`` its location). ROUNDS times, each TREE in turn (its
``src/`` first on ``PYTHONPATH``) on a fresh copy of BASE_DB (``CREATE DATABASE ...
TEMPLATE``) with an empty local cache: ``research/update_stages.py LOCATION add
ADD_FILE --pairs 6`` (six add-then-delete pairs in one process; the first, which loads
the models, fills the cache and may bring the workspace to a new format, is left out of
its medians). A tree that writes a newer format than another reads is safe here: each
round's copy is dropped after it. Prints each round's medians, then per tree the median
over rounds with their range, and writes every round's output to ``--out`` (JSON).
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

from pg_bench import PgServer

STAGES = str(Path(__file__).with_name("update_stages.py"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="the embedded server's data directory")
    parser.add_argument("base_db", help="the database holding the built workspace")
    parser.add_argument("add_file", type=Path, help="the documents each pair adds and deletes")
    parser.add_argument("--src", action="append", required=True, help="a source tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="where to write every round's output")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {tree: [] for tree in args.src}
    with PgServer(args.data) as pg, tempfile.TemporaryDirectory() as caches:
        for round_ in range(args.rounds):
            for i, tree in enumerate(args.src):
                db = f"pairs_{round_}_{i}"
                pg.clone(args.base_db, db)
                cache = Path(caches) / db
                try:
                    env = dict(os.environ, PYTHONPATH=str(Path(tree) / "src"))
                    command = [sys.executable, STAGES, pg.location(db, cache), "add"]
                    done = subprocess.run(
                        [*command, str(args.add_file), "--pairs", "6"],
                        env=env,
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                finally:
                    pg.drop(db)
                    shutil.rmtree(cache, ignore_errors=True)
                run = json.loads(done.stdout)
                runs[tree].append(run)
                print(tree, round_ + 1, run["after_the_first"], flush=True)
    for tree, rounds in runs.items():
        line = []
        for op in ("add_s", "delete_s"):
            values = [r["after_the_first"][op] for r in rounds]
            line.append(
                f"{op[:-2]} {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"
            )
        print(f"{tree}: " + ", ".join(line))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
