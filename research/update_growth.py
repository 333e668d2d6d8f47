"""How an update's cost grows from one index size to another, sizes interleaved so that
the machine's drift between runs does not enter the ratio (docs/scale.md, stop 89).

Run ``python research/update_growth.py --small BASE ADD --large BASE ADD --rounds R
TREE...``: each round runs, for each source tree in turn, ``research/update_stages.py
COPY add ADD --pairs 6`` on a fresh copy of the small base, then of the large one
(``--engine``: through an engine, see update_stages.py), so that each round's ratio
(large over small, of the medians of its pairs after the first) compares figures taken
minutes apart. It prints, per tree and operation, the median of the rounds' ratios with
their range and a bootstrap 95% interval (rounds resampled), the same of the
processor seconds (every thread's: work moved into a thread still counts there), and
the bytes written;
each round's ratios go to stderr as it ends, and ``--out`` is written again after
each round, so a run cut short keeps the rounds it took.
A run of update_pairs_served.sh per size measured each size in a block of its own; two
such runs on one machine gave 1.71x and 2.23x for the same tree's delete.

``--pool RUN.json TREE LABEL`` (repeated) reads the rounds several runs wrote with
``--out`` instead, and prints the same figures over every round of each label's runs
(one tree's code, whatever path each run gave it): for a change smaller than one
run's spread, every round taken for the same code counts (docs/scale.md, stop 93).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OPERATIONS = ("add", "delete")


def _run(tree: Path, base: Path, add: Path, pairs: int, engine: bool) -> dict[str, Any]:
    """update_stages.py's pairs on a fresh copy of ``base``, with ``tree``'s sources."""
    with tempfile.TemporaryDirectory(dir=base.parent) as work:
        copy = Path(work) / "copy"
        shutil.copytree(base, copy, symlinks=True)
        command = [sys.executable, str(HERE / "update_stages.py"), str(copy), "add", str(add)]
        command += ["--pairs", str(pairs)] + (["--engine"] if engine else [])
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    found: dict[str, Any] = json.loads(done.stdout)["after_the_first"]
    return found


def _interval(ratios: list[float], draws: int = 2000) -> tuple[float, float]:
    """A bootstrap 95% interval of the median of ``ratios`` (rounds resampled)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, help="source trees (their src/)")
    parser.add_argument("--small", nargs=2, type=Path, metavar=("BASE", "ADD"))
    parser.add_argument("--large", nargs=2, type=Path, metavar=("BASE", "ADD"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--engine", action="store_true", help="updates through an engine")
    parser.add_argument("--out", type=Path, help="also write every round's figures here")
    parser.add_argument(
        "--pool",
        nargs=3,
        action="append",
        metavar=("RUN", "TREE", "LABEL"),
        help="the rounds of TREE in RUN (an --out file), counted under LABEL; runs nothing",
    )
    args = parser.parse_args()
    if args.pool:
        pooled: dict[str, list[dict[str, Any]]] = {}
        for run, tree, label in args.pool:
            pooled.setdefault(label, []).extend(json.loads(Path(run).read_text())[tree])
        for label, taken in pooled.items():
            print(f"{label} ({len(taken)} rounds): {growth(taken)}")
        return
    if not args.trees or args.small is None or args.large is None:
        parser.error("give the trees, --small and --large (or --pool)")
    rounds: dict[str, list[dict[str, Any]]] = {str(t): [] for t in args.trees}
    for number in range(1, args.rounds + 1):
        for tree in args.trees:
            small = _run(tree, args.small[0], args.small[1], args.pairs, args.engine)
            large = _run(tree, args.large[0], args.large[1], args.pairs, args.engine)
            rounds[str(tree)].append({"small": small, "large": large})
            ratios = ", ".join(
                f"{op} {large[f'{op}_s'] / small[f'{op}_s']:.2f}x" for op in OPERATIONS
            )
            print(f"round {number}/{args.rounds}, {tree}: {ratios}", file=sys.stderr, flush=True)
        if args.out is not None:  # after each round: a run cut short keeps what it took
            args.out.write_text(json.dumps(rounds, indent=2) + "\n", encoding="utf-8")
    for tree, taken in rounds.items():
        print(f"{tree}: {growth(taken)}")


def growth(taken: list[dict[str, dict[str, float]]]) -> str:
    """Per operation, the median of the rounds' ratios (each round's ``large`` over its
    ``small``: update_stages.py's medians after the first pair), their range and a
    bootstrap 95% interval, and the bytes written at the large size."""
    parts = []
    for op in OPERATIONS:
        ratios = [r["large"][f"{op}_s"] / r["small"][f"{op}_s"] for r in taken]
        low, high = _interval(ratios)
        small = statistics.median(r["small"][f"{op}_s"] for r in taken)
        large = statistics.median(r["large"][f"{op}_s"] for r in taken)
        written = statistics.median(r["large"][f"{op}_written_mb"] for r in taken)
        part = (
            f"{op} {small:.3f} -> {large:.3f} s, {statistics.median(ratios):.2f}x"
            f" (rounds {min(ratios):.2f}-{max(ratios):.2f}, 95% {low:.2f}-{high:.2f}),"
        )
        if all(f"{op}_cpu_s" in r[size] for r in taken for size in ("small", "large")):
            cpu = [r["large"][f"{op}_cpu_s"] / r["small"][f"{op}_cpu_s"] for r in taken]
            low, high = _interval(cpu)
            small = statistics.median(r["small"][f"{op}_cpu_s"] for r in taken)
            large = statistics.median(r["large"][f"{op}_cpu_s"] for r in taken)
            part += (
                f" processor {small:.3f} -> {large:.3f} s, {statistics.median(cpu):.2f}x"
                f" (95% {low:.2f}-{high:.2f}),"
            )
        parts.append(f"{part} {written:.1f} MB written at the large size")
    return "; ".join(parts)


if __name__ == "__main__":
    main()
