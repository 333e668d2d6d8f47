"""Choosing a default across data sets: leave one data set out.

``quillian bench tune`` cross-validates a parameter within one set of questions. A
default is meant for corpora not yet seen, so it is chosen across data sets: for each
set, the grid point with the best mean score over the *other* sets (each on its own
headline metric, from its ``bench tune --json`` result) is scored on the held-out set.
Every set is then scored by a choice made without it; the point chosen on all sets is
reported too, as an in-sample choice. Equal means go to the earlier grid point.

With three or four sets, leaving one out gives three or four estimates. The repeated
half-splits of :mod:`quillian.bench.splits` (``--splits``, 200 by default) pool every
set's per-question scores instead: the out-of-sample gain of choosing among the grid,
per set and pooled with its spread, each point's held-out gain over the baseline (the
tunes' defaults, or the grid point ``--baseline`` names, such as the option turned
off), and the decision, discounted for the variants counted (the grid's, plus
``--tried`` tried before it).

    python -m quillian.bench.lodo runs/tune-hops-*.json [--splits 200] [--tried N]
        [--baseline '{"second_hops": 0}'] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from quillian.bench.splits import SPLITS, SetScores, repeated_splits, splits_summary
from quillian.errors import ConfigError, InputError

__all__ = ["leave_one_set_out", "main", "pooled_splits"]


def _grid(name: str, tune: Mapping[str, Any]) -> list[tuple[str, float]]:
    try:
        return [(json.dumps(p["options"], sort_keys=True), float(p["score"])) for p in tune["grid"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{name}: not the JSON of `quillian bench tune --json` ({exc})") from exc


def _best(points: Sequence[str], means: Mapping[str, float]) -> str:
    return max(points, key=lambda p: (round(means[p], 9), -points.index(p)))


def leave_one_set_out(tunes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """For each set (``tunes``: name -> its tune result, all over the same grid), the
    point chosen on the others and its score there, beside the tune's default."""
    if len(tunes) < 2:
        raise InputError("leaving a data set out needs the tune results of two or more")
    grids = {name: dict(_grid(name, t)) for name, t in tunes.items()}
    first_name = next(iter(tunes))
    points = [p for p, _ in _grid(first_name, tunes[first_name])]
    for name, grid in grids.items():
        if sorted(grid) != sorted(points):
            raise InputError(f"{name}: its grid differs from {first_name}'s")
    methods = {t.get("method") for t in tunes.values()}
    if len(methods) > 1:
        raise InputError(f"the tune results are of different methods: {sorted(map(str, methods))}")

    def mean(names: Sequence[str]) -> dict[str, float]:
        return {p: sum(grids[n][p] for n in names) / len(names) for p in points}

    held_out = {}
    for name, tune in tunes.items():
        chosen = _best(points, mean([n for n in tunes if n != name]))
        held_out[name] = {
            "metric": tune.get("metric"),
            "chosen": json.loads(chosen),
            "score": grids[name][chosen],
            "default": tune.get("default", {}).get("score"),
            "best_here": json.loads(_best(points, grids[name])),
        }
    on_all = _best(points, mean(list(tunes)))
    return {
        "method": methods.pop(),
        "held_out": held_out,
        "chosen_on_all": json.loads(on_all),
        "grid_means": {p: round(m, 4) for p, m in mean(list(tunes)).items()},
    }


def pooled_splits(
    tunes: Mapping[str, Mapping[str, Any]],
    *,
    splits: int = SPLITS,
    seed: int = 0,
    tried: int = 0,
    baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`~quillian.bench.splits.repeated_splits` over the per-question scores of
    every tune result (all over the same grid), against the tunes' defaults or the grid
    point ``baseline``."""
    leave_one_set_out(tunes)  # the same checks: two or more sets, one grid, one method
    first = next(iter(tunes.values()))
    labels = [p["options"] for p in first["grid"]]
    if baseline is not None and dict(baseline) not in labels:
        raise InputError(f"--baseline {json.dumps(baseline)} is not a point of the grid")
    sets = {}
    for name, tune in tunes.items():
        by_point = {json.dumps(p["options"], sort_keys=True): p for p in tune["grid"]}
        try:
            rows = [by_point[json.dumps(label, sort_keys=True)]["per_question"] for label in labels]
            base = (
                by_point[json.dumps(baseline, sort_keys=True)]["per_question"]
                if baseline is not None
                else tune["default"]["per_question"]
            )
            sets[name] = SetScores(
                str(tune.get("metric")), np.asarray(rows, np.float64), np.asarray(base, np.float64)
            )
        except KeyError:
            raise InputError(
                f"{name}: no per-question scores (a tune result of an older version): run "
                "`quillian bench tune ... --json` again, or pass --splits 0"
            ) from None
        except (ConfigError, ValueError) as exc:
            raise InputError(f"{name}: {exc}") from exc
    return {
        "baseline": dict(baseline) if baseline is not None else "defaults",
        **repeated_splits(sets, labels, splits=splits, seed=seed, tried=tried),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tunes", nargs="+", type=Path, help="bench tune --json outputs")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--splits", type=int, default=SPLITS, help="random half-splits pooled (0: none)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the splits' seed")
    parser.add_argument(
        "--tried", type=int, default=0, help="variants tried before this grid, counted too"
    )
    parser.add_argument(
        "--baseline", type=json.loads, default=None, help="a grid point's options as JSON"
    )
    args = parser.parse_args(argv)
    tunes = {}
    for path in args.tunes:
        try:
            tunes[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SystemExit(f"{path}: cannot read a tune result ({exc})") from exc
    try:
        result = leave_one_set_out(tunes)
        if args.splits:
            result["splits"] = pooled_splits(
                tunes, splits=args.splits, seed=args.seed, tried=args.tried, baseline=args.baseline
            )
    except (InputError, ConfigError) as exc:
        raise SystemExit(str(exc)) from exc
    if args.json:
        print(json.dumps(result))
        return
    for name, row in result["held_out"].items():
        print(
            f"{name}: chosen on the others {row['chosen']} -> {row['metric']} {row['score']}"
            f" (default {row['default']}; best on this set alone {row['best_here']})"
        )
    print(f"chosen on all: {result['chosen_on_all']}")
    if "splits" in result:
        print(f"against {json.dumps(result['splits']['baseline'])}:")
        print(splits_summary(result["splits"]))


if __name__ == "__main__":
    main()
