"""Scale benchmark of the knowledge-graph import on synthetic Wikidata5M-shaped files.

    python -m quillian.bench.kg_scale --entities 200000 --triples 1000000 --json

Writes the files (:mod:`quillian.bench.kg_synthetic`), imports them with the paper's
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
* ``seed_search_p50_ms``: :meth:`ImportedGraph.seed_entities` with ``k=10``. Vectors
  come from the hash embedder at MiniLM's width (384) so that the exact search costs
  what it would with MiniLM; the query embedding itself is then nearly free, while
  MiniLM adds about 10 ms per query on 2 cores.
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

from quillian.bench.kg_synthetic import pseudo_words, write_wikidata5m_like
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.testing.fakes import HashEmbedder

__all__ = ["run"]


def _child(fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` in a fresh process (its own peak RSS, nothing left here)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def _generate(directory: str, entities: int, triples: int, relations: int) -> list[str]:
    return write_wikidata5m_like(directory, entities, triples, relations).paths()


def _import(files: str, out: str, dim: int, vector_dtype: str) -> dict[str, Any]:
    options = ImportOptions(overwrite=True, vector_dtype=vector_dtype)
    report = import_wikidata5m(files, out, HashEmbedder(dim), options=options)
    return report.to_dict()


def _p50(values: list[float]) -> float:
    return round(float(np.percentile(values, 50)), 3)


def _size_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


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
    result["files_mb"] = _size_mb(files_dir)

    started = time.perf_counter()
    report = _child(_import, str(files_dir), str(out), dim, vector_dtype)
    result["import_s"] = round(time.perf_counter() - started, 1)
    result["import_parts_s"] = {k: round(v, 1) for k, v in report["seconds"].items()}
    result["peak_rss_graph_mb"] = report["peak_rss_mb"]["graph"]
    result["peak_rss_mb"] = report["peak_rss_mb"]["total"]
    result["graph"] = report["final"]
    result["dropped"] = {k: v for k, v in report["dropped"].items() if not k.startswith("examples")}
    result["graph_mb"] = round(_size_mb(out) - _size_mb(out / "vectors"), 1)
    result["vectors_mb"] = _size_mb(out / "vectors")

    embedder = HashEmbedder(dim)
    started = time.perf_counter()
    graph = ImportedGraph.open(out, embedder)
    result["reopen_ms"] = round((time.perf_counter() - started) * 1000, 2)
    result.update(_time_queries(graph, queries, cap, seeds))
    result["rss_after_queries_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    graph.close()
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


def _time_queries(graph: ImportedGraph, queries: int, cap: int, seeds: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    words = pseudo_words(20_000)
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
    started = time.perf_counter()
    graph.seed_entities("first query", 10)
    first = (time.perf_counter() - started) * 1000
    searches = []
    for _ in range(min(queries, 50)):
        query = " ".join(words[j] for j in rng.integers(0, len(words), 8).tolist())
        started = time.perf_counter()
        graph.seed_entities(query, 10)
        searches.append((time.perf_counter() - started) * 1000)
    return {
        "cap": cap,
        "seeds": seeds,
        "neighbours_p50_ms": _p50(arrays),
        "triples_p50_ms": _p50(lists),
        "first_seed_search_ms": round(first, 1),
        "seed_search_p50_ms": _p50(searches),
    }


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
        keep=args.keep,
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:24s} {value}")


if __name__ == "__main__":
    main()
