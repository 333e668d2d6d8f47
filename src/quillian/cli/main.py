"""The ``quillian`` command line: a thin edge that parses flags and calls the library."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from quillian.cli.dpo import add_dpo
from quillian.cli.kg import add_kg
from quillian.cli.qa import add_ask, add_bench_qa, add_llm_index_args
from quillian.errors import QuillianError

if TYPE_CHECKING:
    from quillian.components.extraction.base import Extractor
    from quillian.index import BuildReport, Index

__all__ = ["main"]

logger = logging.getLogger("quillian")


def sample_corpus() -> Path:
    """The small corpus bundled with Quillian, for the quick start."""
    return Path(str(resources.files("quillian") / "data" / "sample"))


def _cmd_index(args: argparse.Namespace) -> int:
    from quillian.components.ingestion.readers import read_documents
    from quillian.index import build_index
    from quillian.registry import make_chunker, make_embedder, make_extractor

    paths = [sample_corpus()] if args.sample else args.paths
    if not paths:
        raise QuillianError("give a PATH to index, or --sample for the bundled corpus")
    extractor_name = "precomputed" if args.extractions else args.extractor

    # read everything first: the extractor links each document's title in the others
    documents = [doc for path in paths for doc in read_documents(path)]

    def progress(stage: str, done: int, total: int) -> None:
        if done == total or done % 500 == 0:
            print(
                f"\r{stage}: {done}/{total}",
                end="\n" if done == total else "",
                file=sys.stderr,
                flush=True,
            )

    chunker = make_chunker(args.chunker, args.chunk_size, args.overlap)
    titles = [d.title for d in documents if d.title]

    def build(extractor: Extractor) -> BuildReport:
        return build_index(
            documents,
            args.out,
            chunker=chunker,
            extractor=extractor,
            embedder=make_embedder(args.embedder),
            config={"embedder_name": args.embedder},
            on_progress=progress,
        )

    if extractor_name == "llm":
        from quillian.cli.qa import index_with_llm

        outcome = index_with_llm(args, documents, chunker, titles, build)
        if outcome is None:  # dry run or budget stop: already reported
            return 0 if args.dry_run else 1
        report = outcome
    else:
        report = build(make_extractor(extractor_name, args.extractions, titles))
    ingest = report.ingest
    if ingest is not None:
        print(
            f"documents: {ingest.new} new, {ingest.skipped} already indexed, {ingest.failed} failed"
        )
        for failure in ingest.failures:
            print(f"  failed: {failure.source or failure.doc_id}: {failure.error}")
    print("index:", ", ".join(f"{k} {v}" for k, v in report.counts.items()))
    print(f"written to {args.out}")
    return 1 if ingest is not None and ingest.failed else 0


def open_index_dir(directory: Path) -> Index:
    """Open an index with the embedder it was built with."""
    from quillian.index import open_index, read_manifest
    from quillian.registry import make_embedder

    manifest = read_manifest(directory)
    name = manifest.get("config", {}).get("embedder_name", "minilm")
    return open_index(directory, make_embedder(name))


def _cmd_retrieve(args: argparse.Namespace) -> int:
    from quillian.registry import make_bridges, make_retriever

    index = open_index_dir(args.index)
    bridges = make_bridges(args.kg, args.index)
    retriever = make_retriever(index.context, args.method, bridges=bridges)
    result = retriever.retrieve(args.question, args.k)
    if args.json:
        from dataclasses import asdict

        print(json.dumps(asdict(result), ensure_ascii=False, indent=2))
        return 0
    print(f"{result.method}: {len(result.passages)} passages for {result.query!r}")
    for rank, p in enumerate(result.passages, start=1):
        text = " ".join(p.text.split())
        print(f"{rank:2d}. [{p.score:.3f}] {p.title}: {text[:160]}")
    trace = result.trace
    if trace.seeds:
        print("seeds:", ", ".join(f"{s.name} ({s.source} {s.score:.2f})" for s in trace.seeds))
    if trace.activated:
        print("activated:", ", ".join(f"{a.name} {a.activation:.2f}" for a in trace.activated[:15]))
    for r in trace.relations[:10]:
        print(
            f"relation [{r.weight:.2f}] {r.subject} -{r.predicate}- {r.object}: "
            f"{' '.join((r.sentence or r.description).split())[:140]}"
        )
    return 0


def _cmd_bench_retrieval(args: argparse.Namespace) -> int:
    from quillian.bench.retrieval import (
        METHODS,
        BenchSettings,
        default_index_dir,
        run_retrieval_bench,
    )

    settings = BenchSettings(
        dataset=args.dataset,
        corpus=args.corpus,
        questions=args.questions,
        index_dir=args.index_dir or default_index_dir(args.dataset, args.first_n, args.extractions),
        first_n=args.first_n,
        extractions=args.extractions,
        methods=args.methods.split(",") if args.methods else METHODS,
    )
    result = run_retrieval_bench(settings, kg=args.kg)
    if args.json:
        print(json.dumps(result))
    else:
        for method, figures in result.items():
            if not method.startswith("_"):
                print(f"{method:24s}", "  ".join(f"{k} {v}" for k, v in figures.items()))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quillian", description="Knowledge-graph RAG.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("index", help="index files, folders or JSON corpora into DIR")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    p.add_argument("--sample", action="store_true", help="index the bundled sample corpus")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--chunker", default="passage", choices=("passage", "words"))
    p.add_argument("--chunk-size", type=int, default=500, help="words per chunk (words)")
    p.add_argument("--overlap", type=int, default=200, help="overlapping words (words)")
    p.add_argument("--extractor", default="spacy", choices=("spacy", "precomputed", "llm"))
    p.add_argument("--extractions", type=Path, help="JSONL of precomputed extractions")
    p.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    add_llm_index_args(p)
    p.set_defaults(func=_cmd_index)

    p = sub.add_parser("retrieve", help="retrieve passages for a question")
    p.add_argument("index", type=Path, metavar="DIR")
    p.add_argument("question")
    p.add_argument("--method", default="sa", choices=("sa", "sa-paper", "ppr", "dense", "bm25"))
    p.add_argument("-k", type=int, default=8)
    p.add_argument(
        "--kg",
        metavar="DIR+index",
        help="let SA retrieval cross into the graph DIR, linked to this index by "
        "`quillian kg link DIR --documents INDEX`",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_retrieve)

    p = sub.add_parser("bench", help="benchmarks")
    bench = p.add_subparsers(dest="bench", required=True)
    b = bench.add_parser("retrieval", help="every retriever side by side on a QA dataset")
    b.add_argument("--dataset", required=True, choices=("2wiki", "musique", "hotpotqa"))
    b.add_argument("--corpus", type=Path, required=True)
    b.add_argument("--questions", type=Path, required=True)
    b.add_argument("--first-n", type=int, help="index only the first N passages")
    b.add_argument("--extractions", type=Path, help="precomputed extractions (JSONL)")
    b.add_argument("--index-dir", type=Path, help="where to build or reuse the index")
    b.add_argument("--methods", help="comma-separated subset of methods")
    b.add_argument(
        "--kg",
        metavar="DIR+index",
        help="also run the SA methods crossing into DIR (linked by `quillian kg link`)",
    )
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_cmd_bench_retrieval)
    add_bench_qa(bench)
    add_ask(sub)
    add_kg(sub)
    add_dpo(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("bm25s").setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        code: int = args.func(args)
    except QuillianError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
