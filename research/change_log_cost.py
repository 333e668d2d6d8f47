"""What the embedded change log costs writers: storing N documents' chunks and
statuses (as ingestion does, in batches) into a new ``store.sqlite`` with the change
log's triggers and without them, side by side, alternating, each REPEATS times.

Run ``python research/change_log_cost.py [--docs N] [--chunks-per-doc C] [--repeats R]``;
it prints one JSON object: the median seconds of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from quillian.stores.embedded.sqlite import (
    SqliteChangeLog,
    SqliteDocumentStore,
    SqliteStatusStore,
)
from quillian.stores.protocols import DocStatus
from quillian.types import Chunk

BATCH = 64  # documents per batch, as ingestion commits them


def _store(directory: Path, docs: int, per_doc: int, logged: bool) -> float:
    db = directory / "store.sqlite"
    if logged:
        SqliteChangeLog(db).close()  # its triggers, before the writes
    with SqliteDocumentStore(db) as documents, SqliteStatusStore(db) as status:
        start = time.perf_counter()
        for first in range(0, docs, BATCH):
            ids = [f"doc-{d:08d}" for d in range(first, min(first + BATCH, docs))]
            status.set_status(ids, DocStatus.PROCESSING)
            chunks = [
                Chunk(doc, i, f"{doc} passage {i} " + "text " * 60, 0, 9, f"Title {doc}")
                for doc in ids
                for i in range(per_doc)
            ]
            documents.put_chunks(chunks)
            status.set_status(ids, DocStatus.PROCESSED)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--chunks-per-doc", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.repeats):
        for name in ("without", "with"):
            with tempfile.TemporaryDirectory() as tmp:
                seconds[name].append(
                    _store(Path(tmp), args.docs, args.chunks_per_doc, name == "with")
                )
    medians = {name: statistics.median(runs) for name, runs in seconds.items()}
    print(
        json.dumps(
            {
                "docs": args.docs,
                "chunks_per_doc": args.chunks_per_doc,
                "seconds": seconds,
                "median_s": medians,
                "with_over_without": round(medians["with"] / medians["without"], 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
