"""What a long-running process (``quillian serve``) pays to add and delete one document
of a PostgreSQL workspace, source trees side by side in one run (docs/scale.md, "The
link update from the catalog's delta").

Run ``python research/update_pairs_pg.py PG_DATA BASE_DB CACHES ADD_FILE DOC_ID TREE...``:
with the benchmark server on ``PG_DATA`` (:class:`pg_bench.PgServer`, started and
stopped here) and a base workspace in database ``BASE_DB`` whose file cache is
``CACHES/BASE_DB`` (as ``research/updates.py`` leaves them), for each TREE in turn
(``--rounds`` times): a copy of the database and of its cache, one add of ``ADD_FILE``
and one delete of ``DOC_ID`` to warm it (the first update after a format change brings
the stored state to it), then ``update_stages.py LOCATION add ADD_FILE --pairs 6`` with
the tree's ``src/``; the copies are dropped. Prints, per tree, the medians over rounds of
each round's add and delete medians (the pairs after the first), with their range, and
writes every round's output to ``--out`` when given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from pg_bench import PgServer

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pg_data", type=Path, help="the benchmark server's data directory")
    parser.add_argument("base_db", help="the database holding the base workspace")
    parser.add_argument("caches", type=Path, help="the folder of the workspaces' file caches")
    parser.add_argument("add_file", help="documents to add (a one-line JSONL)")
    parser.add_argument("doc_id", help="the id the added document gets")
    parser.add_argument("trees", nargs="+", type=Path, help="source trees (their src/ is used)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, help="a folder for every round's output")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {str(t): [] for t in args.trees}
    with PgServer(args.pg_data) as pg:
        for round_ in range(1, args.rounds + 1):
            for tree in args.trees:
                run = _pairs(pg, args, tree)
                results[str(tree)].append(run["after_the_first"])
                if args.out is not None:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / f"{tree.name}-{round_}.json").write_text(json.dumps(run))
    for tree, runs in results.items():
        parts = []
        for op in ("add_s", "delete_s"):
            values = [r[op] for r in runs]
            low, high = min(values), max(values)
            parts.append(f"{op[:-2]} {statistics.median(values):.2f} s ({low:.2f}-{high:.2f})")
        print(f"{tree}: " + ", ".join(parts), flush=True)


def _pairs(pg: PgServer, args: argparse.Namespace, tree: Path) -> dict[str, Any]:
    name = "pairs_copy"
    cache = args.caches / name
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(args.caches / args.base_db, cache)
    pg.clone(args.base_db, name)
    try:
        location = pg.location(name, cache)
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        stages = [sys.executable, str(HERE / "update_stages.py"), location]
        for warm in (["add", args.add_file], ["delete", args.doc_id]):
            subprocess.run([*stages, *warm], env=env, check=True, stdout=subprocess.DEVNULL)
        out = subprocess.run(
            [*stages, "add", args.add_file, "--pairs", "6"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return dict(json.loads(out))
    finally:
        pg.drop(name)
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
