"""Answer metrics, with values worked out by hand."""

import pytest

from quillian.eval.metrics import accuracy, exact_match, f1, normalize_answer, score_answer


def test_squad_normalisation():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theatre") == "theatre"  # "the" only as a word


def test_exact_match_takes_any_alias():
    assert exact_match("the United States", ["USA", "United States"]) == 1.0
    assert exact_match("United States of America", ["USA", "United States"]) == 0.0


def test_f1_by_hand():
    # prediction "new york city" vs gold "york city": 2 common tokens,
    # precision 2/3, recall 2/2 -> F1 = 2 * (2/3) * 1 / (2/3 + 1) = 0.8
    assert f1("New York City", "York City") == pytest.approx(0.8)
    assert f1("Paris", ["London", "Paris, France"]) == pytest.approx(2 / 3)
    assert f1("", "Paris") == 0.0
    assert f1("", "the") == 1.0  # both normalise to nothing


def test_accuracy_is_containment_on_word_boundaries():
    assert accuracy("He was born in Milwaukee, Wisconsin.", "Milwaukee") == 1.0
    assert accuracy("Milwaukeean", "Milwaukee") == 0.0
    assert accuracy("anything", ["", "the"]) == 0.0  # empty golds never match


def test_score_answer_and_empty_gold():
    scores = score_answer("Milwaukee", ["Milwaukee, Wisconsin", "Milwaukee"])
    assert (scores.em, scores.f1, scores.accuracy) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="no gold answer"):
        exact_match("x", [])
