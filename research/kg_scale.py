"""Scale benchmark of the knowledge-graph import on synthetic Wikidata5M-shaped files.

    python research/kg_scale.py --entities 200000 --triples 1000000 --json

Writes the files (``kg_synthetic.py`` beside this script), imports them with the paper's
preprocessing, reopens the graph and times what KG-Infused RAG does per query:

* ``import_s`` and its parts (read, build, embed); the import runs in a child process
  so its peak RSS is its own: ``peak_rss_graph_mb`` is the peak before the description
  vectors are computed, ``peak_rss_mb`` the peak with them;
* ``reopen_ms``: :meth:`ImportedGraph.open` (memory maps; the vector index opens on the
  first search, timed as ``first_seed_search_ms``);
* ``neighbours_p50_ms`` / ``triples_p50_ms``: one activation round's neighbour fetch for
  10 random entities, at most ``--cap`` triples each, as arrays and as
  :class:`KGTriple` lists with names;
* ``rss_after_queries_mb``: this process after the reopen and the queries (memory-mapped
  pages touched count);
* ``seed_search_p50_ms``: :meth:`ImportedGraph.seed_entities` with ``k=10`` as the
  graph is imported (through its ANN index when the import built one: ``--ann``), and
  ``exact_seed_search_p50_ms`` the same with ``exact=True``. Vectors come from the hash
  embedder at MiniLM's width (384) so that the search costs what it would with MiniLM;
  the query embedding itself is then nearly free, while MiniLM adds about 10 ms per
  query on 2 cores;
* ``search``: exact versus each ANN kind of ``--ann-kinds``, side by side on the same
  query vectors: build seconds and peak RSS (each kind built in a child process from
  the graph's vectors), index MB, and per ``nprobe`` the search p50/p95 ms and
  recall@10 against the exact top 10, for random queries (``recall_at_10``) and for
  entities' own descriptions as queries (``self_at_1``: the entity ranks first).
  Hash-embedder vectors are uniformly random: nothing clusters, so ``recall_at_10``
  here is the worst case of an inverted-file index (real text: ``research/kg_ann.py``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from kg_ann import directory_mb, recall_at_10, time_search
from kg_synthetic import pseudo_words, write_wikidata5m_like
from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.stores.embedded.faiss_ivf import FaissIVFIndex, IVFOptions
from quillian.stores.embedded.vectors import ExactVectorIndex

__all__ = ["run"]


def _child(fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` in a fresh process (its own peak RSS, nothing left here)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def _generate(directory: str, entities: int, triples: int, relations: int) -> list[str]:
    return write_wikidata5m_like(directory, entities, triples, relations).paths()


def _import(files: str, out: str, dim: int, vector_dtype: str, ann: str) -> dict[str, Any]:
    options = ImportOptions(overwrite=True, vector_dtype=vector_dtype, ann=ann)
    report = import_wikidata5m(files, out, HashEmbedder(dim), options=options)
    return report.to_dict()


def _build_ivf(vectors: str, out: str, kind: str) -> dict[str, Any]:
    """Build one ANN kind from a vector index (in a child: its own peak RSS)."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    with ExactVectorIndex(vectors) as source:
        meta = FaissIVFIndex.build(out, source, IVFOptions(kind=kind))
    return {
        "build_s": round(time.perf_counter() - started, 1),
        "build_parts_s": meta["seconds"],
        "build_peak_rss_mb": _peak_rss_mb(),
        "nlist": meta["nlist"],
        "index_mb": round(meta["bytes"] / 2**20, 1),
    }


def _peak_rss_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _p50(values: list[float]) -> float:
    return round(float(np.percentile(values, 50)), 3)


def _p95(values: list[float]) -> float:
    return round(float(np.percentile(values, 95)), 3)


def run(
    entities: int,
    triples: int,
    work: Path,
    *,
    relations: int = 810,
    dim: int = 384,
    queries: int = 200,
    cap: int = 20,
    seeds: int = 10,
    vector_dtype: str = "float32",
    ann: str = "auto",
    ann_kinds: tuple[str, ...] = ("ivf-sq8", "ivf-pq"),
    nprobes: tuple[int, ...] = (16, 32, 64, 128),
    keep: bool = False,
) -> dict[str, Any]:
    """Figures for one synthetic size; ``work`` holds the files and the graph."""
    files_dir, out = work / "files", work / "graph"
    stamp = files_dir / "params.json"
    params = {"entities": entities, "triples": triples, "relations": relations, "shape": 2}
    result: dict[str, Any] = dict(params)
    if not stamp.exists() or json.loads(stamp.read_text()) != params:
        shutil.rmtree(files_dir, ignore_errors=True)
        started = time.perf_counter()
        _child(_generate, str(files_dir), entities, triples, relations)
        stamp.write_text(json.dumps(params))
        result["generate_s"] = round(time.perf_counter() - started, 1)
    result["files_mb"] = directory_mb(files_dir)

    started = time.perf_counter()
    report = _child(_import, str(files_dir), str(out), dim, vector_dtype, ann)
    result["import_s"] = round(time.perf_counter() - started, 1)
    result["import_parts_s"] = {k: round(v, 1) for k, v in report["seconds"].items()}
    result["peak_rss_graph_mb"] = report["peak_rss_mb"]["graph"]
    result["peak_rss_vectors_mb"] = report["peak_rss_mb"]["vectors"]
    result["peak_rss_mb"] = report["peak_rss_mb"]["total"]
    result["graph"] = report["final"]
    result["dropped"] = {k: v for k, v in report["dropped"].items() if not k.startswith("examples")}
    ann_mb = directory_mb(out / "ann") if (out / "ann").exists() else 0.0
    result["graph_mb"] = round(directory_mb(out) - directory_mb(out / "vectors") - ann_mb, 1)
    result["vectors_mb"] = directory_mb(out / "vectors")
    result["ann_mb"] = ann_mb
    # built before this process maps anything: a child inherits its parent's peak RSS
    builds = {
        kind: _child(_build_ivf, str(out / "vectors"), str(work / f"ann-{kind}"), kind)
        for kind in ann_kinds
    }

    embedder = HashEmbedder(dim)
    started = time.perf_counter()
    graph = ImportedGraph.open(out, embedder)
    result["reopen_ms"] = round((time.perf_counter() - started) * 1000, 2)
    result["ann"] = graph.ann
    result.update(_time_queries(graph, queries, cap, seeds))
    graph.close()
    with ImportedGraph.open(out, embedder, exact=True) as exact_graph:
        exact_times = _time_seed_search(exact_graph, min(queries, 50))
        result["exact_first_seed_search_ms"] = exact_times["first_seed_search_ms"]
        result["exact_seed_search_p50_ms"] = exact_times["seed_search_p50_ms"]
    result["rss_after_queries_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    with ImportedGraph.open(out, embedder) as graph:
        result["search"] = compare_search(graph, out, work, builds, nprobes, min(queries, 50))
    result["rss_after_search_comparison_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


def compare_search(
    graph: ImportedGraph,
    out: Path,
    work: Path,
    builds: dict[str, dict[str, Any]],
    nprobes: tuple[int, ...],
    n_queries: int,
) -> dict[str, Any]:
    """Exact versus each ANN kind (built in ``work/ann-KIND``, removed here) on the same
    query vectors (see the module docstring)."""
    words = pseudo_words(20_000)
    rng = np.random.default_rng(11)
    texts = [
        " ".join(words[j] for j in rng.integers(0, len(words), 8).tolist())
        for _ in range(n_queries)
    ]
    own = rng.choice(len(graph), n_queries, replace=False)
    embedder = graph.query_embedder()
    random_q = embedder.embed(texts)
    self_q = embedder.embed([graph.description(int(e)) or graph.entity_name(int(e)) for e in own])
    exact = ExactVectorIndex(out / "vectors")
    exact_result = time_search(lambda q: exact.search(q, 10), random_q)
    truth = exact_result.pop("ids")
    found_self = time_search(lambda q: exact.search(q, 10), self_q)["ids"]
    result: dict[str, Any] = {
        "queries": n_queries,
        "exact": {
            "index_mb": directory_mb(out / "vectors"),
            **exact_result,
            "self_at_1": round(float(np.mean(found_self[:, 0] == own)), 3),
        },
    }
    for kind, built in builds.items():
        directory = work / f"ann-{kind}"
        entry = dict(built)
        with FaissIVFIndex(directory, exact=exact) as ann:
            for nprobe in nprobes:

                def search(q: Any, a: FaissIVFIndex = ann, p: int = nprobe) -> Any:
                    return a.search(q, 10, nprobe=p)

                timed = time_search(search, random_q)
                ids = timed.pop("ids")
                own_ids = time_search(search, self_q)["ids"]
                entry[f"nprobe={nprobe}"] = {
                    **timed,
                    "recall_at_10": recall_at_10(ids, truth),
                    "self_at_1": round(float(np.mean(own_ids[:, 0] == own)), 3),
                }
        shutil.rmtree(directory, ignore_errors=True)
        result[kind] = entry
    exact.close()
    return result


def _time_queries(graph: ImportedGraph, queries: int, cap: int, seeds: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    arrays, lists = [], []
    for i in range(queries + 5):
        chosen = rng.integers(0, len(graph), seeds).tolist()
        started = time.perf_counter()
        graph.neighbours(chosen, cap)
        middle = time.perf_counter()
        graph.triples(chosen, cap)
        if i >= 5:  # the first rounds fault the pages in
            arrays.append((middle - started) * 1000)
            lists.append((time.perf_counter() - middle) * 1000)
    return {
        "cap": cap,
        "seeds": seeds,
        "neighbours_p50_ms": _p50(arrays),
        "triples_p50_ms": _p50(lists),
        **_time_seed_search(graph, min(queries, 50)),
    }


def _time_seed_search(graph: ImportedGraph, queries: int) -> dict[str, Any]:
    """:meth:`ImportedGraph.seed_entities` with ``k=10``: the first call (which opens
    the vector indexes) and the median of ``queries`` random 8-word queries."""
    rng = np.random.default_rng(7)
    words = pseudo_words(20_000)
    started = time.perf_counter()
    graph.seed_entities("first query", 10)
    first = (time.perf_counter() - started) * 1000
    searches = []
    for _ in range(queries):
        query = " ".join(words[j] for j in rng.integers(0, len(words), 8).tolist())
        started = time.perf_counter()
        graph.seed_entities(query, 10)
        searches.append((time.perf_counter() - started) * 1000)
    return {"first_seed_search_ms": round(first, 1), "seed_search_p50_ms": _p50(searches)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, default=4_700_000)
    parser.add_argument("--triples", type=int, default=21_000_000)
    parser.add_argument("--relations", type=int, default=810)
    parser.add_argument("--work", type=Path, default=Path("indexes/kg-scale"))
    parser.add_argument("--dim", type=int, default=384, help="hash-embedder vector width")
    parser.add_argument("--vector-dtype", default="float32", choices=("float32", "float16"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cap", type=int, default=20, help="triples per entity per round")
    parser.add_argument(
        "--ann",
        default="auto",
        choices=("auto", "none", "ivf-sq8", "ivf-fp16", "ivf-pq"),
        help="the import's ANN index (what seed_search_p50_ms goes through)",
    )
    parser.add_argument(
        "--ann-kinds",
        default="ivf-sq8,ivf-pq",
        help="ANN kinds compared with exact search, comma-separated ('' for none)",
    )
    parser.add_argument("--nprobes", default="16,32,64,128", help="nprobe values measured")
    parser.add_argument("--keep", action="store_true", help="keep the imported graph")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(
        args.entities,
        args.triples,
        args.work,
        relations=args.relations,
        dim=args.dim,
        queries=args.queries,
        cap=args.cap,
        vector_dtype=args.vector_dtype,
        ann=args.ann,
        ann_kinds=tuple(k for k in args.ann_kinds.split(",") if k),
        nprobes=tuple(int(n) for n in args.nprobes.split(",")),
        keep=args.keep,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:24s} {value}")


if __name__ == "__main__":
    main()
