"""What compressing long texts and packing the store take and save, on an index's store.

Run ``python research/store_bytes.py INDEX [INDEX ...]`` on embedded indexes (their
``store.sqlite`` is only read; a copy is packed). For each it prints, as one JSON
object:

1. ``texts``: the chunks' and documents' texts (as stored: compressed ones read back)
   in UTF-8 bytes, and compressed one by one with zlib at levels 1 and 6 the way
   :func:`quillian.stores.packed.pack_text` once kept them (texts under ``MIN_PACKED``
   bytes, or that do not shrink, as they are), and as ``pack_text`` keeps them now
   (``pack_text``: zlib at level 6, xz from ``XZ_FROM`` bytes where shorter): the bytes
   and the seconds to compress and to decompress each;
2. ``pack``: the store's file size, then a copy's after
   :meth:`~quillian.stores.embedded._sqlite.SqliteStore.pack` (SQLite's ``VACUUM``),
   and the seconds that took; ``moved_bytes``: another copy's, packed, once every
   key-value row was written again through the store (a store of version 1 keeps its
   long values in their rows until then; version 2 moves them to ``kv_values``), with
   the seconds that rewrite took.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
import time
import zlib
from contextlib import closing
from pathlib import Path
from typing import Any

from quillian.stores.embedded.sqlite import (
    SqliteKeyValueStore,
    stored_chunk_texts,
    stored_values,
)
from quillian.stores.packed import MIN_PACKED, pack_text, unpack_text


def _texts(store: Path) -> dict[str, list[bytes]]:
    uri = f"{store.absolute().as_uri()}?mode=ro"  # read only: not upgraded
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        return {
            "chunks": [t.encode() for _, t in stored_chunk_texts(conn)],
            "documents": [
                unpack_text(t).encode() for (t,) in conn.execute("SELECT text FROM documents")
            ],
        }


def _levels(texts: list[bytes]) -> dict[str, Any]:
    out: dict[str, Any] = {"count": len(texts), "bytes": sum(map(len, texts))}
    for level in (1, 6):
        start = time.perf_counter()
        packed = [zlib.compress(t, level) if len(t) >= MIN_PACKED else t for t in texts]
        packed = [p if len(p) < len(t) else t for p, t in zip(packed, texts, strict=True)]
        compress = time.perf_counter() - start
        start = time.perf_counter()
        for p, t in zip(packed, texts, strict=True):
            if p is not t:
                zlib.decompress(p)
        out[f"level_{level}"] = {
            "bytes": sum(map(len, packed)),
            "ratio": round(sum(map(len, packed)) / max(out["bytes"], 1), 3),
            "compress_s": round(compress, 3),
            "decompress_s": round(time.perf_counter() - start, 3),
        }
    start = time.perf_counter()
    kept = [pack_text(t.decode()) for t in texts]
    compress = time.perf_counter() - start
    start = time.perf_counter()
    for k in kept:
        unpack_text(k)
    size = sum(len(k.encode()) if isinstance(k, str) else len(k) for k in kept)
    out["pack_text"] = {
        "bytes": size,
        "ratio": round(size / max(out["bytes"], 1), 3),
        "compress_s": round(compress, 3),
        "decompress_s": round(time.perf_counter() - start, 3),
    }
    return out


def _pack(store: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=store.parent.parent) as work:
        copy = Path(work) / "store.sqlite"
        shutil.copyfile(store, copy)
        before = copy.stat().st_size
        with SqliteKeyValueStore(copy) as kv:
            start = time.perf_counter()
            kv.pack()
            seconds = time.perf_counter() - start
        packed = copy.stat().st_size
        moved = Path(work) / "moved.sqlite"
        shutil.copyfile(store, moved)
        start = time.perf_counter()
        with closing(sqlite3.connect(moved)) as conn:
            spaces = [n for (n,) in conn.execute("SELECT DISTINCT namespace FROM kv")]
            values = {n: dict(stored_values(conn, n)) for n in spaces}
        with SqliteKeyValueStore(moved) as kv:
            for namespace, items in values.items():
                kv.put_many(namespace, items)
            rewrite = time.perf_counter() - start
            kv.pack()
        return {
            "bytes": before,
            "packed_bytes": packed,
            "seconds": round(seconds, 2),
            "moved_bytes": moved.stat().st_size,
            "rewrite_seconds": round(rewrite, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, nargs="+")
    args = parser.parse_args()
    report = {}
    for index in args.index:
        store = index / "store.sqlite"
        texts = _texts(store)
        report[str(index)] = {
            "texts": {table: _levels(found) for table, found in texts.items()},
            "pack": _pack(store),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
