"""What glibc's allocator costs an update's numpy passes, with the memory they free
kept for the next (:func:`quillian.runtime.keep_freed_memory`, as the CLI sets it up)
and as glibc starts, in processes of each kind taken in turn (docs/scale.md, stop 92).

Run ``python research/allocator.py INDEX [--rounds R] [--repeats N]``: each round runs
one process of each kind, which times, N times over the tables of the index ``INDEX``,
the stable sort of the relations' ends by entity and the relations' hop arrays
(:func:`~quillian.components.retrieval.derived.relation_hops`, what an update derives
from the graph's positions), and prints the median of each kind's per-round medians
in milliseconds, with their ratio. The whole update is measured by
``research/update_growth.py --also-system-allocator``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("kept", "system")


def _child(index: Path, kind: str, repeats: int) -> dict[str, float]:
    """The median milliseconds of each pass, in this process set up as ``kind``."""
    import numpy as np

    from quillian.components.retrieval.derived import relation_hops
    from quillian.runtime import keep_freed_memory
    from quillian.stores.snapshot import stable_order

    if kind == "kept" and not keep_freed_memory():
        raise SystemExit("this C library is not glibc: nothing to compare")
    tables = index / "tables"

    def load(name: str) -> Any:
        return np.load(tables / f"{name}.npy").astype(np.int64)

    subjects, objects = load("relation_subject"), load("relation_object")
    chunks, pages = load("relation_chunks"), load("page_entities")
    n_entities = len(np.load(tables / "entity_order.npy", mmap_mode="r"))
    ends = np.concatenate([subjects, objects])
    passes = {
        "sort of the relations' ends": lambda: stable_order(ends, n_entities),
        "relation_hops": lambda: relation_hops(
            subjects, objects, n_entities, len(pages), pages, chunks
        ),
    }
    found = {}
    for name, run in passes.items():
        run()  # the first, as in an update's process that has run others before
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        found[name] = 1000 * statistics.median(times)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="an index directory (read, not changed)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.index, args.child, args.repeats)))
        return
    taken: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for _ in range(args.rounds):
        for kind in KINDS:
            command = [sys.executable, __file__, str(args.index), "--child", kind]
            command += ["--repeats", str(args.repeats)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            taken[kind].append(json.loads(done.stdout))
    for name in taken["kept"][0]:
        kept = statistics.median(r[name] for r in taken["kept"])
        system = statistics.median(r[name] for r in taken["system"])
        print(f"{name}: {kept:.2f} ms kept, {system:.2f} ms as glibc starts ({kept / system:.2f}x)")


if __name__ == "__main__":
    main()
