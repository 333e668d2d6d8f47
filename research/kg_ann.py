"""Exact versus ANN description search on real text: WordNet glosses embedded by MiniLM.

    HF_HUB_OFFLINE=1 python research/kg_ann.py --graph indexes/kg-wordnet-minilm --json

Imports WordNet (Debian's ``wordnet-base``) with the MiniLM embedder into ``--graph``
unless a graph is already there (the embedding takes minutes on 2 cores), then, on the
same query vectors, times the exact search and each ANN kind of ``--kinds`` built from
the graph's vectors (:class:`~quillian.stores.embedded.faiss_ivf.FaissIVFIndex`):
build seconds, index MB, and per ``nprobe`` the search p50/p95 ms (one query at a
time) and recall@10 against the exact top 10. Query sets: the names of random synsets
(``names``; short, like entity mentions) and, with ``--questions``, the questions of a
QA benchmark file (JSONL with a ``question`` field; ``questions``), as KG-Infused RAG
seeds its search with the question. Unlike the synthetic benchmark's hash vectors,
these vectors cluster as real text does, so the recall here is the realistic one.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.factory import make_embedder
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wordnet import DEFAULT_WORDNET, import_wordnet
from quillian.components.kg.writer import ImportOptions
from quillian.stores.embedded.faiss_ivf import FaissIVFIndex, IVFOptions
from quillian.stores.embedded.vectors import ExactVectorIndex

__all__ = ["compare", "directory_mb", "recall_at_10", "run", "time_search"]

Search = Callable[[npt.NDArray[np.float32]], tuple[npt.NDArray[np.int64], Any]]


def time_search(search: Search, queries: npt.NDArray[np.float32]) -> dict[str, Any]:
    """Per-query latency of ``search``, one query at a time, in two passes over
    ``queries``: ``p50_ms``/``p95_ms`` of the second (memory-mapped pages already
    mapped: a long-running process), ``first_pass_p50_ms`` of the first (a fresh one);
    and the ids found (``ids``, one row per query)."""
    passes: list[list[float]] = [[], []]
    found: list[npt.NDArray[np.int64]] = []
    for times in passes:
        found = []
        for row in queries:
            started = time.perf_counter()
            ids, _ = search(row[None, :])
            times.append((time.perf_counter() - started) * 1000)
            found.append(ids[0])
    return {
        "p50_ms": round(float(np.percentile(passes[1], 50)), 3),
        "p95_ms": round(float(np.percentile(passes[1], 95)), 3),
        "first_pass_p50_ms": round(float(np.percentile(passes[0], 50)), 3),
        "ids": np.array(found),
    }


def recall_at_10(found: npt.NDArray[np.int64], truth: npt.NDArray[np.int64]) -> float:
    """Mean share of each query's exact top 10 that ``found`` holds."""
    hits = [len(set(a.tolist()) & set(b.tolist())) for a, b in zip(found, truth, strict=True)]
    return round(float(np.mean(hits)) / truth.shape[1], 3)


def compare(
    vectors: Path,
    query_sets: dict[str, npt.NDArray[np.float32]],
    kinds: tuple[str, ...],
    nprobes: tuple[int, ...],
    nlist: int | None = None,
) -> dict[str, Any]:
    """Exact search against each ANN kind (built here, then removed) on ``query_sets``."""
    result: dict[str, Any] = {}
    with ExactVectorIndex(vectors) as exact:
        truth: dict[str, npt.NDArray[np.int64]] = {}
        entry: dict[str, Any] = {"index_mb": directory_mb(vectors)}
        for name, queries in query_sets.items():
            timed = time_search(lambda q: exact.search(q, 10), queries)
            truth[name] = timed.pop("ids")
            entry[name] = timed
        result["exact"] = entry
        for kind in kinds:
            with tempfile.TemporaryDirectory(prefix="kg-ann-") as tmp:
                directory = Path(tmp) / kind
                started = time.perf_counter()
                meta = FaissIVFIndex.build(directory, exact, IVFOptions(kind=kind, nlist=nlist))
                entry = {
                    "build_s": round(time.perf_counter() - started, 1),
                    "nlist": meta["nlist"],
                    "rerank": meta["rerank"],
                    "index_mb": round(meta["bytes"] / 2**20, 1),
                }
                with FaissIVFIndex(directory, exact=exact) as ann:
                    for nprobe in nprobes:
                        row: dict[str, Any] = {}
                        for name, queries in query_sets.items():

                            def search(q: Any, a: Any = ann, p: int = nprobe) -> Any:
                                return a.search(q, 10, nprobe=p)

                            timed = time_search(search, queries)
                            ids = timed.pop("ids")
                            row[name] = {**timed, "recall_at_10": recall_at_10(ids, truth[name])}
                        entry[f"nprobe={nprobe}"] = row
                result[kind] = entry
    return result


def run(
    graph_dir: Path,
    *,
    wordnet: Path = DEFAULT_WORDNET,
    questions: Path | None = None,
    names: int = 200,
    kinds: tuple[str, ...] = ("ivf-sq8", "ivf-fp16", "ivf-pq"),
    nprobes: tuple[int, ...] = (4, 8, 16, 32, 64),
    nlist: int | None = None,
) -> dict[str, Any]:
    """Import WordNet with MiniLM into ``graph_dir`` when missing, then :func:`compare`."""
    embedder = make_embedder("minilm")
    result: dict[str, Any] = {}
    if not graph_dir.exists():
        started = time.perf_counter()
        options = ImportOptions(embedder_name="minilm", ann="none")
        import_wordnet(graph_dir, embedder, wordnet, options=options)
        result["import_s"] = round(time.perf_counter() - started, 1)
    with ImportedGraph.open(graph_dir, embedder, exact=True) as graph:
        rng = np.random.default_rng(3)
        picked = rng.choice(len(graph), min(names, len(graph)), replace=False)
        texts = {"names": [graph.entity_name(int(e)) for e in picked]}
        if questions is not None:
            lines = questions.read_text(encoding="utf-8").split("\n")
            texts["questions"] = [json.loads(line)["question"] for line in lines if line.strip()]
        result["entities"] = len(graph)
    started = time.perf_counter()
    query_sets = {name: embedder.embed(batch) for name, batch in texts.items()}
    result["embed_query_ms"] = round(
        (time.perf_counter() - started) * 1000 / sum(len(t) for t in texts.values()), 2
    )
    result["queries"] = {name: len(batch) for name, batch in texts.items()}
    result["search"] = compare(graph_dir / "vectors", query_sets, kinds, nprobes, nlist)
    return result


def directory_mb(path: Path) -> float:
    """Size of the files under ``path``, in MB."""
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", type=Path, default=Path("indexes/kg-wordnet-minilm"))
    parser.add_argument("--wordnet", type=Path, default=DEFAULT_WORDNET)
    parser.add_argument("--questions", type=Path, help="JSONL with a 'question' per line")
    parser.add_argument("--names", type=int, default=200, help="synset-name queries")
    parser.add_argument("--kinds", default="ivf-sq8,ivf-fp16,ivf-pq")
    parser.add_argument("--nprobes", default="4,8,16,32,64")
    parser.add_argument("--nlist", type=int, help="lists (default: about sqrt(entities))")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(
        args.graph,
        wordnet=args.wordnet,
        questions=args.questions,
        names=args.names,
        kinds=tuple(k for k in args.kinds.split(",") if k),
        nprobes=tuple(int(n) for n in args.nprobes.split(",")),
        nlist=args.nlist,
    )
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
