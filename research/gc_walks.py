"""What Python's cyclic garbage collector costs an update (docs/scale.md, stop 96).

Run ``python research/gc_walks.py COPY FILE [--pairs N]`` on a copy of an embedded
index (it is changed, then left as it was): in one process, N add-then-delete pairs of
FILE's documents, the collector switched off during every other delete (and on again
after it), so that each delete with the collector runs beside one without, the machine's
drift shared. Prints one JSON object: the median seconds of the deletes each way (the
first two pairs, which load the models and bring what an update keeps, left out) and
the collections and their seconds during the deletes with the collector on. What the
collector walks at each collection of the young objects is what an update made again
and keeps: at 100k passages, the chunk catalog's lists of every chunk.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", help="an embedded index directory (a copy: it is changed)")
    parser.add_argument("file", type=Path, help="documents to add and delete (a one-line JSONL)")
    parser.add_argument("--pairs", type=int, default=14)
    args = parser.parse_args()
    print(json.dumps(measure(args.index, args.file, args.pairs), indent=1))


def measure(index: str, file: Path, pairs: int) -> dict[str, Any]:
    """The deletes' medians with the collector on and off, and its collections."""
    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import IndexSettings, delete_documents, index_documents

    docs = list(read_documents(file))
    ids = [d.id for d in docs]
    seconds: dict[bool, list[float]] = {True: [], False: []}
    collections = {"count": 0, "seconds": 0.0}
    started: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            collections["count"] += 1
            collections["seconds"] += time.perf_counter() - started.pop()

    for pair in range(pairs):
        on = pair % 2 == 0
        index_documents(index, docs, IndexSettings())
        counted = pair >= 2 and on
        if counted:
            gc.callbacks.append(timed)
        if not on:
            gc.disable()
        start = time.perf_counter()
        try:
            delete_documents(index, ids)
        finally:
            gc.enable()
            if counted:
                gc.callbacks.remove(timed)
        if pair >= 2:
            seconds[on].append(time.perf_counter() - start)
    with_collector = len(seconds[True])
    return {
        "delete_s_collector_on": round(statistics.median(seconds[True]), 4),
        "delete_s_collector_off": round(statistics.median(seconds[False]), 4),
        "collections_per_delete": round(collections["count"] / max(with_collector, 1), 1),
        "collection_s_per_delete": round(collections["seconds"] / max(with_collector, 1), 4),
    }


if __name__ == "__main__":
    main()
