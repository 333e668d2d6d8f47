"""The hashes a file record could carry, side by side in one run (stores/integrity.py).

Run ``python research/file_hashes.py [FILE...]``: hashes 64 MiB of random bytes in
memory with XXH3-128 (the records' hash), BLAKE2b (the records' hash before), SHA-256
and zlib's CRC-32, best of five each, then each FILE read whole the way
:func:`~quillian.stores.integrity.file_digest` reads it (1 MiB blocks, from the page
cache after a first read), once per hash. Prints one JSON object: GB/s by hash, and
seconds by file and hash.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import xxhash

from quillian.stores import integrity

_BLOCK = 1 << 20
HASHES: dict[str, Callable[[bytes], object]] = {
    "xxh3_128": lambda b: xxhash.xxh3_128_hexdigest(b),
    "blake2b": lambda b: hashlib.blake2b(b, digest_size=16).hexdigest(),
    "sha256": lambda b: hashlib.sha256(b).hexdigest(),
    "crc32": zlib.crc32,
}


def _best(run: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="files to hash whole")
    args = parser.parse_args()
    data = os.urandom(64 << 20)
    report: dict[str, object] = {
        "memory_gb_s": {
            name: round(len(data) / _best(functools.partial(h, data)) / 1e9, 2)
            for name, h in HASHES.items()
        },
        "load": os.getloadavg(),
    }
    files = {}
    for path in args.files:
        path.read_bytes()  # into the page cache
        files[str(path)] = {
            "bytes": path.stat().st_size,
            **{
                name: round(_best(functools.partial(integrity.file_digest, path, name), 3), 4)
                for name in integrity.HASHES
            },
        }
    report["files_s"] = files
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
