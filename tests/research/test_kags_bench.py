"""The KAGS benchmark's sentence scoring: gold sentences from HotpotQA's context, and
kept source sentences matched to them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from kags import gold_sentences, match_sentences, sentence_figures
from quillian.components.retrieval.kags import KAGSRetriever
from quillian.engine import Engine
from quillian.eval.datasets import passage_key
from quillian.testing.kags import kags_index


def test_gold_sentences_come_from_the_questions_context(tmp_path: Path) -> None:
    record = {
        "question": "q",
        "supporting_facts": [["Alpha", 1], ["Beta", 0], ["Beta", 7]],  # 7: out of range
        "context": [["Alpha", ["First.", " Second  one."]], ["Beta", ["Only."]]],
    }
    path = tmp_path / "questions.json"
    path.write_text(json.dumps([record]))
    assert gold_sentences(path) == [[("alpha", "second one."), ("beta", "only.")]]


def test_kept_sentences_match_gold_ones_of_the_same_passage_either_way() -> None:
    gold = [("alpha", "second one."), ("beta", "only.")]
    kept = [
        ("alpha", "first. second one."),  # our splitter joined two gold-side sentences
        ("beta", "something else."),
        ("gamma", "only."),  # same words, another passage
    ]
    assert match_sentences(kept, gold) == (1, 1)
    assert match_sentences([], gold) == (0, 0)
    assert match_sentences([("beta", "only.")], gold) == (1, 1)


def test_sentence_figures_count_the_questions_kept_below_tau(tmp_path: Path) -> None:
    """On the tiny KAGS index (keyword cosines by hand, ``tests/retrieval/test_kags.py``):
    at tau 0.75 no hit passes and ``keep_best`` keeps the closest; at 0.5 one passes."""
    kags_index(tmp_path)
    engine = Engine.open(tmp_path, embedder="keyword")
    try:
        base = engine.retriever("kags")
        assert isinstance(base, KAGSRetriever)
        gold = [[(passage_key("hotpotqa", "Alpha"), "alpha beta gamma delta.")]]

        def figures(**settings: Any) -> dict[str, float]:
            config = replace(base.config, top_k=2, hops=0, **settings)
            return sentence_figures(base.with_config(config), ["alpha beta"], gold)

        below = figures(tau=0.75)
        assert below["below_tau"] == 1.0 and below["empty"] == 0.0
        assert below["sentence_recall"] == 1.0  # the closest sentence is the gold one
        assert figures(tau=0.5)["below_tau"] == 0.0
        paper = figures(tau=0.75, keep_best=False)  # the authors' code: nothing kept
        assert paper["empty"] == 1.0 and paper["below_tau"] == 0.0
    finally:
        engine.close()
