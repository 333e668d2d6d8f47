"""The sorts an update makes of every row, timed against what they replaced.

``stable_order`` (``quillian.stores.snapshot``) groups positions by keys over 16 bits
(the relations' ends by entity at 100k passages: 353k keys under 126k entities) by
packing each key with its position into one 64-bit integer and sorting those with
numpy's unstable sort, where it took two radix passes of 16 bits; ``check_distinct``
(``quillian.components.retrieval.keyed``) sorts the chunks' keys to find two equal ones
and orders them only then. This script times each way on random keys of those sizes
(best of ``--repeats``), checks they agree, and prints one JSON object (milliseconds).

Run ``python research/sort_paths.py [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.stores.snapshot import stable_order

#: (keys, bound) as at 100k passages: the relations' ends by entity, the pages by entity,
#: the descriptions by entity.
GROUPINGS = {
    "relation ends by entity": (353_000, 126_000),
    "pages by entity": (100_000, 126_000),
    "descriptions by entity": (185_000, 126_000),
}
CHUNK_KEYS = 100_000


def best_ms(call: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - start)
    return round(best * 1e3, 3), out


def two_radix_passes(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """What ``stable_order`` did over 16 bits before stop 86."""
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    high = (keys[order] >> 16).astype(np.uint16)
    return order[np.argsort(high, kind="stable")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(86)
    report: dict[str, Any] = {"numpy": np.__version__}
    for name, (n, bound) in GROUPINGS.items():
        keys = rng.integers(0, bound, n).astype(np.int64)
        packed, got = best_ms(functools.partial(stable_order, keys, bound), args.repeats)
        radix, want = best_ms(functools.partial(two_radix_passes, keys), args.repeats)
        numpy_stable, _ = best_ms(functools.partial(np.argsort, keys, kind="stable"), args.repeats)
        report[name] = {
            "keys": n,
            "bound": bound,
            "packed_sort_ms": packed,
            "two_radix_passes_ms": radix,
            "numpy_stable_ms": numpy_stable,
            "same": bool(np.array_equal(got, want)),
        }
    keys = rng.integers(0, 1 << 62, CHUNK_KEYS)
    sorted_ms, _ = best_ms(lambda: np.sort(keys), args.repeats)
    order_ms, _ = best_ms(lambda: np.argsort(keys), args.repeats)
    report["chunk keys, any two equal"] = {
        "keys": CHUNK_KEYS,
        "sort_ms": sorted_ms,
        "argsort_ms": order_ms,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
