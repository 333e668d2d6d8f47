"""Uncertainty of benchmark figures: bootstrap intervals of a mean over questions, and
paired comparisons of two methods scored on the same questions.

With 50 questions a set, one question moves perfect@8 by 0.02, so a figure means little
without its interval, and two methods are compared question by question (paired), not
by their means alone. Both use scipy's resampling routines:

* :func:`interval`: the bias-corrected and accelerated (BCa) bootstrap interval of the
  mean (Efron, 1987), falling back to the percentile interval where BCa is undefined
  (for example a set where every question but one scores the same);
* :func:`paired`: the mean per-question difference with its paired bootstrap interval,
  the two-sided p-value of a paired sign-flip permutation test (exact when the
  questions are few enough to enumerate), and how many questions each method wins;
* :func:`ratio`: the ratio of two totals over the same questions (seconds of one run
  over another's) with its paired percentile bootstrap interval.

Resampling is seeded, so a rerun on the same scores prints the same figures.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["LEVEL", "Comparison", "interval", "paired", "ratio"]

#: Confidence level of every interval.
LEVEL = 0.95
RESAMPLES = 9999
SEED = 0


def _stats() -> Any:
    """scipy's statistics, imported on first use: importing them takes about 0.3 s,
    which every ``quillian`` command paid (its bench commands import this module)."""
    from scipy import stats

    return stats


def _mean(x: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
    return np.mean(x, axis=axis)


def interval(
    values: Sequence[float] | npt.NDArray[np.float64], level: float = LEVEL
) -> tuple[float, float]:
    """The bootstrap interval of the mean of ``values`` (one score per question).

    No values: ``(nan, nan)``; values all equal: that value twice (nothing varies)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return (float("nan"), float("nan"))
    if np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's degenerate-data warning: falls back
            result = _stats().bootstrap(
                (x,),
                _mean,
                confidence_level=level,
                n_resamples=RESAMPLES,
                method=method,
                random_state=np.random.default_rng(SEED),
            )
        low, high = result.confidence_interval
        if np.isfinite(low) and np.isfinite(high):
            return (float(low), float(high))
    mean = float(x.mean())
    return (mean, mean)


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` on the same questions: the mean of ``a - b``, its interval,
    the permutation test's p-value, and the questions where ``a`` scores higher, lower
    or the same."""

    diff: float
    ci: tuple[float, float]
    p: float
    wins: int
    losses: int
    ties: int

    def as_dict(self, digits: int = 4) -> dict[str, object]:
        return {
            "diff": round(self.diff, digits),
            "ci": [round(self.ci[0], digits), round(self.ci[1], digits)],
            "p": round(self.p, digits),
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
        }


def paired(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Comparison:
    """``a`` against ``b``, both scored on the same questions in the same order."""
    x, y = _aligned(a, b)
    d = x - y
    wins, losses = int(np.sum(d > 0)), int(np.sum(d < 0))
    if not np.any(d):
        return Comparison(0.0, (0.0, 0.0), 1.0, 0, 0, int(d.size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test = _stats().permutation_test(
            (d,),
            _mean,
            permutation_type="samples",
            n_resamples=RESAMPLES,
            alternative="two-sided",
            random_state=np.random.default_rng(SEED),
        )
    return Comparison(
        float(d.mean()),
        interval(d, level),
        float(min(1.0, test.pvalue)),
        wins,
        losses,
        int(d.size) - wins - losses,
    )


def ratio(
    a: Sequence[float], b: Sequence[float], level: float = LEVEL
) -> tuple[float, tuple[float, float]]:
    """``sum(a) / sum(b)`` over the same questions, and its percentile bootstrap interval
    (questions resampled in pairs). ``b`` summing to zero has no ratio: ``nan``."""
    x, y = _aligned(a, b)
    if x.size == 0 or y.sum() == 0:
        return float("nan"), (float("nan"), float("nan"))
    rows = np.random.default_rng(SEED).integers(0, x.size, size=(RESAMPLES, x.size))
    top, bottom = x[rows].sum(axis=1), y[rows].sum(axis=1)
    samples = top[bottom > 0] / bottom[bottom > 0]
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return float(x.sum() / y.sum()), (float(low), float(high))


def _aligned(
    a: Sequence[float], b: Sequence[float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Two per-question value lists as arrays; a clear error unless they align."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores must be two lists of one length, got {x.shape}, {y.shape}")
    return x, y
