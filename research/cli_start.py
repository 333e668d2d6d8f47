"""What a CLI call pays before it does anything: the import of ``quillian.cli.main`` in
a fresh interpreter, source trees side by side in one run.

Run ``python research/cli_start.py TREE... [--repeats N]``: for each repeat, each
TREE in turn (its ``src/`` on ``PYTHONPATH``) imports the CLI in a new process, timed
inside it, and reports whether numba was imported. Prints per tree the median and range
of the import's seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_PROBE = (
    "import json, sys, time; t = time.perf_counter(); import quillian.cli.main;"
    " print(json.dumps({'s': time.perf_counter() - t, 'numba': 'numba' in sys.modules}))"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="source trees (their src/ is used)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runs: dict[Path, list[dict[str, object]]] = {t: [] for t in args.trees}
    for _ in range(args.repeats):
        for tree in args.trees:
            env = {**os.environ, "PYTHONPATH": str(tree / "src")}
            done = subprocess.run(
                [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
            )
            runs[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for tree, results in runs.items():
        seconds = [float(str(r["s"])) for r in results]
        numba = {bool(r["numba"]) for r in results}
        print(
            f"{tree}: {statistics.median(seconds):.2f} s ({min(seconds):.2f}-{max(seconds):.2f}),"
            f" numba imported: {'yes' if numba == {True} else 'no' if numba == {False} else numba}"
        )


if __name__ == "__main__":
    main()
