"""Filtered ranks and metrics on a hand-made ranking example."""

from __future__ import annotations

import numpy as np
import pytest

from quillian.components.kge.evaluate import KnownAnswers, evaluate, filtered_ranks, ranking_metrics
from quillian.components.kge.triples import TripleSet


class FixedScores:
    """A scorer answering every question with the same, hand-chosen scores."""

    def __init__(self, tails, heads):
        self.tails, self.heads = np.array(tails, np.float32), np.array(heads, np.float32)

    def score_sp_batch(self, heads, relations):
        return np.tile(self.tails, (len(heads), 1))

    def score_po_batch(self, relations, tails):
        return np.tile(self.heads, (len(tails), 1))


def triples(rows):
    return TripleSet.from_array(rows, 4, 1)


def test_filtered_ranks_by_hand():
    train, test = triples([[0, 0, 1]]), triples([[0, 0, 2]])
    known = KnownAnswers([train, test])
    # (0, r, ?) scores [0.1, 0.9, 0.5, 0.7]: answer 2 (0.5); entity 1 (0.9) is a known
    # answer (train), filtered out; entity 3 (0.7) is above: rank 2 (raw rank 3)
    # (?, r, 2) scores [0.3, 0.3, 0.2, 0.3]: answer 0 (0.3); entities 1 and 3 tie with it
    # and count half each: rank 1 + 0 + 2/2 = 2
    model = FixedScores([0.1, 0.9, 0.5, 0.7], [0.3, 0.3, 0.2, 0.3])
    tail_ranks, head_ranks = filtered_ranks(model, test, known)
    assert tail_ranks.tolist() == [2.0] and head_ranks.tolist() == [2.0]
    metrics = evaluate(model, test, known)
    assert metrics["mrr"] == pytest.approx(0.5)
    assert (metrics["hits@1"], metrics["hits@3"], metrics["hits@10"]) == (0.0, 1.0, 1.0)
    assert metrics["tail_mrr"] == metrics["head_mrr"] == pytest.approx(0.5)
    # without the train triple in the filter, entity 1 is a mistake: rank 3
    unfiltered, _ = filtered_ranks(model, test, KnownAnswers([test]))
    assert unfiltered.tolist() == [3.0]


def test_known_answers_hold_both_directions():
    known = KnownAnswers([triples([[0, 0, 1], [0, 0, 2], [3, 0, 2]])])
    assert known.answers(0, 0) == [1, 2]  # (0, r, ?)
    assert known.answers(2, 1) == [0, 3]  # (?, r, 2) as (2, r^-1, ?)
    assert known.answers(1, 0) == []


def test_known_answers_for_some_questions_filter_them_as_the_whole_graph_does():
    rng = np.random.default_rng(3)
    graph = TripleSet.from_array(
        np.unique(rng.integers(0, [30, 3, 30], size=(400, 3)), axis=0), 30, 3
    )
    questions = graph.subset(np.arange(0, len(graph), 7))
    whole, some = KnownAnswers([graph]), KnownAnswers.for_questions(graph, questions)
    assert len(some._answers) < len(whole._answers)
    for h, r, t in questions.as_array():
        assert some.answers(int(h), int(r)) == whole.answers(int(h), int(r))
        assert some.answers(int(t), int(r) + 3) == whole.answers(int(t), int(r) + 3)
    model = FixedScores(rng.random(30), rng.random(30))
    assert evaluate(model, questions, some) == evaluate(model, questions, whole)


def test_batches_hold_a_bounded_number_of_scores(monkeypatch):
    import quillian.components.kge.evaluate as evaluate_module

    rng = np.random.default_rng(5)
    graph = TripleSet.from_array(rng.integers(0, [30, 2, 30], size=(50, 3)), 30, 2)
    known, model = KnownAnswers([graph]), FixedScores(rng.random(30), rng.random(30))
    expected = evaluate(model, graph, known)
    seen: list[int] = []
    real = model.score_sp_batch
    model.score_sp_batch = lambda h, r: seen.append(len(h)) or real(h, r)  # type: ignore[method-assign]
    monkeypatch.setattr(evaluate_module, "SCORES_PER_BATCH", 60)  # two questions of 30
    assert evaluate(model, graph, known) == expected
    assert max(seen) == 2 and sum(seen) == 50


def test_ranking_metrics_by_hand():
    metrics = ranking_metrics([1, 2, 4, 20])
    assert metrics["mrr"] == pytest.approx((1 + 0.5 + 0.25 + 0.05) / 4)
    assert (metrics["hits@1"], metrics["hits@3"], metrics["hits@10"]) == (0.25, 0.5, 0.75)


def test_a_diverged_model_ranks_last():
    test = triples([[0, 0, 2]])
    model = FixedScores([np.nan] * 4, [0.0] * 4)
    tail_ranks, head_ranks = filtered_ranks(model, test, KnownAnswers([test]))
    assert tail_ranks.tolist() == [4.0]
    assert head_ranks.tolist() == [2.5]  # all tied: the middle
