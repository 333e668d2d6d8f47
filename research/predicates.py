"""What naming links by the dependency parse costs and gives, and retrieval paired.

    python research/predicates.py --corpus ../shared/bench/2wiki/corpus.json \\
        --first-n 600 --rounds 3 --json
    python research/predicates.py --paired BEFORE.json AFTER.json --json

The first form runs the spaCy extractor's per-chunk step on the same passages with NER
alone (``predicates=False``, the extractor before predicates) and with the parser
(the default), alternating the two ``--rounds`` times in one process so both see the
same machine load, and reports each arm's chunks per second (its best round and the
median), the ratio, the stored record's size per chunk, the time :meth:`link` takes,
and what the predicates are: the share of links named, the distinct predicates and the
most frequent ones. The load average is read before and after.

The second form compares two ``quillian bench retrieval --json`` outputs on the same
questions (before and after a change), method by method and metric by metric, with
:func:`~quillian.eval.stats.paired` (mean difference, bootstrap interval, sign-flip
p-value, wins and losses).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from quillian.components.extraction.assemble import RELATED_TO
from quillian.components.extraction.base import Extraction
from quillian.components.extraction.serde import extraction_to_json
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.ingestion.readers import read_documents
from quillian.errors import InputError
from quillian.eval.stats import paired
from quillian.types import Chunk

__all__ = ["compare_runs", "main", "measure_extraction"]

ARMS = {"ner": False, "ner+parser": True}


def measure_extraction(chunks: Sequence[Chunk], rounds: int) -> dict[str, Any]:
    """Both arms on ``chunks``, alternated ``rounds`` times (each model loaded first)."""
    titles = [c.title for c in chunks if c.title]
    extractors = {
        arm: SpacyExtractor(corpus_titles=titles, predicates=on) for arm, on in ARMS.items()
    }
    for extractor in extractors.values():
        extractor.extract_local(chunks[:2])  # loads the model outside the timing
    seconds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    local: dict[str, list[Extraction]] = {}
    for _ in range(rounds):
        for arm, extractor in extractors.items():
            start = time.perf_counter()
            local[arm] = extractor.extract_local(chunks)
            seconds[arm].append(time.perf_counter() - start)
    out: dict[str, Any] = {}
    for arm, extractor in extractors.items():
        start = time.perf_counter()
        linked = extractor.link(chunks, local[arm], titles)
        link_s = time.perf_counter() - start
        out[arm] = {
            "chunks_per_s_best": round(len(chunks) / min(seconds[arm]), 1),
            "chunks_per_s_median": round(len(chunks) / statistics.median(seconds[arm]), 1),
            "seconds": [round(s, 2) for s in seconds[arm]],
            "stored_bytes_per_chunk": round(
                sum(len(extraction_to_json(e)) for e in local[arm]) / len(chunks)
            ),
            "link_s": round(link_s, 2),
            **_predicates(linked),
        }
    out["parser_over_ner_time"] = round(
        statistics.median(seconds["ner+parser"]) / statistics.median(seconds["ner"]), 2
    )
    return out


def _predicates(linked: Sequence[Extraction]) -> dict[str, Any]:
    counts = Counter(t.predicate for e in linked for t in e.triples)
    total = sum(counts.values())
    named = total - counts[RELATED_TO]
    return {
        "links": total,
        "named_share": round(named / total, 4) if total else 0.0,
        "distinct_predicates": len(counts) - (RELATED_TO in counts),
        "top_predicates": [[p, n] for p, n in counts.most_common(16) if p != RELATED_TO][:15],
    }


def compare_runs(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """``after`` minus ``before`` per method and metric, question by question (the
    peers' recorded lists, the same in both runs, left out)."""
    for label, run in (("before", before), ("after", after)):
        if "_per_question" not in run:
            raise InputError(f"the {label} run has no _per_question scores (bench retrieval)")
    a, b = after["_per_question"], before["_per_question"]
    if a.get("ids") != b.get("ids"):
        raise InputError("the two runs scored different questions")
    out: dict[str, Any] = {}
    for method in sorted(m for m in set(a) & set(b) if m != "ids" and not m.startswith("peer:")):
        out[method] = {
            metric: {
                "before": round(sum(b[method][metric]) / len(b[method][metric]), 4),
                "after": round(sum(a[method][metric]) / len(a[method][metric]), 4),
                **paired(a[method][metric], b[method][metric]).as_dict(),
            }
            for metric in a[method]
            if metric in b[method] and len(a[method][metric]) == len(b[method][metric])
        }
    return out


def _chunks(corpus: Path, first_n: int) -> list[Chunk]:
    docs = list(islice(read_documents(corpus), first_n))
    if not docs:
        raise InputError(f"{corpus} holds no passages")
    return [Chunk(d.id, 0, d.text, 0, len(d.text), d.title) for d in docs]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, help="passages (JSON) to extract")
    parser.add_argument("--first-n", type=int, default=600, help="passages to extract")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the arms")
    parser.add_argument("--paired", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    if args.paired:
        before, after = (json.loads(p.read_text()) for p in args.paired)
        result: dict[str, Any] = compare_runs(before, after)
    elif args.corpus:
        chunks = _chunks(args.corpus, args.first_n)
        result = {"passages": len(chunks), "rounds": args.rounds}
        result |= measure_extraction(chunks, max(1, args.rounds))
        result["load_before"] = [round(x, 2) for x in load_before]
        result["load_after"] = [round(x, 2) for x in os.getloadavg()]
        result["cpus"] = os.cpu_count()
    else:
        parser.error("give --corpus or --paired")
    sys.stdout.write(json.dumps(result, indent=None if args.json else 2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
