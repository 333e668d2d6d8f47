"""What replacing an update's files costs: each written beside its last version and
renamed over it (:func:`os.replace`), against the two names swapped and the old file
removed (``quillian.stores.embedded.files.replace_file``). On ext4 a file renamed over
another is written back to the disk at once (``auto_da_alloc``); a swap of names is
not (docs/scale.md, stop 91).

Run ``python research/replace_files.py --dir DIR`` (a folder on the file system to
measure; emptied of its own files at the end). Each round writes ``--files`` files
(4, 3, 2 and 1 MiB in turn: about the arrays an update at 100k passages writes) over
their last versions, ``--pause`` seconds after the last round. The two ways alternate
by blocks of ``--rounds`` rounds, not round by round: a way's cost depends on what the
last round left (a file written back at its rename is removed only once its write
ends), so each block's first round, which finds the other way's files, is left out. It
prints the median milliseconds of a round each way and every block's rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from quillian.stores.embedded.files import replace_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--pause", type=float, default=0.3)
    args = parser.parse_args()
    folder = args.dir / "replace_files"
    folder.mkdir(parents=True, exist_ok=True)
    blobs = [os.urandom((4 - i % 4) << 20) for i in range(args.files)]
    paths = [folder / f"{i}.npy" for i in range(args.files)]
    for path, blob in zip(paths, blobs, strict=True):
        path.write_bytes(blob)
    os.sync()
    ways: dict[str, Callable[[Path, Path], None]] = {
        "os.replace": os.replace,
        "replace_file": replace_file,
    }
    blocks: dict[str, list[list[float]]] = {name: [] for name in ways}
    try:
        for b in range(2 * args.blocks):
            name = list(ways)[b % 2]
            taken: list[float] = []
            for _ in range(args.rounds):
                time.sleep(args.pause)
                start = time.perf_counter()
                for path, blob in zip(paths, blobs, strict=True):
                    tmp = path.with_name(path.name + ".tmp")
                    with tmp.open("wb") as out:
                        out.write(blob)
                    ways[name](tmp, path)
                taken.append(round(1000 * (time.perf_counter() - start), 1))
            blocks[name].append(taken)
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    megabytes = sum(len(b) for b in blobs) / (1 << 20)
    print(
        json.dumps(
            {
                "megabytes_a_round": megabytes,
                "median_ms": {
                    n: statistics.median(t for block in v for t in block[1:])
                    for n, v in blocks.items()
                },
                "blocks_ms": blocks,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
