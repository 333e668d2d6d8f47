"""``python research/kag_rerank.py``: a recorded KAG run's final rerank replayed
in both modes on a small index built in the test."""

from __future__ import annotations

import pytest

from kag_rerank import held_out, replay
from quillian.errors import InputError
from quillian.eval.datasets import Question, passage_key
from quillian.testing.kag import build_world

CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage.",
    "Charles Babbage": "Charles Babbage was born in London.",
    "London": "London is the capital of England.",
}


@pytest.fixture
def world(tmp_path):
    context = build_world(tmp_path, CORPUS, {title: ([], []) for title in CORPUS})
    ids = dict(zip(context.chunk_titles, context.kg.chunk_ids, strict=True))
    gold = frozenset(
        passage_key("2wiki", t, x)
        for t, x in zip(context.chunk_titles, context.chunk_texts, strict=True)
        if t in ("Ada Lovelace", "Charles Babbage")
    )
    question = Question(id="q1", question="Where was Ada Lovelace's collaborator born?", gold=gold)
    return context, ids, question


def row(ids, *steps, r2=0.5, r5=1.0):  # type: ignore[no-untyped-def]
    return {"id": "q1", "recall@2": r2, "recall@5": r5, "steps": list(steps)}


def retrieval(ids, *titles):  # type: ignore[no-untyped-def]
    return {"kind": "retrieval", "query": "q", "chunks": [ids[t] for t in titles]}


def test_a_run_without_sub_questions_ranks_alike_in_both_modes(world) -> None:
    context, ids, question = world
    recorded = row(
        ids,
        retrieval(ids, "London", "Ada Lovelace"),
        retrieval(ids, "Ada Lovelace", "Charles Babbage"),  # Ada again: counted once
    )
    result = replay([recorded], {"q1": question}, context, "2wiki")
    assert result["questions"] == 1
    for k, recorded_value in ((2, 0.5), (5, 1.0)):
        figures = result[f"recall@{k}"]
        assert figures["recorded"] == recorded_value
        assert figures["sum"] == figures["mean"]  # the question alone votes
        assert figures["mean_minus_sum"]["diff"] == 0.0
    assert result["recall@5"]["sum"] == 1.0  # every candidate within the top 5


def test_a_run_that_does_not_match_its_index_or_questions_is_named(world) -> None:
    context, ids, question = world
    stray = row(ids, {"kind": "retrieval", "query": "q", "chunks": ["chunk-elsewhere"]})
    with pytest.raises(InputError, match="chunk 'chunk-elsewhere' is not in this index"):
        replay([stray], {"q1": question}, context, "2wiki")
    with pytest.raises(InputError, match="question 'q1' of the run is not in the questions"):
        replay([row(ids)], {}, context, "2wiki")
    no_gold = Question(id="q1", question=question.question, gold=frozenset())
    with pytest.raises(InputError, match="no question of the run has gold passages"):
        replay([row(ids)], {"q1": no_gold}, context, "2wiki")


def test_held_out_rows_are_those_after_the_first_n() -> None:
    rows = [{"id": str(i)} for i in range(5)]
    assert [r["id"] for r in held_out(rows, 3)] == ["3", "4"]
    assert held_out(rows, 0) == rows
    with pytest.raises(InputError, match="--skip 5 leaves none of the run's 5 questions"):
        held_out(rows, 5)
    with pytest.raises(InputError, match="--skip must be >= 0"):
        held_out(rows, -1)
