"""Scale benchmark: build, save and reopen a Wikidata5M-shaped graph, then time capped
3-hop spreading activation from random seeds.

    python -m quillian.bench.scale --nodes 5000000 --edges 21000000 --out /tmp/scale
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from quillian.bench.synthetic import synthetic_snapshot
from quillian.components.graph.activation import rescale_weights, spreading_activation
from quillian.components.graph.traversal import khop_subgraph
from quillian.stores.snapshot import GraphSnapshot

__all__ = ["run"]


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def run(
    nodes: int,
    edges: int,
    out: Path,
    queries: int = 200,
    seeds: int = 10,
    hops: int = 3,
    max_fanout: int = 16,
    max_nodes: int = 2000,
    max_scans: tuple[int, ...] = (256, 64),
) -> dict[str, Any]:
    """Figures for one synthetic graph; ``out`` is overwritten.

    Activation is timed once per per-node scan cap in ``max_scans`` (see
    :func:`~quillian.components.graph.traversal.khop_subgraph`).
    """
    t = time.perf_counter()
    snapshot = synthetic_snapshot(nodes, edges)
    build_s = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    snapshot.save(out)
    save_s = time.perf_counter() - t
    del snapshot
    t = time.perf_counter()
    loaded = GraphSnapshot.load(out)
    load_s = time.perf_counter() - t
    result: dict[str, Any] = {
        "nodes": nodes,
        "triples": edges,
        "directed_edges": int(loaded.n_edges),
        "build_s": round(build_s, 2),
        "save_s": round(save_s, 2),
        "load_s": round(load_s, 4),
        "hops": hops,
        "seeds": seeds,
        "max_fanout": max_fanout,
        "max_nodes": max_nodes,
    }
    for max_scan in max_scans:
        result[f"max_scan={max_scan}"] = _time_activation(
            loaded, queries, seeds, hops, max_fanout, max_nodes, max_scan
        )
    result["rss_mb"] = round(_rss_mb(), 1)
    return result


def _time_activation(
    graph: GraphSnapshot,
    queries: int,
    seeds: int,
    hops: int,
    max_fanout: int,
    max_nodes: int,
    max_scan: int,
) -> dict[str, float]:
    rng = np.random.default_rng(7)
    weights = graph.weights

    def weight_fn(positions: np.ndarray) -> np.ndarray:
        return np.asarray(weights[positions], dtype=np.float32)

    latencies, sizes = [], []
    for i in range(queries + 5):
        chosen = rng.integers(0, graph.n_nodes, seeds)
        t = time.perf_counter()
        sub = khop_subgraph(
            graph,
            chosen,
            hops,
            weight_fn,
            max_fanout=max_fanout,
            max_nodes=max_nodes,
            max_scan=max_scan,
        )
        spreading_activation(
            sub.indptr, sub.indices, rescale_weights(sub.weights), sub.local(np.unique(chosen))
        )
        if i >= 5:  # the first calls compile and warm the page cache
            latencies.append((time.perf_counter() - t) * 1000)
            sizes.append(sub.n_nodes)
    return {
        "activation_p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "activation_p95_ms": round(float(np.percentile(latencies, 95)), 3),
        "subgraph_nodes_mean": round(float(np.mean(sizes)), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5_000_000)
    parser.add_argument("--edges", type=int, default=21_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("indexes/synthetic"))
    args = parser.parse_args(argv)
    print(json.dumps(run(args.nodes, args.edges, args.out, args.queries)))


if __name__ == "__main__":
    main()
