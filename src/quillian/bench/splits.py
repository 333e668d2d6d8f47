"""What choosing among variants on some questions gives on others: repeated half-splits.

A default chosen because it scores best on the dev questions scores better there than
on questions not seen; the more variants were tried, the larger that gap (a MuSiQue
default chosen among many lost 0.117 of R@5 on unseen questions and fell below one of
its own members). This estimates the gap instead of hoping it away. For each of
``splits`` seeded random splits, every data set's questions are halved; the variant
with the best pooled mean on the first halves (each set's mean on its own metric,
averaged over the sets, so each set weighs the same) is chosen, and scored on the
second halves against the baseline. Over the splits that gives:

* **the procedure's out-of-sample gain**, per set and pooled: what tuning over these
  variants is worth on questions it did not see, with the spread over splits and the
  in-sample gain on the halves it chose on (the difference is the optimism of a choice
  among this many variants);
* **each variant's held-out gain** over the baseline on the second halves, per set and
  pooled, with its spread and how often the procedure chose it;
* **a decision**: the variant best on all the questions replaces the baseline only when
  (1) the procedure's mean out-of-sample gain is positive on every set, (2) that
  variant's mean held-out gain is positive on every set, and (3) its pooled held-out
  gain stays positive at the ``(1 - level) / m`` lower quantile over the splits, ``m``
  the variants counted: those of this grid plus ``tried``, the ones tried before
  (Bonferroni's discount of a choice among many). Otherwise the baseline stays.

A half holds half the questions, so the spread over splits is wider than the interval
of a mean over all of them: the rule errs towards keeping the baseline, as a default
should (fewer tuned constants). Equal means go to the earlier variant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import ConfigError

__all__ = ["SPLITS", "SetScores", "repeated_splits", "splits_summary"]

#: Random half-splits by default (the least the procedure is run with is 200).
SPLITS = 200
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SetScores:
    """One data set's per-question scores: ``variants`` (variants x questions) and the
    ``baseline``'s (questions), on the set's own ``metric``."""

    metric: str
    variants: F64
    baseline: F64

    def __post_init__(self) -> None:
        if self.variants.ndim != 2 or self.variants.shape[1] != self.baseline.shape[0]:
            raise ConfigError(
                f"scores of {self.variants.shape} variants x questions do not match a "
                f"baseline of {self.baseline.shape[0]} questions"
            )
        if self.baseline.shape[0] < 2:
            raise ConfigError("halving the questions needs at least two of them")


def repeated_splits(
    sets: Mapping[str, SetScores],
    labels: Sequence[Any],
    *,
    splits: int = SPLITS,
    seed: int = 0,
    tried: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """The procedure's and each variant's out-of-sample gain over the baseline across
    ``splits`` random half-splits of every set in ``sets`` (see the module), and the
    decision; ``labels`` name the variants, in their order. JSON-able."""
    if not sets:
        raise ConfigError("no data set to split")
    if splits < 1:
        raise ConfigError(f"splits must be at least 1, got {splits}")
    if tried < 0:
        raise ConfigError(f"tried counts variants: at least 0, got {tried}")
    n_variants = len(labels)
    for name, scores in sets.items():
        if scores.variants.shape[0] != n_variants:
            raise ConfigError(f"{name}: {scores.variants.shape[0]} variants, not {n_variants}")
    names = list(sets)
    rng = np.random.default_rng(seed)
    held = np.empty((splits, len(names), n_variants))  # each variant's gain on B halves
    chose = np.empty(splits, dtype=np.int64)
    chosen_in = np.empty((splits, len(names)))  # the chosen variant's gain on A halves
    for s in range(splits):
        train = np.empty((len(names), n_variants))
        for i, name in enumerate(names):
            scores = sets[name]
            order = rng.permutation(scores.baseline.shape[0])
            half = len(order) // 2
            for row, part in ((train, order[:half]), (held[s], order[half:])):
                row[i] = scores.variants[:, part].mean(axis=1) - scores.baseline[part].mean()
        chose[s] = _first_best(train.mean(axis=0))
        chosen_in[s] = train[:, chose[s]]
    return _report(names, sets, labels, held, chose, chosen_in, tried, level)


def _first_best(values: F64) -> int:
    """The position of the best value, the earliest among equals (to 1e-9)."""
    rounded = np.round(values, 9)
    return int(np.flatnonzero(rounded == rounded.max())[0])


def _summary(gains: F64, level: float) -> dict[str, Any]:
    """Mean and spread (the central ``level`` of the values over splits)."""
    tail = (1 - level) / 2
    return {
        "gain": round(float(gains.mean()), 4),
        "spread": [round(float(np.quantile(gains, q)), 4) for q in (tail, 1 - tail)],
    }


def _report(
    names: list[str],
    sets: Mapping[str, SetScores],
    labels: Sequence[Any],
    held: F64,
    chose: npt.NDArray[np.int64],
    chosen_in: F64,
    tried: int,
    level: float,
) -> dict[str, Any]:
    splits = len(chose)
    out_of_sample = held[np.arange(splits), :, chose]  # splits x sets
    pooled = out_of_sample.mean(axis=1)
    counted = len(labels) + tried
    discount = (1 - level) / max(counted, 1)
    variants = []
    for v, label in enumerate(labels):
        gains = held[:, :, v]
        pooled_v = gains.mean(axis=1)
        variants.append(
            {
                "options": label,
                "per_set": {n: _summary(gains[:, i], level) for i, n in enumerate(names)},
                "pooled": {
                    **_summary(pooled_v, level),
                    "discounted_low": round(float(np.quantile(pooled_v, discount)), 4),
                },
                "chosen_share": round(float(np.mean(chose == v)), 4),
            }
        )
    full = np.mean([sets[n].variants.mean(axis=1) - sets[n].baseline.mean() for n in names], axis=0)
    best = _first_best(full)
    procedure = {
        "per_set": {n: _summary(out_of_sample[:, i], level) for i, n in enumerate(names)},
        "pooled": _summary(pooled, level),
        "in_sample_gain": round(float(chosen_in.mean()), 4),
        "optimism": round(float(chosen_in.mean() - out_of_sample.mean()), 4),
    }
    return {
        "splits": splits,
        "sets": {n: {"metric": sets[n].metric, "questions": len(sets[n].baseline)} for n in names},
        "variants_counted": counted,
        "procedure": procedure,
        "variants": variants,
        "decision": _decide(procedure, variants[best], names),
    }


def _decide(procedure: dict[str, Any], best: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Whether ``best`` (the variant best on all the questions) replaces the baseline."""
    checks = {
        "procedure gains on every set": all(procedure["per_set"][n]["gain"] > 0 for n in names),
        "variant gains on every set": all(best["per_set"][n]["gain"] > 0 for n in names),
        "discounted pooled gain above 0": best["pooled"]["discounted_low"] > 0,
    }
    change = all(checks.values())
    return {"change": change, "best": best["options"], "checks": checks}


def splits_summary(result: Mapping[str, Any]) -> str:
    """:func:`repeated_splits`' result in a few lines of text."""
    proc, decision = result["procedure"], result["decision"]
    lines = [
        f"repeated half-splits ({result['splits']}, {result['variants_counted']} variants "
        f"counted): choosing among them gains {proc['pooled']['gain']:+.4f} "
        f"{_spread(proc['pooled'])} out of sample (in-sample {proc['in_sample_gain']:+.4f}, "
        f"optimism {proc['optimism']:+.4f})"
    ]
    lines += [f"  {name}: {_gain(row)}" for name, row in proc["per_set"].items()]
    verdict = "replaces the baseline" if decision["change"] else "the baseline stays"
    failed = [check for check, ok in decision["checks"].items() if not ok]
    lines.append(
        f"best on all questions {decision['best']}: {verdict}"
        + (f" ({'; '.join(failed)}: no)" if failed else "")
    )
    return "\n".join(lines)


def _gain(row: Mapping[str, Any]) -> str:
    return f"{row['gain']:+.4f} {_spread(row)}"


def _spread(row: Mapping[str, Any]) -> str:
    low, high = row["spread"]
    return f"[{low:+.4f}, {high:+.4f}]"
