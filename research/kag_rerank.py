"""KAG's final passage rerank replayed on recorded runs, with no LLM.

    python research/kag_rerank.py --dataset musique \\
        --questions ../shared/bench/musique/questions.jsonl \\
        --index-dir indexes/musique-gpt runs/m50-kag-lfsh/kag [--json]

A ``bench qa`` run of ``kag``, ``kag-lfs`` or ``kag-cr`` records each chunk retrieval
(query and ranked chunk ids) and each step's sub-question. From them this rebuilds the
list the solver reranks at the end (the chunks in the order first retrieved) and
orders it by :func:`~quillian.methods.kag.pipeline.rerank` in each of its modes, on
the index the run used, then scores R@2 and R@5 of each order against the question's
gold passages, with the paired difference of ``mean`` against ``sum`` (the authors').
``recorded`` is the run's own figure: the mode the run used reproduces it. ``--skip N``
scores the run's questions from the (N+1)-th on only: those a choice of mode was not
made on, when it was made on the first N.

What it measures is the rerank alone, on the same steps: in a live run the reranked
passages also feed the memory (P7) and the answer, so later steps may differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import numpy as np

from qa_compare import read_parts
from quillian.bench.retrieval import recall_at
from quillian.components.retrieval.context import RetrievalContext
from quillian.engine import Engine
from quillian.errors import InputError
from quillian.eval.datasets import Question, load_questions, passage_key
from quillian.eval.stats import paired
from quillian.methods.kag.pipeline import RerankMode, rerank

__all__ = ["held_out", "main", "replay"]

MODES: tuple[RerankMode, ...] = get_args(RerankMode)
KS = (2, 5)


def replay(
    rows: Sequence[dict[str, Any]],
    questions: dict[str, Question],
    context: RetrievalContext,
    dataset: str,
) -> dict[str, Any]:
    """R@2 and R@5 of each rerank mode on ``rows`` (a KAG run's predictions), the
    recorded ones, and ``mean`` against ``sum`` question by question."""
    position = {chunk_id: i for i, chunk_id in enumerate(context.kg.chunk_ids)}
    texts = zip(context.chunk_titles, context.chunk_texts, strict=True)
    keys = [passage_key(dataset, title, text) for title, text in texts]
    scores: dict[str, dict[int, list[float]]] = {m: {k: [] for k in KS} for m in MODES}
    recorded: dict[int, list[float]] = {k: [] for k in KS}
    for row in rows:
        question = questions.get(str(row["id"]))
        if question is None:
            raise InputError(f"question {row['id']!r} of the run is not in the questions file")
        if not question.gold:
            continue
        retrieved = [
            c for s in row.get("steps", ()) if s.get("kind") == "retrieval" for c in s["chunks"]
        ]
        if stray := [c for c in retrieved if c not in position]:
            raise InputError(f"chunk {stray[0]!r} is not in this index")
        chunks = list(dict.fromkeys(position[c] for c in retrieved))  # first retrieved first
        subs = [s["question"] for s in row.get("steps", ()) if s.get("kind") == "kag-step"]
        passages = [context.passage(c, 0.0) for c in chunks]
        queries = list(dict.fromkeys([question.question, *subs]))
        sims = [context.chunk_similarity(context.embed_query(q), chunks) for q in queries]
        for k in KS:
            recorded[k].append(float(row[f"recall@{k}"]))
        for mode in MODES:
            found = [keys[p.chunk] for p in rerank(passages, sims, mode)]
            for k in KS:
                scores[mode][k].append(recall_at(found, question.gold, k))
    if not recorded[KS[0]]:
        raise InputError("no question of the run has gold passages")
    out: dict[str, Any] = {"questions": len(recorded[KS[0]])}
    for k in KS:
        out[f"recall@{k}"] = {
            "recorded": round(float(np.mean(recorded[k])), 4),
            **{m: round(float(np.mean(scores[m][k])), 4) for m in MODES},
            "mean_minus_sum": paired(scores["mean"][k], scores["sum"][k]).as_dict(),
        }
    return out


def held_out(rows: Sequence[dict[str, Any]], skip: int) -> list[dict[str, Any]]:
    """A run's rows (in question order) from the ``skip``-th on."""
    if skip < 0:
        raise InputError(f"--skip must be >= 0, got {skip}")
    if skip >= len(rows):
        raise InputError(f"--skip {skip} leaves none of the run's {len(rows)} questions")
    return list(rows[skip:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dataset", required=True, choices=["2wiki", "musique", "hotpotqa"])
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, required=True, help="the index the runs used")
    parser.add_argument("runs", nargs="+", help="a KAG method's directory of a bench qa run")
    parser.add_argument(
        "--skip",
        type=int,
        default=0,
        metavar="N",
        help="score only the questions after the run's first N (those not used to choose)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        questions = {q.id: q for q in load_questions(args.dataset, args.questions)}
        context = Engine.open(args.index_dir).index.context
        results = {
            run: replay(
                held_out(list(read_parts(run).values()), args.skip),
                questions,
                context,
                args.dataset,
            )
            for run in args.runs
        }
    except InputError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.json:
        json.dump(results, sys.stdout)
        sys.stdout.write("\n")
        return
    for run, result in results.items():
        print(f"{run}: {result['questions']} questions")
        for k in KS:
            r = result[f"recall@{k}"]
            d = r["mean_minus_sum"]
            print(
                f"  R@{k}: recorded {r['recorded']:.3f}, sum {r['sum']:.3f}, mean "
                f"{r['mean']:.3f}; mean - sum {d['diff']:+.3f} [{d['ci'][0]:+.3f}, "
                f"{d['ci'][1]:+.3f}], won {d['wins']} / lost {d['losses']}"
            )


if __name__ == "__main__":
    main()
