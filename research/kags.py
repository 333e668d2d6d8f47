"""KAGS without an LLM, beside other retrievers in one run.

    python research/kags.py --dataset hotpotqa \\
        --corpus ../shared/bench/hotpotqa/corpus.json \\
        --questions ../shared/bench/hotpotqa/questions.json --index-dir indexes/kags-hotpotqa

Runs the retrieval benchmark (:func:`~quillian.bench.retrieval.run_retrieval_bench`:
R@2/R@5 of passages, or perfect@8 on 2Wiki) for the chosen retrievers, ``kags``
included, on one index built with the KAGS stage. On HotpotQA, whose
``supporting_facts`` name the gold sentences, it also scores the source sentences KAGS
keeps (every kept relation's sentence, all hops) against them, with and without the
metadata filter:

* ``sentence_precision``: the share of kept sentences that are gold supporting
  sentences (mean over questions that kept any);
* ``sentence_recall``: the share of gold supporting sentences among the kept ones;
* ``hop0_*``: the same for the triples matched directly (before traversal);
* ``empty``: the share of questions for which nothing was kept;
* ``below_tau``: the share for which the filter kept none of the top-k hits and
  ``keep_best`` kept the one whose sentence is closest to the question.

A kept sentence matches a gold one when both come from the same passage (title) and
one contains the other after case and whitespace folding (our sentence splitter may
join two of HotpotQA's sentences).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from quillian.bench.retrieval import BenchSettings, default_index_dir, run_retrieval_bench
from quillian.components.factories import DEFAULT_EMBEDDER
from quillian.components.retrieval.base import UsedRelation
from quillian.components.retrieval.kags import BELOW_TAU, KAGSRetriever
from quillian.engine import Engine
from quillian.eval.datasets import Dataset, passage_key

__all__ = ["gold_sentences", "match_sentences", "run_kags_bench", "sentence_figures"]

Sentence = tuple[str, str]
"""``(passage key, folded sentence)``."""


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def gold_sentences(questions: Path) -> list[list[Sentence]]:
    """Per HotpotQA question, its gold supporting sentences, read from its context."""
    out = []
    for record in json.loads(questions.read_text(encoding="utf-8")):
        context = {title: sentences for title, sentences in record["context"]}
        gold = []
        for title, index in record["supporting_facts"]:
            sentences = context.get(title, [])
            if 0 <= index < len(sentences):
                gold.append((passage_key("hotpotqa", title), _fold(sentences[index])))
        out.append(gold)
    return out


def match_sentences(kept: Sequence[Sentence], gold: Sequence[Sentence]) -> tuple[int, int]:
    """``(kept sentences matching some gold one, gold sentences matched by some kept
    one)``; see the module docs for what matches."""

    def same(a: Sentence, b: Sentence) -> bool:
        return a[0] == b[0] and bool(a[1]) and bool(b[1]) and (a[1] in b[1] or b[1] in a[1])

    kept_hits = sum(1 for k in kept if any(same(k, g) for g in gold))
    gold_hits = sum(1 for g in gold if any(same(k, g) for k in kept))
    return kept_hits, gold_hits


def _kept(
    retriever: KAGSRetriever, relations: Sequence[UsedRelation], hop0: bool
) -> list[Sentence]:
    titles = retriever.context.chunk_titles
    found: dict[Sentence, None] = {}
    for r in relations:
        if hop0 and r.hop:
            continue
        chunk = retriever.store.triples[r.relation].chunk
        found[(passage_key("hotpotqa", titles[chunk]), _fold(r.sentence))] = None
    return list(found)


def sentence_figures(
    retriever: KAGSRetriever, questions: Sequence[str], gold: Sequence[Sequence[Sentence]]
) -> dict[str, float]:
    """The sentence scores of one retriever setting (see the module docs)."""
    vectors = retriever.context.embedder.embed(list(questions))
    rows: dict[str, list[float]] = {}
    for question, vector, gold_one in zip(questions, vectors, gold, strict=True):
        trace = retriever.retrieve(question, 8, vector).trace
        relations = trace.relations
        rows.setdefault("relations", []).append(len(relations))
        for prefix, hop0 in (("", False), ("hop0_", True)):
            kept = _kept(retriever, relations, hop0)
            kept_hits, gold_hits = match_sentences(kept, gold_one)
            rows.setdefault(f"{prefix}sentences", []).append(len(kept))
            if kept:
                rows.setdefault(f"{prefix}sentence_precision", []).append(kept_hits / len(kept))
            rows.setdefault(f"{prefix}sentence_recall", []).append(
                gold_hits / len(gold_one) if gold_one else 0.0
            )
        rows.setdefault("empty", []).append(float(not relations))
        below = any(seed.source == BELOW_TAU for seed in trace.seeds)
        rows.setdefault("below_tau", []).append(float(below))
    return {name: round(float(np.mean(values)), 4) for name, values in rows.items()}


def run_kags_bench(settings: BenchSettings, k: int = 8) -> dict[str, Any]:
    """The retrieval benchmark for ``settings.methods`` (``kags`` among them), then, on
    HotpotQA, KAGS's source sentences against the gold ones with and without the
    metadata filter."""
    out = run_retrieval_bench(settings, k)
    if settings.dataset != "hotpotqa":
        return out
    records = json.loads(settings.questions.read_text(encoding="utf-8"))
    questions = [r["question"] for r in records]
    gold = gold_sentences(settings.questions)
    engine = Engine.open(settings.index_dir, embedder=settings.embedder)
    try:
        base = engine.retriever("kags")
        assert isinstance(base, KAGSRetriever)
        for name, filtered in (("kags_sentences", True), ("kags_sentences_unfiltered", False)):
            retriever = base.with_config(replace(base.config, filter=filtered))
            out[name] = sentence_figures(retriever, questions, gold)
        out["_run"]["kags"] = {**vars(base.config), "triples": len(base.store)}
    finally:
        engine.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, choices=["hotpotqa", "2wiki", "musique"])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path)
    parser.add_argument("--first-n", type=int)
    parser.add_argument("--extractions", type=Path, help="recorded extractions (JSONL)")
    parser.add_argument("--methods", default="dense,sa,ppr,kags")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    args = parser.parse_args(argv)
    dataset = cast(Dataset, args.dataset)
    settings = BenchSettings(
        dataset=dataset,
        corpus=args.corpus,
        questions=args.questions,
        index_dir=args.index_dir or default_index_dir(dataset, args.first_n, args.extractions),
        first_n=args.first_n,
        extractions=args.extractions,
        embedder=args.embedder,
        methods=args.methods.split(","),
    )
    result = run_kags_bench(settings)
    given = sys.argv[1:] if argv is None else argv
    result["_command"] = shlex.join(["python", "research/kags.py", *given])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
