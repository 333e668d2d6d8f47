"""Benchmark the link part of adding one document and deleting one: from scratch
(today's, linear in the corpus) against incremental (:mod:`quillian.index.linking`),
side by side in one run, on the same index.

Run ``python research/link_updates.py --corpus scale-2k.jsonl --work WORK
[--repeats N]`` (the corpus from ``research/scale_corpus.py``). It builds (or
reuses) a base index of the corpus less its last passage in ``WORK`` with the spaCy
extractor and the keyword embedder (the embedder does not matter to linking). Then,
``--repeats`` times for each operation, on a fresh copy of the base:

1. the operation through the engine (``index_documents`` of the last passage, or
   ``delete_documents`` of the first document): the build's own link part, which is
   the incremental one (``BuildReport.link_seconds``: reading the stored state, the
   candidates, linking, settling and filtering the touched chunks, writing the
   state), and how many chunks it linked;
2. on the index the operation left, today's from-scratch link part over the same
   chunks: the stored mentions read (``extract_cached``), linked and settled
   (``linked_extractions``) and filtered (``drop_ambiguous_names``), each timed;
3. the incremental call again with nothing changed, and a check that its extractions
   equal the from-scratch ones.

It prints one JSON object (medians and every run) with the machine's load before and
after, and writes it to ``WORK/link_updates.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from quillian.components.extraction.filters import drop_ambiguous_names
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.ingestion.readers import read_documents
from quillian.engine import IndexSettings, delete_documents, index_documents
from quillian.index import open_storage
from quillian.index.build import extract_cached, processed_chunks
from quillian.index.linking import link_corpus, linked_extractions
from quillian.index.stages import AMBIGUOUS_MAX_DOCS
from quillian.types import Document

__all__ = ["main"]

SETTINGS = IndexSettings(extractor="spacy", embedder="keyword")


def _base(corpus: list[Document], work: Path) -> Path:
    """The base index (all but the last document), built once and reused."""
    base = work / "base"
    if not (base / ".complete").exists():
        shutil.rmtree(base, ignore_errors=True)
        start = time.perf_counter()
        index_documents(base, corpus[:-1], SETTINGS)
        (base / ".complete").write_text(f"{time.perf_counter() - start:.1f}\n")
    return base


def _from_scratch(location: Path) -> dict[str, Any]:
    """Today's link part over the index's chunks, timed by part, and whether the
    incremental state (called again, nothing changed) gives the same extractions."""
    extractor = SpacyExtractor()
    with open_storage(location) as storage:
        chunks = processed_chunks(storage)
        t0 = time.perf_counter()
        stored = extract_cached(chunks, extractor, storage.kv)
        t1 = time.perf_counter()
        settled = linked_extractions(chunks, extractor, stored)
        t2 = time.perf_counter()
        filtered = drop_ambiguous_names(settled, max_docs=AMBIGUOUS_MAX_DOCS)
        t3 = time.perf_counter()
        again = link_corpus(
            storage.kv,
            chunks,
            SpacyExtractor(),
            lambda some: extract_cached(some, extractor, storage.kv),
            max_docs=AMBIGUOUS_MAX_DOCS,
            bm25=storage.directory / "bm25",
        )
        t4 = time.perf_counter()
    return {
        "chunks": len(chunks),
        "read_s": t1 - t0,
        "link_settle_s": t2 - t1,
        "filter_s": t3 - t2,
        "total_s": t3 - t0,
        "unchanged_incremental_s": t4 - t3,
        "equal": again.extractions == settled and again.filtered == filtered,
    }


def _operation(op: str, corpus: list[Document], base: Path, work: Path, n: int) -> dict[str, Any]:
    copy = work / f"copy-{op}-{n}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(base, copy, symlinks=True)
    start = time.perf_counter()
    if op == "add":
        report = index_documents(copy, corpus[-1:], SETTINGS)
    else:
        report = delete_documents(copy, [corpus[0].id])
    seconds = time.perf_counter() - start
    out = {
        "incremental_link_s": report.link_seconds,
        "relinked": report.relinked,
        "operation_s": seconds,
        "stages_s": report.seconds,
        "scratch": _from_scratch(copy),
    }
    shutil.rmtree(copy, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a scale-*.jsonl file")
    parser.add_argument("--work", type=Path, default=Path("link-updates-work"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = list(read_documents(args.corpus))
    result: dict[str, Any] = {"corpus": str(args.corpus), "documents": len(corpus)}
    result["load_before"] = os.getloadavg()
    result["cpus"] = os.cpu_count()
    base = _base(corpus, args.work)
    result["base_build_s"] = float((base / ".complete").read_text())
    for op in ("add", "delete"):
        runs = [_operation(op, corpus, base, args.work, n) for n in range(args.repeats)]
        result[op] = {
            "incremental_link_s_median": statistics.median(r["incremental_link_s"] for r in runs),
            "scratch_link_s_median": statistics.median(r["scratch"]["total_s"] for r in runs),
            "relinked": [r["relinked"] for r in runs],
            "all_equal": all(r["scratch"]["equal"] for r in runs),
            "runs": runs,
        }
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    (args.work / "link_updates.json").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
