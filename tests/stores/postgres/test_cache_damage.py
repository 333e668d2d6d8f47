"""The PostgreSQL backend's local cache found damaged is fetched or rebuilt again from the
server, never served: the cached graph snapshot, and the cached index files (tables,
BM25) even where the cache's record of them still matches (a real server; marked
``postgres``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.index import open_index
from quillian.index.layout import server_backend
from quillian.stores.snapshot import NodeKind
from quillian.testing.corpus import build_tiny

pytest.importorskip("psycopg")
from quillian.stores.postgres import PgGraphStore, Workspace

pytestmark = pytest.mark.postgres

CORPUS = {
    f"Person {i}": f"Person {i} was taught by Person {(i * 7) % 30} in Town {i % 5}."
    for i in range(30)
}
QUESTIONS = ("Who taught Person 4?", "Town 3", "Person 12 and Person 20")


def scribble_keeping_time(path: Path) -> None:
    """Flip the lowest bit of the last 8 bytes of ``path`` (an array's last values),
    keeping its size and modification time (so the cache's own record still matches)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    for i in range(len(data) - 8, len(data)):
        data[i] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def rankings(location: str) -> list[list[str]]:
    context = open_index(location, KeywordEmbedder()).context
    return [
        [p.chunk_id for p in make_retriever(context, method).retrieve(q, 5).passages]
        for method in ("ppr", "bm25", "dense")
        for q in QUESTIONS
    ]


def test_a_damaged_cached_snapshot_is_cached_again(postgres_url: str, tmp_path: Path) -> None:
    with Workspace(postgres_url) as workspace:
        store = PgGraphStore(workspace, tmp_path / "cache")
        store.add_nodes(["a", "b", "c"], NodeKind.ENTITY)
        store.add_edges(["a", "b"], ["b", "c"], 2, weights=[0.5, 2.0])
        first = store.snapshot()
        weights = np.array(first.weights)
        (cached,) = (tmp_path / "cache").iterdir()
        scribble_keeping_time(cached / "weight_codes.npy")  # format 2: two weights
        again = PgGraphStore(workspace, tmp_path / "cache").snapshot()
        assert np.array_equal(again.weights, weights)
        assert again.ids.ids_of(range(3)) == ["a", "b", "c"]


def test_a_damaged_cached_table_is_fetched_again(postgres_url: str) -> None:
    build_tiny(postgres_url, CORPUS)
    clean = rankings(postgres_url)
    cache = server_backend().parse_location(postgres_url).cache
    for name in ("tables/graph.sqlite", "bm25/seg-000001/tfs.npy"):
        scribble_keeping_time(cache / name)
    assert rankings(postgres_url) == clean
    truncated = cache / "tables" / "graph.sqlite"
    truncated.write_bytes(truncated.read_bytes()[:10])
    assert rankings(postgres_url) == clean
