"""The BM25 index an index's chunks make, source trees side by side in one run.

    python research/bm25_sizes.py INDEX --work DIR --src TREE_A --src TREE_B

For each tree (its ``src/`` first on ``PYTHONPATH``, in a child process, one after the
other), every chunk of the embedded ``INDEX``'s store, in index order and with the text
the build's BM25 stage indexes (``quillian.index.stages.chunk_text``), is indexed into a
fresh BM25 index under ``DIR`` (``update_bm25``, as a build's first BM25 stage does).
Printed as one JSON object per tree: the bytes of each file and in all, the seconds
the build took, and the top 10 chunk positions of ``--queries`` questions (six words of
a chunk each, chunks spread over the corpus); a later tree's answers are compared with
the first's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _child(index: Path, out: Path, queries: int) -> dict[str, Any]:
    from quillian.components.retrieval.bm25_incremental import SegmentedBM25, update_bm25
    from quillian.index.stages import chunk_text
    from quillian.stores.embedded.sqlite import SqliteDocumentStore

    with SqliteDocumentStore(index / "store.sqlite") as store:
        chunks = sorted(store.iter_chunks(), key=lambda c: (c.doc_id, c.index))
    start = time.perf_counter()
    update_bm25(out, [c.id for c in chunks], lambda at: [chunk_text(chunks[i]) for i in at])
    seconds = time.perf_counter() - start
    bm25 = SegmentedBM25.load(out)
    assert bm25 is not None
    step = max(1, len(chunks) // max(queries, 1))  # words from chunks over the corpus
    asked = [" ".join(c.text.split()[10:16]) for c in chunks[::step][:queries]]
    files = {str(p.relative_to(out)): p.stat().st_size for p in out.rglob("*") if p.is_file()}
    return {
        "chunks": len(chunks),
        "seconds": round(seconds, 2),
        "bytes": sum(files.values()),
        "files": dict(sorted(files.items(), key=lambda kv: -kv[1])),
        "top": [bm25.search(q, 10)[0].tolist() for q in asked],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--src", type=Path, action="append", required=True)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(args.index, args.child, args.queries)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    for n, tree in enumerate(args.src):
        out = args.work / f"{n}-{tree.name}"
        env = {**os.environ, "PYTHONPATH": str(tree.absolute() / "src")}
        done = subprocess.run(
            [sys.executable, __file__, str(args.index), "--work", str(args.work),
             "--src", str(tree), "--queries", str(args.queries), "--child", str(out)],
            env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        report[str(tree)] = json.loads(done.stdout)
    first = next(iter(report.values()))["top"]
    for run in report.values():
        run["same_top_as_first"] = sum(a == b for a, b in zip(run["top"], first, strict=True))
    for run in report.values():
        del run["top"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
