"""Bootstrap intervals and paired comparisons of per-question scores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quillian.eval.stats import interval, paired, ratio


def test_the_interval_holds_the_mean_and_narrows_with_more_questions() -> None:
    rng = np.random.default_rng(7)
    few = (rng.random(50) < 0.8).astype(float)
    many = (rng.random(2000) < 0.8).astype(float)
    low, high = interval(few)
    assert low < few.mean() < high
    wide = high - low
    low, high = interval(many)
    assert low < many.mean() < high
    assert high - low < wide / 3  # about 1/sqrt(40) as wide
    # with 50 binary questions, one question is 0.02: the interval spans many of them
    assert wide > 0.15


def test_the_interval_is_reproducible_and_handles_degenerate_sets() -> None:
    values = [1.0] * 45 + [0.0] * 5
    assert interval(values) == interval(values)
    assert interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    low, high = interval([1.0] * 49 + [0.0])
    assert 0.8 < low <= 0.98 <= high <= 1.0
    assert all(math.isnan(x) for x in interval([]))


def test_a_paired_comparison_counts_questions_and_tests_exactly_when_few() -> None:
    a = [1, 1, 1, 0, 0.5]
    b = [0, 0, 0, 0, 0.5]
    c = paired(a, b)
    assert (c.wins, c.losses, c.ties) == (3, 0, 2)
    assert c.diff == pytest.approx(0.6)
    # three non-zero differences, all positive: 2 of the 2^3 sign flips are as extreme
    assert c.p == pytest.approx(0.25)
    flipped = paired(b, a)
    assert flipped.diff == pytest.approx(-0.6) and flipped.p == pytest.approx(c.p)
    assert (flipped.wins, flipped.losses) == (0, 3)
    same = paired(a, a)
    assert same.diff == 0 and same.p == 1.0 and same.ties == 5


def test_a_clear_difference_is_significant_and_its_interval_excludes_zero() -> None:
    rng = np.random.default_rng(3)
    b = (rng.random(200) < 0.5).astype(float)
    a = np.maximum(b, (rng.random(200) < 0.4).astype(float))  # a never loses
    c = paired(a, b)
    assert c.losses == 0 and c.wins > 30
    assert c.p < 0.001 and c.ci[0] > 0


def test_paired_scores_must_align() -> None:
    with pytest.raises(ValueError, match="one length"):
        paired([1, 0], [1])


def test_a_ratio_of_totals_with_its_interval() -> None:
    value, (low, high) = ratio([1.0, 2.0, 3.0, 10.0], [2.0, 2.0, 2.0, 2.0])
    assert value == 2.0 and low < 2.0 < high  # the last question drives it: wide
    assert ratio([1.0, 2.0], [2.0, 4.0]) == (0.5, (0.5, 0.5))
    nothing = ratio([1.0], [0.0])
    assert math.isnan(nothing[0]) and math.isnan(nothing[1][0])
    with pytest.raises(ValueError, match="two lists of one length"):
        ratio([1.0], [1.0, 2.0])
