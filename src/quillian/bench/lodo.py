"""Choosing a default across data sets: leave one data set out.

``quillian bench tune`` cross-validates a parameter within one set of questions. A
default is meant for corpora not yet seen, so it is chosen across data sets: for each
set, the grid point with the best mean score over the *other* sets (each on its own
headline metric, from its ``bench tune --json`` result) is scored on the held-out set.
Every set is then scored by a choice made without it; the point chosen on all sets is
reported too, as an in-sample choice. Equal means go to the earlier grid point.

    python -m quillian.bench.lodo runs/tune-hops-*.json [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from quillian.errors import InputError

__all__ = ["leave_one_set_out", "main"]


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tunes", nargs="+", type=Path, help="bench tune --json outputs")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    tunes = {}
    for path in args.tunes:
        try:
            tunes[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SystemExit(f"{path}: cannot read a tune result ({exc})") from exc
    try:
        result = leave_one_set_out(tunes)
    except InputError as exc:
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


if __name__ == "__main__":
    main()
