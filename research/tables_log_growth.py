"""How the graph tables' write-ahead log grows under a served index that reopens after
each update, as the engine does (docs/scale.md, stop 87).

Run ``python research/tables_log_growth.py INDEX FILE [--pairs N]`` on a copy of an
embedded index (FILE: documents to add, a one-line JSONL for example): it opens the
index with its own embedder, then N times adds FILE's documents and deletes them
again, opening the index anew after each update and dropping the index it held (the
engine's reopen), and prints, per update, its seconds, the log's size and the
database's inode (which changes when an update folds the log into a copy). The index
it holds always has a snapshot, so SQLite cannot empty the log: it grows until an
update folds it (``state_tables.LOG_SHARE`` of the database, ``LOG_FLOOR`` at least).
The seconds include nothing of the reopen. ``PYTHONPATH=TREE/src`` runs another tree
(one that copies the database at each update is the baseline).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from quillian.components.ingestion.readers import read_documents
from quillian.engine import Engine, IndexSettings, delete_documents, index_documents
from quillian.index import open_index
from quillian.index.tables import TABLES_DB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", help="an embedded index (it is changed: use a copy)")
    parser.add_argument("file", type=Path, help="documents to add and delete again")
    parser.add_argument("--pairs", type=int, default=10, help="add-then-delete pairs")
    args = parser.parse_args()
    docs = list(read_documents(args.file))
    db = Path(args.index) / TABLES_DB
    embedder = Engine.open(args.index).embedder()
    held = open_index(args.index, embedder)
    for pair in range(args.pairs):
        for op in ("add", "delete"):
            start = time.perf_counter()
            if op == "add":
                index_documents(args.index, docs, IndexSettings())
            else:
                delete_documents(args.index, [d.id for d in docs])
            seconds = time.perf_counter() - start
            held = open_index(args.index, embedder)  # the newer build, the older dropped
            gc.collect()  # its rows' caches hold cycles: its snapshot ends here
            row = {
                "pair": pair,
                "op": op,
                "seconds": round(seconds, 3),
                "log_mb": round(_log_bytes(db) / 1e6, 2),
                "db_mb": round(db.stat().st_size / 1e6, 2),
                "inode": db.stat().st_ino,
            }
            print(json.dumps(row), flush=True)
    del held


def _log_bytes(db: Path) -> int:
    """The log's size (0: none); read here, so that a tree from before the database
    was patched in place runs this too, as the baseline."""
    log = db.with_name(db.name + "-wal")
    return log.stat().st_size if log.exists() else 0


if __name__ == "__main__":
    main()
