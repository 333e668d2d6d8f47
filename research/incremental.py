"""Benchmark incremental indexing on a real corpus: two halves against one build.

Run ``python research/incremental.py CORPUS.json [--questions Q.jsonl]``. It
indexes the corpus with the spaCy extractor and the keyword embedder twice: at once,
and in two runs of half the documents each (the second half's titles are mentioned by
the first's passages, which is what a cached per-chunk link used to miss). It prints
one JSON object: each build's seconds per stage, the time the rebuild spends linking
the stored mentions (:func:`~quillian.index.build.linked_extractions`, paid at every
rebuild and delete), then a delete of one document, and whether the two indexes agree
on their graph tables and on the top-5 passages of ``sa``, ``ppr``, ``dense`` and
``bm25`` for the questions, with the size of each difference. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.factories import make_retriever
from quillian.components.ingestion.readers import read_documents
from quillian.engine import IndexSettings, delete_documents, index_documents
from quillian.index import open_index, open_storage
from quillian.index.build import extract_cached, linked_extractions, processed_chunks

__all__ = ["main"]

logger = logging.getLogger(__name__)

METHODS = ("sa", "ppr", "dense", "bm25")
SETTINGS = IndexSettings(extractor="spacy", embedder="keyword")


def _summary(location: Path, questions: list[str]) -> dict[str, Any]:
    """The graph tables and retrieval results two equal indexes share."""
    index = open_index(location, KeywordEmbedder())
    kg = index.context.kg
    return {
        "entities": sorted((e.node_id, e.name, tuple(e.aliases)) for e in kg.entities),
        "descriptions": sorted(
            (kg.entities[d.entity].node_id, d.chunk_id, d.text) for d in kg.descriptions
        ),
        "relations": sorted(r.id for r in kg.relations),
        "edges": kg.snapshot.n_edges,
        "results": [
            [p.chunk_id for p in make_retriever(index.context, m).retrieve(q, 5).passages]
            for m in METHODS
            for q in questions
        ],
    }


def _differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, int]:
    """Per part, how many items one summary holds that the other does not (results:
    how many method and question pairs rank other passages)."""
    diff = {"edges": abs(a["edges"] - b["edges"])}
    for part in ("entities", "descriptions", "relations"):
        diff[part] = len(set(a[part]) ^ set(b[part]))
    diff["results"] = sum(x != y for x, y in zip(a["results"], b["results"], strict=True))
    return diff


def _link_seconds(location: Path) -> float:
    with open_storage(location) as storage:
        chunks = processed_chunks(storage)
        extractor = SpacyExtractor()
        stored = extract_cached(chunks, extractor, storage.kv)
        start = time.perf_counter()
        linked_extractions(chunks, extractor, stored)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, help="JSONL with a 'question' field")
    parser.add_argument("--n-questions", type=int, default=50)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    docs = list(read_documents(args.corpus))
    questions = [d.title for d in docs[:: max(1, len(docs) // args.n_questions)]]
    if args.questions:
        lines = [
            line for line in args.questions.read_text(encoding="utf-8").split("\n") if line.strip()
        ]
        questions = [json.loads(line)["question"] for line in lines[: args.n_questions]]
    half = len(docs) // 2
    out: dict[str, Any] = {"documents": len(docs), "questions": len(questions)}
    with tempfile.TemporaryDirectory() as tmp:
        once, halves = Path(tmp) / "once", Path(tmp) / "halves"
        start = time.perf_counter()
        report = index_documents(once, docs, SETTINGS)
        out["once"] = {"seconds": time.perf_counter() - start, "stages": report.seconds}
        out["halves"] = []
        for part in (docs[:half], docs[half:]):
            start = time.perf_counter()
            report = index_documents(halves, part, SETTINGS)
            out["halves"].append({"seconds": time.perf_counter() - start, **report.seconds})
        out["link_seconds"] = _link_seconds(once)
        a, b = _summary(once, questions), _summary(halves, questions)
        out["halves_equal_once"] = a == b
        out["differences"] = _differences(a, b)
        start = time.perf_counter()
        delete_documents(once, [docs[0].id])
        out["delete_one_seconds"] = time.perf_counter() - start
    print(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
