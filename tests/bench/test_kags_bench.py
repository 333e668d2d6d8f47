"""The KAGS benchmark's sentence scoring: gold sentences from HotpotQA's context, and
kept source sentences matched to them."""

from __future__ import annotations

import json
from pathlib import Path

from quillian.bench.kags import gold_sentences, match_sentences


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
