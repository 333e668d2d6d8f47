"""What one pass of an update's carry costs per row at the two index sizes the growth
target compares, on this machine (docs/scale.md, stop 95).

An update of the folder index carries its rows by numpy passes over every row: each
row's new place gathered through an array of moves, each row's text rank through the
texts' new ranks (``distinct_texts.carried``, ``GraphPositions.carried``). At 20k
passages those arrays are about 0.6 MB; at 100k about 3 MB, past a core's share of the
L2 cache of the machine stop 95 measured on, so a pass over 5x the rows costs
more than 5x. Run ``python research/gather_sizes.py``: for the row and text counts of the
scale corpus's 20k and 100k bases (descriptions plus relations, and distinct texts,
from their manifests), it times a gather of random ranks through a table of new ranks
(``moved[rows]``, rows mostly in order, as a carry's are) in 64 and 32 bits, a
sequential copy, and prints nanoseconds a row and the ratio of the large size's pass to
the small one's. ``--sizes ROWS:TABLE,...`` times other sizes.
"""

from __future__ import annotations

import argparse
import json
import timeit

import numpy as np

#: (rows, table) of the 20k and 100k bases: descriptions plus relations (their
#: manifests' counts), and distinct texts (``tables/text_keys.npy``'s length).
SIZES = ((69_151, 24_032), (361_756, 120_225))


def _timed(call: object, number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=5)) / number  # type: ignore[arg-type]


def measure(rows: int, table: int, seed: int = 0) -> dict[str, float]:
    """Seconds of one pass of each kind over ``rows`` rows into a table of ``table``."""
    rng = np.random.default_rng(seed)
    ranks = np.sort(rng.integers(0, table, rows))
    shuffled = rng.permutation(rows)[: rows // 2]  # half the rows in no order
    ranks[np.sort(shuffled)] = ranks[shuffled]
    moved = rng.permutation(table).astype(np.int64)
    moved32 = moved.astype(np.int32)
    column = rng.integers(0, 1 << 40, rows)
    number = max(10, 20_000_000 // rows)
    return {
        "gather_64": _timed(lambda: moved[ranks], number),
        "gather_32": _timed(lambda: moved32[ranks], number),
        "copy": _timed(lambda: column.copy(), number),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", help="ROWS:TABLE pairs, comma-separated (default: the two bases)"
    )
    args = parser.parse_args()
    sizes = (
        [tuple(int(v) for v in pair.split(":")) for pair in args.sizes.split(",")]
        if args.sizes
        else list(SIZES)
    )
    found = {f"{rows}:{table}": measure(rows, table) for rows, table in sizes}
    out: dict[str, object] = {
        key: {name: round(seconds / int(key.split(":")[0]) * 1e9, 3) for name, seconds in t.items()}
        for key, t in found.items()
    }
    keys = list(found)
    if len(keys) >= 2:
        small, large = found[keys[0]], found[keys[-1]]
        rows_ratio = int(keys[-1].split(":")[0]) / int(keys[0].split(":")[0])
        out["rows_ratio"] = round(rows_ratio, 2)
        out["pass_ratio"] = {name: round(large[name] / small[name], 2) for name in small}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
