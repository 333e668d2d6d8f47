"""``quillian ask`` and ``quillian bench qa``: question answering from the command line.

The API key is read here, at the edge: ``QUILLIAN_LLM_API_KEY``, else ``OPENAI_API_KEY``.
LLM responses are cached in ``QUILLIAN_LLM_CACHE`` (default
``~/.cache/quillian/llm-responses.sqlite``), so a rerun repeats no call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "add_ask",
    "add_bench_qa",
    "add_llm_index_args",
    "index_with_llm",
    "llm_args",
    "options_of",
    "prompts_of",
    "session_of",
]


def _cache_path(args: argparse.Namespace) -> Path | None:
    if args.no_cache:
        return None
    if args.cache:
        return Path(args.cache)
    default = Path.home() / ".cache" / "quillian" / "llm-responses.sqlite"
    return Path(os.environ.get("QUILLIAN_LLM_CACHE", default))


def session_of(args: argparse.Namespace, concurrency: int = 4) -> Any:
    """The LLM session ``--llm`` names, with the response cache the flags select."""
    from quillian.components.llm.spec import LLMSession

    key = os.environ.get("QUILLIAN_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY", "")
    return LLMSession(args.llm, api_key=key, cache_path=_cache_path(args), concurrency=concurrency)


def prompts_of(args: argparse.Namespace) -> Any:
    """The default prompts with the ``--prompts`` overrides applied."""
    from quillian.components.prompts import default_registry

    prompts = default_registry()
    for path in args.prompts or ():
        prompts.override_from_file(path)
    return prompts


def options_of(pairs: list[str] | None) -> dict[str, Any]:
    """``key=value`` method options; values are read as JSON when they parse."""
    from quillian.errors import ConfigError

    options: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"method option {pair!r} must look like key=value")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def llm_args(p: argparse.ArgumentParser) -> None:
    """The flags of every command that runs a method with an LLM."""
    p.add_argument(
        "--llm",
        default="local",
        metavar="SPEC",
        help="local | local:/path.gguf | openai:MODEL | http://host:port/v1#MODEL "
        "| scripted:routes.json (default: local)",
    )
    p.add_argument("--retriever", choices=("sa", "sa-paper", "ppr", "dense", "bm25"))
    p.add_argument(
        "--kg",
        metavar="SPEC",
        help="knowledge graph of the KG-Infused methods: index, index+inverse, a "
        "directory written by `quillian kg import`, or DIR+index (both, joined by "
        "`quillian kg link`; SA retrieval then also crosses into DIR)",
    )
    p.add_argument(
        "--option", action="append", metavar="KEY=VALUE", help="method option, e.g. k=10"
    )
    p.add_argument("--prompts", action="append", type=Path, metavar="FILE", help="overrides")
    p.add_argument("--cache", type=Path, metavar="FILE", help="LLM response cache")
    p.add_argument("--no-cache", action="store_true", help="do not cache LLM responses")
    p.add_argument("--json", action="store_true")


def _print_answer(result: Any, trace: bool) -> None:
    print(f"answer: {result.answer or '(none)'}")
    if result.error:
        print(f"failed: {result.error}")
    for i, p in enumerate(result.evidence.passages, start=1):
        print(f"  [{i}] {p.title}: {' '.join(p.text.split())[:140]}")
    for r in result.evidence.relations:
        sentence = " ".join((r.sentence or r.description).split())[:140]
        print(f"  relation: {r.subject} - {r.predicate} - {r.object}  ({sentence})")
    usage = result.transcript.usage
    print(
        f"{len(result.transcript.calls)} LLM calls, {usage.prompt_tokens} prompt + "
        f"{usage.completion_tokens} completion tokens, {result.transcript.parse_failures} "
        f"parse failures, {result.seconds:.1f} s"
    )
    if trace:
        for step in result.steps:
            print(_format_step(step))


def _format_step(step: dict[str, Any]) -> str:
    """One pipeline step for ``--trace``; KG-Infused activation steps read as the paper's
    stages (rounds, selected triples, summary, expanded query)."""
    if "kg_seeds" in step:
        seeds = ", ".join(f"{s['entity']} ({s['score']:.2f})" for s in step["kg_seeds"])
        return f"  kg seeds: {seeds}"
    if "kg_round" in step:
        lines = [
            f"  kg round {step['kg_round']}: {', '.join(step.get('entities', []))} "
            f"({step.get('candidates', 0)} candidate triples)"
        ]
        lines += [f"    selected {t}" for t in step.get("selected", [])]
        if step.get("next_entities"):
            lines.append(f"    next: {', '.join(step['next_entities'])}")
        return "\n".join(lines)
    if "kg_summary" in step:
        return f"  kg summary: {step['kg_summary']}"
    if "expanded_query" in step:
        return f"  expanded query: {step['expanded_query']}"
    return "  step: " + json.dumps(step, ensure_ascii=False)[:400]


def _cmd_ask(args: argparse.Namespace) -> int:
    from quillian.cli.main import open_index_dir
    from quillian.components.llm.tasks import TaskRunner
    from quillian.registry import (
        METHODS,
        SA_RETRIEVERS,
        GraphSpec,
        make_bridges,
        make_graph,
        make_pipeline,
        make_retriever,
    )

    retriever_name = args.retriever or METHODS.get(args.method)
    retriever, context = None, None
    if retriever_name or (args.kg and GraphSpec.parse(args.kg).documents):
        context = open_index_dir(args.index).context
    if retriever_name:
        assert context is not None
        bridges = make_bridges(args.kg, args.index) if retriever_name in SA_RETRIEVERS else None
        retriever = make_retriever(context, retriever_name, bridges=bridges)
    graph = make_graph(args.kg, context, args.index) if args.kg else None
    prompts = prompts_of(args)

    async def ask() -> Any:
        async with session_of(args) as session:
            runner = TaskRunner(session.model, prompts)
            pipeline = make_pipeline(
                args.method, runner, retriever, graph=graph, **options_of(args.option)
            )
            return await pipeline.answer(args.question)

    result = asyncio.run(ask())
    if args.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False, indent=2))
    else:
        _print_answer(result, args.trace)
    return 0 if not result.error else 1


def add_ask(sub: Any) -> None:
    from quillian.registry import METHOD_ALIASES, METHODS

    p = sub.add_parser("ask", help="answer a question over an index with an LLM")
    p.add_argument("index", type=Path, metavar="DIR")
    p.add_argument("question")
    p.add_argument(
        "--method",
        default="sa-rag",
        choices=(*METHODS, *METHOD_ALIASES),
        type=lambda name: METHOD_ALIASES.get(name, name),
    )
    p.add_argument("--trace", action="store_true", help="show the pipeline's steps")
    llm_args(p)
    p.set_defaults(func=_cmd_ask)


def _cmd_bench_qa(args: argparse.Namespace) -> int:
    from quillian.bench.qa import QASettings, run_qa_bench, summary_table
    from quillian.bench.retrieval import BenchSettings, default_index_dir
    from quillian.errors import ConfigError
    from quillian.registry import METHOD_ALIASES, METHODS

    methods = [METHOD_ALIASES.get(m, m) for m in args.method.split(",")]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ConfigError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    settings = QASettings(
        index=BenchSettings(
            dataset=args.dataset,
            corpus=args.corpus,
            questions=args.questions,
            index_dir=args.index_dir or default_index_dir(args.dataset, None, args.extractions),
            extractions=args.extractions,
            embedder=args.embedder,
        ),
        methods=methods,
        out=args.out,
        limit=args.limit,
        retriever=args.retriever,
        concurrency=args.concurrency,
        options=options_of(args.option),
        command=shlex.join(["quillian", *sys.argv[1:]]),
        kg=args.kg,
    )
    prompts = prompts_of(args)

    def progress(done: int, total: int) -> None:
        print(f"\r{done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    async def bench() -> dict[str, Any]:
        async with session_of(args, concurrency=args.concurrency) as session:
            return await run_qa_bench(settings, session, prompts, progress)

    result = asyncio.run(bench())
    if args.json:
        print(json.dumps(result["methods"]))
    else:
        print(summary_table(result))
        print(f"written to {args.out}")
    return 0


def add_bench_qa(bench: Any) -> None:
    b = bench.add_parser("qa", help="question answering: methods side by side with one LLM")
    b.add_argument("--dataset", required=True, choices=("2wiki", "musique", "hotpotqa"))
    b.add_argument("--corpus", type=Path, required=True)
    b.add_argument("--questions", type=Path, required=True)
    b.add_argument("--method", required=True, help="a method or a comma-separated list")
    b.add_argument("--limit", type=int, help="only the first N questions")
    b.add_argument("--out", type=Path, required=True, metavar="DIR")
    b.add_argument("--index-dir", type=Path, help="where to build or reuse the index")
    b.add_argument("--extractions", type=Path, help="precomputed extractions (JSONL)")
    b.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    b.add_argument("--concurrency", type=int, default=1, help="questions in flight")
    llm_args(b)
    b.set_defaults(func=_cmd_bench_qa)


def add_llm_index_args(p: argparse.ArgumentParser) -> None:
    """Flags of ``quillian index --extractor llm``."""
    p.add_argument("--llm", default="local", metavar="SPEC", help="LLM for --extractor llm")
    p.add_argument("--dry-run", action="store_true", help="estimate LLM calls and tokens only")
    p.add_argument("--budget-tokens", type=int, metavar="N", help="stop after about N tokens")
    p.add_argument("--budget-calls", type=int, metavar="N", help="stop after about N calls")
    p.add_argument("--prompts", action="append", type=Path, metavar="FILE", help="overrides")
    p.add_argument("--cache", type=Path, metavar="FILE", help="LLM response cache")
    p.add_argument("--no-cache", action="store_true", help="do not cache LLM responses")


def index_with_llm(
    args: argparse.Namespace,
    documents: Any,
    chunker: Any,
    titles: list[str],
    build: Callable[[Any], Any],
) -> Any:
    """Index with LLM extraction. A dry run prints the estimate; a budget stop prints
    what was done and how to resume. Both return None; otherwise the build report."""
    from quillian.components.extraction.llm import LLMExtractor
    from quillian.components.extraction.llm_budget import ExtractionBudget, estimate_extraction
    from quillian.components.llm.tasks import TaskRunner
    from quillian.errors import BudgetExhausted

    prompts = prompts_of(args)
    if args.dry_run:
        chunks = [c for d in documents for c in chunker.chunk(d)]
        print(json.dumps(estimate_extraction(chunks, prompts), indent=2))
        return None
    budget = None
    if args.budget_tokens or args.budget_calls:
        budget = ExtractionBudget(max_calls=args.budget_calls, max_tokens=args.budget_tokens)
    session = session_of(args)
    runner = TaskRunner(session.model, prompts)
    extractor = LLMExtractor(runner, budget=budget, corpus_titles=titles)

    async def run() -> Any:
        async with session:
            return await asyncio.to_thread(build, extractor)

    try:
        return asyncio.run(run())
    except BudgetExhausted as exc:
        print(f"{exc}\n{args.out} is incomplete; rerun to resume", file=sys.stderr)
        return None
    finally:
        print(extractor.report.summary(), file=sys.stderr)
        for failure in extractor.failures[:20]:
            print(f"  unusable {failure.stage} output for {failure.chunk_id}", file=sys.stderr)
