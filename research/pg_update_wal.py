"""What each update of a PostgreSQL workspace writes to the server's write-ahead log,
and the checkpoints it brings: why one update in a run of them takes longer.

Run ``python research/pg_update_wal.py WORK LABEL SIZE [--pairs N]``: with the
benchmark server on ``WORK/pg`` (:class:`pg_bench.PgServer`, started and stopped here)
and the base workspace ``research/updates.py`` built for ``LABEL`` at ``SIZE``
(``--work WORK``; its ``add-SIZE.jsonl`` beside it), a fresh copy of the base gets
``--pairs`` add-then-delete pairs of that file's documents in this process. Prints per
update its seconds, the megabytes of WAL it wrote (``pg_current_wal_lsn``), and the
server's checkpoints so far (``pg_stat_checkpointer``: timed, requested); the copy is
dropped at the end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pg_bench import PgServer
from updates import Backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="research/updates.py's --work folder")
    parser.add_argument("label", help="the tree label its bases were built with")
    parser.add_argument("size", help="the base's size (20k, 100k)")
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()

    import psycopg

    from quillian.components.ingestion.readers import read_documents
    from quillian.engine import IndexSettings, delete_documents, index_documents

    with PgServer(args.work / "pg") as pg:
        backend = Backend("postgres", args.work / "postgres", pg, args.label)
        location = backend.copy(args.label, args.size)
        url = location.split("&workspace=")[0]

        def server() -> tuple[int, int, int]:
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT num_timed, num_requested, pg_current_wal_lsn() - '0/0'::pg_lsn"
                    " FROM pg_stat_checkpointer"
                ).fetchone()
            assert row is not None
            return int(row[0]), int(row[1]), int(row[2])

        try:
            docs = list(read_documents(args.work / f"add-{args.size}.jsonl"))
            before = server()
            for pair in range(args.pairs):
                for operation in ("add", "delete"):
                    start = time.perf_counter()
                    if operation == "add":
                        index_documents(location, docs, IndexSettings())
                    else:
                        delete_documents(location, [d.id for d in docs])
                    seconds = time.perf_counter() - start
                    now = server()
                    wal = (now[2] - before[2]) / 2**20
                    print(
                        f"{pair} {operation}: {seconds:.3f} s, WAL {wal:.1f} MB,"
                        f" checkpoints timed {now[0]} requested {now[1]}"
                    )
                    before = now
        finally:
            backend.drop(location)


if __name__ == "__main__":
    main()
