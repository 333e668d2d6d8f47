"""The graph snapshot's id map made three ways from one index's node ids, side by side in
one run (stores/snapshot.py, docs/scale.md "The node-id map from bytes").

Run ``python research/id_maps.py INDEX``: reads the node ids of the index's snapshot
(``INDEX/graph``) in position order, then times, best of five each,

* ``decoded_from_ids``: the entities' and descriptions' ids decoded from bytes to
  strings, then :meth:`IdMap.from_ids` (what the graph stage did before ``63ff234``);
* ``from_ids``: :meth:`IdMap.from_ids` of the ids already strings;
* ``from_bytes_sorted``: :meth:`IdMap.from_bytes` of the ids as one fixed-width bytes
  array, sorted as bytes (the fallback for ids of any form);
* ``from_bytes_parts``: :meth:`IdMap.from_bytes` of the entities', descriptions' and
  chunks' ids as three arrays (what the graph stage gives it), ordered by their
  digits' numbers where they are of ``stable_id``'s form;

and checks that all three give the same map. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from quillian.stores.snapshot import GraphSnapshot, IdMap, NodeKind


def _best(run: Callable[[], IdMap], repeats: int = 5) -> tuple[float, IdMap]:
    times, made = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        made = run()
        times.append(time.perf_counter() - start)
    assert made is not None
    return min(times), made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="an index directory (read only)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    snapshot = GraphSnapshot.load(args.index / "graph")
    ids = snapshot.ids.ids_of(range(snapshot.n_nodes))
    kinds = np.asarray(snapshot.kinds)
    parts = [
        np.array([ids[i].encode() for i in np.flatnonzero(kinds == kind)], dtype=np.bytes_)
        for kind in (NodeKind.ENTITY, NodeKind.DESCRIPTION, NodeKind.CHUNK)
    ]
    if [i.encode() for i in ids] != [i for p in parts for i in p.tolist()]:
        raise SystemExit("the snapshot's nodes are not entities, then descriptions, then chunks")
    joined = np.concatenate(parts)
    chunk_ids = ids[len(parts[0]) + len(parts[1]) :]

    def decoded() -> IdMap:
        return IdMap.from_ids(
            [*parts[0].astype(np.str_).tolist(), *parts[1].astype(np.str_).tolist(), *chunk_ids]
        )

    ways: dict[str, Callable[[], IdMap]] = {
        "decoded_from_ids": decoded,
        "from_ids": lambda: IdMap.from_ids(ids),
        "from_bytes_sorted": lambda: IdMap.from_bytes(joined),
        "from_bytes_parts": lambda: IdMap.from_bytes(*parts),
    }
    seconds, maps = {}, {}
    for name, way in ways.items():
        seconds[name], maps[name] = _best(way, args.repeats)
    first = maps["from_ids"]
    same = all(
        np.array_equal(getattr(m, field), getattr(first, field))
        for m in maps.values()
        for field in ("_blob", "_offsets", "_order")
    )
    out = {
        "nodes": len(ids),
        "by_kind": [len(p) for p in parts],
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "same_map": same,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
