"""Link-prediction benchmark of the ComplEx component on the standard small data sets.

    python research/kge.py --data ../shared/bench/kge/kinships --json

Reads ``train.txt``, ``valid.txt`` and ``test.txt`` (one tab-separated
``head relation tail`` a line, as PyKEEN ships Kinships, UMLS and Nations), trains
ComplEx with N3 and reciprocal relations on ``train.txt``, choosing the epoch by early
stopping on the filtered MRR of ``valid.txt`` (filtered against train and valid only),
then ranks every entity as the tail and as the head of each ``test.txt`` triple,
filtered against train, valid and test, and prints one JSON object: ``mrr``,
``hits@1``, ``hits@3``, ``hits@10`` (both directions together), ``tail_mrr``,
``head_mrr``, ``train_s`` (training with its validation passes), the settings and the
epochs chosen.

Settings: the flags, else the data set's preset (:data:`PRESETS`, chosen with
``--grid`` on the validation set, never the test set), else
:class:`~quillian.components.kge.config.ComplExConfig`'s defaults. ``--grid`` trains
every combination of ``--grid-dims``, ``--grid-n3`` and ``--grid-batch-sizes`` and
prints each one's best validation MRR and epoch, best first, without touching
``test.txt``.

``--synthetic ENTITIES,TRIPLES`` instead times one epoch of the shared-negatives
trainer on a synthetic power-law graph of that size and reports its peak RSS, to show
that memory stays bounded by the embedding tables and a batch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kg_synthetic import synthetic_triples
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.evaluate import KnownAnswers, evaluate
from quillian.components.kge.scan import read_rows, scan_threads
from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.storage import load_model, save_model
from quillian.components.kge.train import train_complex
from quillian.components.kge.triples import TripleSet
from quillian.errors import InputError

__all__ = ["PRESETS", "Splits", "grid", "load_splits", "run", "run_synthetic"]

SPLITS = ("train", "valid", "test")

#: Settings per data set (folder name): the best validation MRR of ``--grid`` (learning
#: rate 0.1 everywhere; Kinships also tried 0.3, worse) over dim 128-2000, N3 weight
#: 0.001-0.05 and batch 100 or 1000; never chosen on test.txt. See docs/benchmarks.md.
PRESETS: dict[str, dict[str, Any]] = {
    "kinships": {"dim": 2000, "n3_weight": 0.01, "batch_size": 100},
    "umls": {"dim": 1000, "n3_weight": 0.001, "batch_size": 1000},
    "nations": {"dim": 1000, "n3_weight": 0.001, "batch_size": 100},
}


@dataclass(frozen=True)
class Splits:
    """A link-prediction data set: three triple sets numbered alike."""

    train: TripleSet
    valid: TripleSet
    test: TripleSet
    entities: tuple[str, ...]
    relations: tuple[str, ...]


def load_splits(directory: str | Path) -> Splits:
    """Read ``train.txt``, ``valid.txt`` and ``test.txt``; entities and relations are
    numbered in order of first appearance over the three files (ids only: no test
    triple is seen in training)."""
    root = Path(directory)
    missing = [f"{split}.txt" for split in SPLITS if not (root / f"{split}.txt").is_file()]
    if missing:
        raise InputError(f"no {', '.join(missing)} here", path=str(root))
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for split in SPLITS:
        path = root / f"{split}.txt"
        rows[split] = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 3 or not all(fields):
                    raise InputError(
                        "expected head<TAB>relation<TAB>tail", path=str(path), line=number
                    )
                rows[split].append((fields[0], fields[1], fields[2]))
    entities: dict[str, int] = {}
    relations: dict[str, int] = {}
    for h, r, t in itertools.chain.from_iterable(rows.values()):
        entities.setdefault(h, len(entities))
        relations.setdefault(r, len(relations))
        entities.setdefault(t, len(entities))
    sets = {
        split: TripleSet.from_array(
            [[entities[h], relations[r], entities[t]] for h, r, t in part],
            len(entities),
            len(relations),
        )
        for split, part in rows.items()
    }
    return Splits(sets["train"], sets["valid"], sets["test"], tuple(entities), tuple(relations))


def settings_for(directory: str | Path, overrides: dict[str, Any]) -> ComplExConfig:
    """The data set's preset (if any) with ``overrides`` applied."""
    preset = PRESETS.get(Path(directory).resolve().name, {})
    return ComplExConfig(**{**preset, **overrides})


def run(directory: str | Path, config: ComplExConfig) -> dict[str, Any]:
    """Train with early stopping on valid, evaluate on test; the JSON object."""
    splits = load_splits(directory)
    result = train_complex(splits.train, config, valid=splits.valid)
    started = time.perf_counter()
    known = KnownAnswers([splits.train, splits.valid, splits.test])
    metrics = evaluate(result.model, splits.test, known)
    return {
        "dataset": Path(directory).resolve().name,
        **{k: round(v, 4) for k, v in metrics.items()},
        "train_s": round(result.seconds, 2),
        "eval_s": round(time.perf_counter() - started, 2),
        "epochs": result.best_epoch,
        "epochs_trained": result.epochs,
        "stopped_early": result.stopped_early,
        "valid_mrr": round(result.valid_metrics.get("mrr", float("nan")), 4),
        "mode": result.mode,
        "settings": config.to_dict(),
        "threads": torch.get_num_threads(),
        "entities": splits.train.n_entities,
        "relations": splits.train.n_relations,
        "triples": {s: len(getattr(splits, s)) for s in SPLITS},
        "filter": "train+valid+test (valid during training: train+valid)",
    }


def grid(
    directory: str | Path,
    base: ComplExConfig,
    dims: list[int],
    n3_weights: list[float],
    batch_sizes: list[int],
    learning_rates: list[float],
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every combination trained with early stopping; best validation MRR first
    (``on_row`` sees each as it finishes). Reads ``test.txt`` only for the vocabulary,
    never evaluates on it."""
    splits = load_splits(directory)
    rows = []
    for dim, n3, batch, lr in itertools.product(dims, n3_weights, batch_sizes, learning_rates):
        config = replace(base, dim=dim, n3_weight=n3, batch_size=batch, learning_rate=lr)
        result = train_complex(splits.train, config, valid=splits.valid)
        row = {
            "dim": dim,
            "n3_weight": n3,
            "batch_size": batch,
            "learning_rate": lr,
            "valid_mrr": round(result.valid_metrics["mrr"], 4),
            "epochs": result.best_epoch,
            "train_s": round(result.seconds, 2),
        }
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return sorted(rows, key=lambda row: -row["valid_mrr"])


def run_synthetic(entities: int, triples: int, config: ComplExConfig) -> dict[str, Any]:
    """One epoch of the shared-negatives trainer on a synthetic power-law graph."""
    heads, tails, relations = synthetic_triples(entities, triples, 810)
    data = TripleSet(heads, relations, tails, entities, 810)
    del heads, tails, relations
    rss_before = _peak_rss_mb()
    config = replace(config, mode="negatives", epochs=1)
    result = train_complex(data, config)
    params_mb = (entities + 2 * 810) * config.dim * 4 / 2**20
    return {
        "entities": entities,
        "triples": triples,
        "examples": 2 * triples,
        "epoch_s": round(result.seconds, 1),
        "examples_per_s": round(2 * triples / result.seconds),
        "peak_rss_mb_before_training": rss_before,
        "peak_rss_mb": _peak_rss_mb(),
        "parameters_mb": round(params_mb, 1),
        "settings": config.to_dict(),
        "threads": torch.get_num_threads(),
    }


def run_scoring(entities: int, dim: int = 128, queries: int = 30, batch: int = 8) -> dict[str, Any]:
    """Latency of ``score_sp`` (every tail of one query, float32) on a random model of
    ``entities`` entities, memory-mapped from disk as a trained one is, beside the time
    to only read those rows once on the same threads (``read_floor_ms``: this machine's
    memory floor for any exact float32 scan), beside the same
    product through numpy's BLAS (what ``score_sp`` ran before
    :mod:`~quillian.components.kge.scan`) and one plain BLAS matrix-vector pass over the
    same matrix, and of ``top_tails`` (the 10 best tails, what Know3-RAG asks for) scanning
    int8 rows then rescoring in float32, with the share of queries whose top 10 equals
    the float32 one; ``score_sp_batch`` over ``batch`` queries at once (the matrix is read
    once for all of them), per query, beside BLAS's product of the same queries;
    ``top_tails`` from float32 rows (the scan, then a partition) beside every score
    sorted (how it ranked before); then the same model saved and loaded, and its first
    ``top_tails`` timed with the load (the int8 rows are read from disk, not quantised
    again)."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "entities.npy"
        rows = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(entities, dim))
        for start in range(0, entities, 1 << 20):
            stop = min(entities, start + (1 << 20))
            rows[start:stop] = rng.standard_normal((stop - start, dim), dtype=np.float32) * 0.1
        rows.flush()
        del rows
        matrix = np.load(path, mmap_mode="r")
        model = ComplEx(matrix, rng.standard_normal((2 * 810, dim), dtype=np.float32))
        heads = rng.integers(0, entities, queries)
        relations = rng.integers(0, 810, queries)
        vector = rng.standard_normal(dim, dtype=np.float32)
        model.score_sp(int(heads[0]), int(relations[0]))  # pages in the matrix once
        sp = _times(lambda i: model.score_sp(int(heads[i]), int(relations[i])), queries)
        read_rows(matrix)  # compiles the reading kernel
        floor = _times(lambda i: read_rows(matrix), queries)
        # the same model scoring through BLAS, as score_sp did before the row scan
        blas_model = ComplEx(matrix, model.relations, scan_from=entities + 1)
        blas = _times(lambda i: blas_model.score_sp(int(heads[i]), int(relations[i])), queries)
        scan = _times(lambda i: matrix @ vector, queries)
        batched = _times(
            lambda i: model.score_sp_batch(
                np.roll(heads, i)[:batch], np.roll(relations, i)[:batch]
            ),
            queries,
        )
        blas_batched = _times(
            lambda i: blas_model.score_sp_batch(
                np.roll(heads, i)[:batch], np.roll(relations, i)[:batch]
            ),
            queries,
        )
        exact = ComplEx(matrix, model.relations, int8_scan_from=entities + 1)
        top_float = _times(lambda i: exact.top_tails(int(heads[i]), int(relations[i]), 10), queries)
        top_sorted = _times(
            lambda i: _exact_top(model, int(heads[i]), int(relations[i]), 10), queries
        )
        fast = ComplEx(matrix, model.relations, int8_scan_from=0)
        began = time.perf_counter()
        fast.top_tails(int(heads[0]), int(relations[0]), 10)  # quantises the rows once
        quantise_s = time.perf_counter() - began
        top = _times(lambda i: fast.top_tails(int(heads[i]), int(relations[i]), 10), queries)
        same = [
            _tails(fast.top_tails(int(h), int(r), 10)) == _exact_top(model, int(h), int(r), 10)
            for h, r in zip(heads, relations, strict=True)
        ]
        save_model(Path(tmp) / "kge", fast, fingerprint="", n_triples=0, epochs=0, config={})
        began = time.perf_counter()
        saved = load_model(Path(tmp) / "kge").model
        saved.top_tails(int(heads[0]), int(relations[0]), 10)
        saved_first_s = time.perf_counter() - began
    return {
        "entities": entities,
        "dim": dim,
        "queries": queries,
        "score_sp_ms": sp,
        "read_floor_ms": floor,
        "blas_score_sp_ms": blas,
        "matrix_vector_ms": scan,
        "ratio_p50": round(sp["p50"] / blas["p50"], 2) if blas["p50"] else None,
        "batch": batch,
        "score_sp_batch_ms_per_query": {k: round(v / batch, 1) for k, v in batched.items()},
        "blas_batch_ms_per_query": {k: round(v / batch, 1) for k, v in blas_batched.items()},
        "threads": torch.get_num_threads(),
        "scan_threads": scan_threads(),
        "top_tails_float32_ms": top_float,
        "sorted_top_tails_ms": top_sorted,
        "top_tails_int8_ms": top,
        "int8_quantise_s": round(quantise_s, 1),
        "int8_saved_load_and_first_query_s": round(saved_first_s, 2),
        "int8_top10_exact_share": round(sum(same) / len(same), 3),
    }


def _exact_top(model: ComplEx, head: int, relation: int, k: int) -> list[int]:
    """The float32 top ``k`` tails but the head, from every score."""
    scores = model.score_sp(head, relation)
    scores[head] = -np.inf
    return [int(t) for t in np.argsort(-scores, kind="stable")[:k]]


def _tails(ranked: list[tuple[int, float]]) -> list[int]:
    return [t for t, _ in ranked]


def _times(call: Callable[[int], object], n: int) -> dict[str, float]:
    seconds = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - start)
    values = np.asarray(seconds) * 1000
    return {q: round(float(np.percentile(values, int(q[1:]))), 1) for q in ("p50", "p95")}


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="folder with train.txt, valid.txt, test.txt")
    parser.add_argument("--dim", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--n3-weight", type=float)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--epochs", type=int, help="the most epochs (early stopping on valid)")
    parser.add_argument("--eval-every", type=int)
    parser.add_argument("--patience", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads (default: 1 for training, where 2 gain under 10%% here; every "
        "core for --scoring, as numpy's float32 scan uses them)",
    )
    parser.add_argument("--grid", action="store_true", help="search settings on valid.txt")
    parser.add_argument("--grid-dims", default="128,256,512")
    parser.add_argument("--grid-n3", default="0.001,0.005,0.01,0.05,0.1")
    parser.add_argument("--grid-batch-sizes", default="100,1000")
    parser.add_argument("--grid-learning-rates", default="0.1")
    parser.add_argument("--synthetic", help="ENTITIES,TRIPLES: time one shared-negatives epoch")
    parser.add_argument(
        "--scoring", type=int, metavar="ENTITIES", help="time score_sp over ENTITIES entities"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.threads is not None or not args.scoring:
        torch.set_num_threads(args.threads or 1)
    names = ("dim", "learning_rate", "n3_weight", "batch_size", "epochs", "eval_every")
    overrides = {n: getattr(args, n) for n in (*names, "patience", "seed")}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if args.scoring:
        result: Any = run_scoring(args.scoring, args.dim or 128)
    elif args.synthetic:
        entities, triples = (int(x) for x in args.synthetic.split(","))
        result = run_synthetic(entities, triples, ComplExConfig(**overrides))
    elif args.data is None:
        parser.error("--data is required (or --synthetic)")
    elif args.grid:
        result = grid(
            args.data,
            settings_for(args.data, overrides),
            [int(x) for x in _floats(args.grid_dims)],
            _floats(args.grid_n3),
            [int(x) for x in _floats(args.grid_batch_sizes)],
            _floats(args.grid_learning_rates),
            on_row=lambda row: print(json.dumps(row), file=sys.stderr, flush=True),
        )
    else:
        result = run(args.data, settings_for(args.data, overrides))
    print(json.dumps(result, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
