"""ComplEx on an index's document graph with its predicates as spelled against folded.

    python research/kge_predicates.py indexes/musique-gpt --seeds 0,1 --json

An open-IE graph spells one relation many ways ("located in", "is located in");
:func:`~quillian.components.kg.predicates.relation_key` folds them. This trains ComplEx
twice on the same graph, its relations once as spelled (lower-cased, spaces collapsed:
what Quillian counts by default) and once folded, and compares the two on the same
held-out facts:

* the held-out entity pairs are drawn on the spelled graph
  (:func:`~quillian.components.kge.triples.hold_out`, by entity pair: every triple
  between two entities goes together), once for a test set and again from what is left
  for a validation set; both arms train on every other triple, stop early on the
  validation pairs' filtered MRR, and are scored on the test pairs only;
* ``mrr`` and ``hits@10``: filtered link prediction of the test triples, both
  directions;
* ``auc``: how often a test triple's relative score (Know3-RAG's eq. 2, ``|f(h,r,t) -
  mean f over h's training triples|``, lower is more plausible) beats that of the same
  head and relation with a corrupted tail, over :data:`CORRUPTIONS` tails drawn per
  entity pair (the same draws for both arms, less each arm's known answers); 0.5 is
  chance. This is what Know3-RAG asks of the model: to tell a fact from a non-fact.
* ``paired``: folded minus spelled per test entity pair (the mean over its triples),
  with bootstrap intervals and wins and losses (:func:`~quillian.eval.stats.paired`).

``--traces`` replays the predicates of recorded Know3-RAG answers and references (the
``triple`` of each linked triple in a ``bench qa`` predictions file) against both
vocabularies and reports how many match a relation by name (exact or folded) rather
than by embedding similarity.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.graph.builder import KnowledgeGraph
from quillian.components.kg.predicates import relation_key
from quillian.components.kge.confidence import TripleConfidence
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.evaluate import KnownAnswers, filtered_ranks
from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.sources import triples_from_knowledge_graph
from quillian.components.kge.train import torch_threads, train_complex
from quillian.components.kge.triples import TripleSet, hold_out
from quillian.errors import InputError
from quillian.eval.stats import interval, paired
from quillian.index import load_graph, open_storage
from quillian.types import normalize_name

__all__ = ["compare", "main", "trace_matches"]

#: Corrupted tails drawn per held-out entity pair for the plausibility AUC.
CORRUPTIONS = 100
#: Share of the graph's triples held out for testing, then for validation.
HELD_SHARE = 0.02

Longs = npt.NDArray[np.int64]


def compare(
    kg: KnowledgeGraph, seeds: list[int], *, threads: int = 1, epochs: int | None = None
) -> dict[str, Any]:
    """Both arms at each seed (the split and the initialisation), and the comparison
    pooled over the seeds' test pairs; ``epochs`` caps training (default: the
    configuration's, with early stopping)."""
    arms = {"spelled": triples_from_knowledge_graph(kg)}
    arms["folded"] = triples_from_knowledge_graph(kg, fold=True)
    result: dict[str, Any] = {
        "entities": kg.n_entities,
        "arms": {name: _vocabulary(t) for name, t in arms.items()},
        "seeds": [],
    }
    pooled: dict[str, dict[str, list[float]]] = {n: {"rr": [], "auc": []} for n in arms}
    for seed in seeds:
        test_pairs, valid_pairs = _held_pairs(arms["spelled"], seed)
        if not len(test_pairs) or not len(valid_pairs):
            raise InputError(
                f"{len(arms['spelled'])} triples are too few to hold out test and "
                "validation facts (each needs at least 100 triples)"
            )
        row: dict[str, Any] = {"seed": seed, "test_pairs": len(test_pairs)}
        for name, graph in arms.items():
            config = ComplExConfig(seed=seed)
            if epochs is not None:
                config = replace(config, epochs=epochs)
            scores, summary = _arm(graph, test_pairs, valid_pairs, config, threads)
            row[name] = summary
            for key in ("rr", "auc"):
                pooled[name][key].extend(scores[key])
        result["seeds"].append(row)
    result["pooled"] = {
        name: {
            "mrr": _with_interval(values["rr"]),
            "auc": _with_interval(values["auc"]),
        }
        for name, values in pooled.items()
    }
    result["paired"] = {
        key: paired(pooled["folded"][key], pooled["spelled"][key]).as_dict()
        for key in ("rr", "auc")
    }
    return result


def _vocabulary(triples: TripleSet) -> dict[str, int]:
    counts = np.bincount(triples.relations, minlength=triples.n_relations)
    return {
        "relations": triples.n_relations,
        "triples": len(triples),
        "relations_used_once": int(np.sum(counts == 1)),
    }


def _pair_keys(triples: TripleSet) -> Longs:
    heads, tails = triples.heads.astype(np.int64), triples.tails.astype(np.int64)
    return np.minimum(heads, tails) * triples.n_entities + np.maximum(heads, tails)


def _held_pairs(graph: TripleSet, seed: int) -> tuple[Longs, Longs]:
    """Test pairs, then validation pairs drawn from what the test left."""
    rest, test = hold_out(graph, HELD_SHARE, seed)
    _, valid = hold_out(rest, HELD_SHARE * len(graph) / max(len(rest), 1), seed + 1)
    return np.unique(_pair_keys(test)), np.unique(_pair_keys(valid))


def _arm(
    graph: TripleSet, test_pairs: Longs, valid_pairs: Longs, config: ComplExConfig, threads: int
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    keys = _pair_keys(graph)
    in_test, in_valid = np.isin(keys, test_pairs), np.isin(keys, valid_pairs)
    train = graph.subset(np.flatnonzero(~(in_test | in_valid)))
    test, valid = graph.subset(np.flatnonzero(in_test)), graph.subset(np.flatnonzero(in_valid))
    started = time.perf_counter()
    with torch_threads(threads):
        trained = train_complex(
            train,
            config,
            valid=valid,
            known=KnownAnswers.for_questions(graph, valid),
        )
    seconds = time.perf_counter() - started
    known = KnownAnswers.for_questions(graph, test)
    tail_ranks, head_ranks = filtered_ranks(trained.model, test, known)
    reciprocal = (1.0 / tail_ranks + 1.0 / head_ranks) / 2.0
    auc = _plausibility(trained.model, train, test, known)
    test_keys = keys[in_test]
    per_pair = {
        "rr": _by_pair(test_keys, reciprocal, test_pairs),
        "auc": _by_pair(test_keys, auc, test_pairs),
    }
    ranks = np.concatenate([tail_ranks, head_ranks])
    summary = {
        "test_triples": len(test),
        "mrr": round(float(np.mean(1.0 / ranks)), 4),
        "hits@10": round(float(np.mean(ranks <= 10)), 4),
        "auc": round(float(np.nanmean(auc)), 4) if np.any(np.isfinite(auc)) else None,
        "unscorable": int(np.sum(~np.isfinite(auc))),
        "epochs": trained.epochs,
        "best_epoch": trained.best_epoch,
        "train_s": round(seconds, 1),
    }
    return per_pair, summary


def _plausibility(
    model: ComplEx, train: TripleSet, test: TripleSet, known: KnownAnswers
) -> npt.NDArray[np.float64]:
    """Per test triple, the share of corrupted tails its relative score beats (ties
    count half); NaN where its head has no training triple to compare with."""
    confidence = TripleConfidence(model, train)
    n = test.n_entities
    out = np.full(len(test), np.nan)
    for i, (h, r, t) in enumerate(zip(test.heads, test.relations, test.tails, strict=True)):
        mean = confidence.reference_mean(int(h))
        if mean is None:
            continue
        pair = min(int(h), int(t)) * n + max(int(h), int(t))
        drawn = np.random.default_rng(pair).integers(0, n, 3 * CORRUPTIONS)
        banned = set(known.answers(int(h), int(r))) | {int(h)}
        tails = np.array([c for c in drawn.tolist() if c not in banned][:CORRUPTIONS])
        true = confidence.relative(int(h), int(r), int(t))
        false = np.abs(
            model.score_spo_batch(np.full(len(tails), h), np.full(len(tails), r), tails) - mean
        )
        out[i] = float(np.mean(true < false) + 0.5 * np.mean(true == false))
    return out


def _by_pair(keys: Longs, values: npt.NDArray[np.float64], pairs: Longs) -> list[float]:
    """The mean of ``values`` over each pair's triples, in ``pairs`` order (a pair none of
    whose triples could be scored counts 0.5: chance)."""
    out = []
    for pair in pairs:
        mine = values[keys == pair]
        mine = mine[np.isfinite(mine)]
        out.append(float(mine.mean()) if len(mine) else 0.5)
    return out


def _with_interval(values: list[float]) -> dict[str, Any]:
    low, high = interval(values)
    return {"mean": round(float(np.mean(values)), 4), "ci": [round(low, 4), round(high, 4)]}


def trace_matches(kg: KnowledgeGraph, traces: list[Path]) -> dict[str, Any]:
    """How many recorded predicates match a relation by name under each vocabulary."""
    spelled = {normalize_name(n) for n in triples_from_knowledge_graph(kg).relation_names}
    folded = {relation_key(n) for n in triples_from_knowledge_graph(kg, fold=True).relation_names}
    total = by_spelling = by_folding = 0
    for path in traces:
        for line in filter(str.strip, path.read_text(encoding="utf-8").split("\n")):
            for predicate in _linked_predicates(json.loads(line)):
                total += 1
                named = normalize_name(predicate) in spelled
                by_spelling += named
                by_folding += named or relation_key(predicate) in folded
    return {"predicates": total, "by_name_spelled": by_spelling, "by_name_folded": by_folding}


def _linked_predicates(record: Any) -> Iterator[str]:
    """The predicates of the triples a Know3-RAG trace tried to link to a relation."""
    if isinstance(record, dict):
        if record.get("relation_match") and isinstance(record.get("triple"), list):
            yield str(record["triple"][1])
        for value in record.values():
            yield from _linked_predicates(value)
    elif isinstance(record, list):
        for value in record:
            yield from _linked_predicates(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="an index built by `quillian index`")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (split and init)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for training")
    parser.add_argument(
        "--traces", type=Path, nargs="*", default=[], help="bench qa predictions.jsonl files"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    with open_storage(args.index) as storage:
        kg = load_graph(storage)
    result: dict[str, Any] = {"index": str(args.index)}
    result |= compare(kg, [int(s) for s in args.seeds.split(",")], threads=args.threads)
    if args.traces:
        result["traces"] = trace_matches(kg, args.traces)
    print(json.dumps(result, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
