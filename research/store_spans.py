"""What keeping a chunk as its document's span saves in the embedded store, on an
index's store, source trees side by side in one run.

    python research/store_spans.py INDEX --work DIR --src TREE_A --src TREE_B

For each tree (its ``src/`` first on ``PYTHONPATH``, in a child process, one after
the other), the documents and chunks of ``INDEX/store.sqlite`` (only read) are put into
a new store under ``DIR`` the way ingestion puts them (a batch of documents, then their
chunks; 256 documents a batch), the store packed (``VACUUM``) as a build packs it, and
then every chunk read back three ways (``get_chunks`` in batches of 64, ``chunks_of``
per document, ``iter_chunks``), and by ``get_chunks`` once more with another connection
writing to the file between batches (as a build's caches do). Printed as one JSON object
per tree: the file's bytes and those of its ``documents`` and ``chunks`` tables
(SQLite's ``dbstat``), the seconds to put and to read, and whether every chunk read back
equals the one put (its id, offsets and text).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
import zlib
from contextlib import closing
from pathlib import Path
from typing import Any

_BATCH = 256
_READ = 64


def _child(index: Path, out: Path) -> dict[str, Any]:
    from quillian.stores.embedded.sqlite import SqliteDocumentStore, SqliteKeyValueStore
    from quillian.types import Chunk, Document

    def text_of(stored: str | bytes) -> str:  # read here, whichever tree runs
        return stored if isinstance(stored, str) else zlib.decompress(stored).decode()

    uri = f"{(index / 'store.sqlite').absolute().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        docs = {
            i: Document(text=text_of(t), title=title, source=src, metadata=json.loads(meta))
            for i, title, t, src, meta in conn.execute(
                "SELECT id, title, text, source, metadata FROM documents ORDER BY rowid"
            )
        }
        chunks: dict[str, list[Chunk]] = {}
        for cid, doc_id, idx, stored, start, end, title in conn.execute(
            "SELECT id, doc_id, idx, text, char_start, char_end, title FROM chunks ORDER BY rowid"
        ):
            span = isinstance(stored, bytes) and not stored  # an index stored with spans
            text = docs[doc_id].text[start:end] if span else text_of(stored)
            chunk = Chunk.stored(cid, doc_id, idx, text, start, end, title)
            chunks.setdefault(doc_id, []).append(chunk)
    out.unlink(missing_ok=True)
    ids = list(docs)
    start = time.perf_counter()
    with SqliteDocumentStore(out) as store:
        for at in range(0, len(ids), _BATCH):
            batch = ids[at : at + _BATCH]
            store.put_documents([docs[i] for i in batch])
            store.put_chunks([c for i in batch for c in chunks.get(i, [])])
        put_s = time.perf_counter() - start
        store.pack()
        every = [c for i in ids for c in chunks.get(i, [])]
        reads: dict[str, float] = {}
        start = time.perf_counter()
        got = []
        for at in range(0, len(every), _READ):
            got.extend(store.get_chunks([c.id for c in every[at : at + _READ]]))
        reads["get_chunks_s"] = time.perf_counter() - start
        start = time.perf_counter()
        with SqliteKeyValueStore(out) as kv:  # another connection writes between batches
            for at in range(0, len(every), _READ):
                store.get_chunks([c.id for c in every[at : at + _READ]])
                kv.put_many("embeddings", {str(at): b"x"})
        reads["get_chunks_between_writes_s"] = time.perf_counter() - start
        start = time.perf_counter()
        by_doc = [c for i in ids for c in store.chunks_of(i)]
        reads["chunks_of_s"] = time.perf_counter() - start
        start = time.perf_counter()
        iterated = {c.id: c for c in store.iter_chunks()}
        reads["iter_chunks_s"] = time.perf_counter() - start

    def same(a: Any, b: Chunk) -> bool:
        return a is not None and (a.id, a.start, a.end, a.text) == (b.id, b.start, b.end, b.text)

    with closing(sqlite3.connect(out)) as conn:
        tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    return {
        "documents": len(docs),
        "chunks": len(every),
        "file_bytes": out.stat().st_size,
        "documents_bytes": tables.get("documents", 0),
        "chunks_bytes": tables.get("chunks", 0),
        "put_s": round(put_s, 2),
        **{k: round(v, 2) for k, v in reads.items()},
        "read_back_same": all(same(g, c) for g, c in zip(got, every, strict=True))
        and all(same(g, c) for g, c in zip(by_doc, every, strict=True))
        and all(same(iterated.get(c.id), c) for c in every),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--src", type=Path, action="append", required=True)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(args.index, args.child)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    report = {}
    for n, tree in enumerate(args.src):
        out = args.work / f"{n}-{tree.name}.sqlite"
        env = {**os.environ, "PYTHONPATH": str(tree.absolute() / "src")}
        done = subprocess.run(
            [sys.executable, __file__, str(args.index), "--work", str(args.work),
             "--src", str(tree), "--child", str(out)],
            env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        report[str(tree)] = json.loads(done.stdout)
        out.unlink()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
