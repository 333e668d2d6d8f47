"""How soon a replica shows a document another process added to a PostgreSQL
workspace of the base's size (100k passages in docs/scale.md), source trees side by
side in one run.

Run ``python research/replica_catchup.py PG_DATA BASE_DB CACHES ADD_FILE TREE...
[--rounds N]``: with the benchmark server on ``PG_DATA`` (:class:`pg_bench.PgServer`,
started and stopped here) and a base workspace in database ``BASE_DB`` whose file cache
is ``CACHES/BASE_DB`` (as ``research/updates.py`` leaves them), for each round and
TREE in turn:

1. a copy of the database, and two copies of its cache: the writer's, and the
   replica's (a replica that served the base, on another machine);
2. a replica process (the tree's ``src/``) opens the workspace as ``quillian serve``
   does (:class:`~quillian.engine.Engine`, ``refresh_s=None``, ``pin_vectors=True``),
   answers the added document's text with ``bm25`` once (it must not find it yet),
   and waits;
3. the writer adds ADD_FILE's first document (``research/update_stages.py LOCATION add
   ADD_FILE``, a process of its own); once that process has exited, the build is
   committed;
4. the replica reads the manifest's generation and state
   (:func:`~quillian.stores.postgres.manifest_state`, what its watcher polls every
   0.5 s), opens the new build (:meth:`~quillian.engine.Engine.refresh`: the changed
   files pulled, the graph snapshot read, the chunks' texts and vectors opened) and
   retrieves the document's text with ``bm25`` and ``sa`` until the document (by its
   title) is among the top 8.

Prints per tree and round the add's seconds, the poll's, the refresh's and the first
retrievals', and their sum: the delay from the build's commit to the document on the
replica, less the watcher's wait for its next poll (0 to 0.5 s). Then the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pg_bench import PgServer

HERE = Path(__file__).resolve().parent


def _replica(location: str, title: str, text: str) -> None:
    """The replica process: open, wait for the writer, then catch up (see the doc)."""
    from quillian.engine import Engine
    from quillian.index.layout import server_backend

    def found(method: str) -> bool:
        return any(p.title == title for p in engine.retrieve(text, method, 8).passages)

    engine = Engine.open(location, refresh_s=None, pin_vectors=True)
    before = found("bm25") or found("sa")
    print(json.dumps({"ready": True, "found_before": before}), flush=True)
    sys.stdin.readline()  # the writer's process has exited
    backend = server_backend()
    start = time.perf_counter()
    with backend.Workspace(location, create=False) as workspace:
        state = backend.manifest_state(workspace)
    polled = time.perf_counter()
    opened = engine.refresh()
    refreshed = time.perf_counter()
    by_bm25 = found("bm25")
    bm25 = time.perf_counter()
    by_sa = found("sa")
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "state": state,
                "opened": opened,
                "found_bm25": by_bm25,
                "found_sa": by_sa,
                "poll_s": round(polled - start, 3),
                "refresh_s": round(refreshed - polled, 3),
                "bm25_s": round(bm25 - refreshed, 3),
                "sa_s": round(done - bm25, 3),
                "delay_s": round(done - start, 3),
            }
        ),
        flush=True,
    )


def _round(pg: PgServer, args: argparse.Namespace, tree: Path, n: int) -> dict[str, Any]:
    name = f"catchup_{tree.name}_{n}".replace("-", "_")
    base_cache = args.caches / args.base_db
    writer_cache, replica_cache = args.caches / f"{name}_w", args.caches / f"{name}_r"
    for cache in (writer_cache, replica_cache):
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(base_cache, cache)
    pg.clone(args.base_db, name)
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{HERE}"}
    document = json.loads(args.add_file.read_text(encoding="utf-8").splitlines()[0])
    replica = subprocess.Popen(
        [sys.executable, __file__, "--replica", pg.location(name, replica_cache)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert replica.stdin is not None and replica.stdout is not None
        replica.stdin.write(json.dumps(document) + "\n")
        replica.stdin.flush()
        ready = json.loads(replica.stdout.readline())
        writer = pg.location(name, writer_cache)
        add = [sys.executable, str(HERE / "update_stages.py"), writer, "add", str(args.add_file)]
        start = time.perf_counter()
        subprocess.run(add, env=env, check=True, stdout=subprocess.DEVNULL)
        add_s = time.perf_counter() - start
        replica.stdin.write("go\n")
        replica.stdin.flush()
        caught = json.loads(replica.stdout.readline())
        replica.wait(timeout=120)
    finally:
        if replica.poll() is None:
            replica.kill()
        pg.drop(name)
        for cache in (writer_cache, replica_cache):
            shutil.rmtree(cache, ignore_errors=True)
    return {"add_s": round(add_s, 3), **ready, **caught}


def main() -> None:
    if sys.argv[1:2] == ["--replica"]:
        document = json.loads(sys.stdin.readline())
        _replica(sys.argv[2], document.get("title", ""), document["text"])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pg_data", type=Path, help="the benchmark server's data directory")
    parser.add_argument("base_db", help="the database holding the base workspace")
    parser.add_argument("caches", type=Path, help="the folder of the workspaces' file caches")
    parser.add_argument("add_file", type=Path, help="documents to add (a one-line JSONL)")
    parser.add_argument("trees", nargs="+", type=Path, help="source trees (their src/ is used)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {str(t): [] for t in args.trees}
    with PgServer(args.pg_data) as pg:
        for n in range(1, args.rounds + 1):
            for tree in args.trees:
                run = _round(pg, args, tree, n)
                runs[str(tree)].append(run)
                print(json.dumps({"tree": str(tree), "round": n, **run}), flush=True)
    for tree, found in runs.items():
        medians = {
            key: round(statistics.median(r[key] for r in found), 3)
            for key in ("add_s", "poll_s", "refresh_s", "bm25_s", "sa_s", "delay_s")
        }
        print(json.dumps({"tree": tree, "medians": medians, "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
