"""``quillian dpo-data``: preference data for KG-Infused RAG's knowledge augmentation.

quillian dpo-data INDEX --dataset musique --questions FILE --kg index+inverse \\
    --llm local-int8 --out pairs.jsonl [--judge openai:gpt-4o-mini] [--rounds 1,2]

Runs KG-Infused RAG up to the knowledge-augmentation step for each question (once per
number of activation rounds, pooled as the paper pools D_KA^1 and D_KA^2), samples six
outputs per input and has the judge pick the best and the worst (Appendix F). Rows go
to ``--out`` in TRL's preference format; ``--out`` with ``.stats.json`` holds what was
filtered. Train with ``python -m quillian.methods.kg_infused.dpo_train``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

__all__ = ["add_dpo"]


def add_dpo(sub: Any) -> None:
    from quillian.cli.qa import llm_args

    p = sub.add_parser(
        "dpo-data",
        help="DPO preference data for KG-Infused RAG's knowledge augmentation",
        description=__doc__.split("\n\n")[2] if __doc__ else None,
    )
    p.add_argument("index", type=Path, metavar="DIR")
    p.add_argument("--dataset", required=True, choices=("2wiki", "musique", "hotpotqa"))
    p.add_argument("--questions", type=Path, required=True)
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--rounds", default="1,2", help="activation rounds, pooled (default 1,2)")
    p.add_argument("--judge", metavar="SPEC", help="judge LLM (default: --llm)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE")
    llm_args(p)
    p.set_defaults(func=_cmd_dpo_data)


def _cmd_dpo_data(args: argparse.Namespace) -> int:
    from quillian.cli.main import open_index_dir
    from quillian.cli.qa import options_of, prompts_of, session_of
    from quillian.components.llm.tasks import TaskRunner
    from quillian.errors import ConfigError
    from quillian.eval.datasets import load_questions
    from quillian.methods.kg_infused.dpo import PreferenceSampler, ka_inputs, write_dpo_jsonl
    from quillian.registry import make_graph, make_pipeline, make_retriever

    if not args.kg:
        raise ConfigError("dpo-data needs the knowledge graph to activate (--kg)")
    try:
        rounds = [int(r) for r in args.rounds.split(",")]
    except ValueError as exc:
        raise ConfigError(f"--rounds must be comma-separated ints, got {args.rounds!r}") from exc
    questions = [q.question for q in load_questions(args.dataset, args.questions)]
    questions = questions[: args.limit] if args.limit else questions
    context = open_index_dir(args.index).context
    retriever = make_retriever(context, args.retriever or "dense")
    graph = make_graph(args.kg, context, args.index)
    prompts = prompts_of(args)

    async def collect() -> tuple[int, dict[str, Any]]:
        async with contextlib.AsyncExitStack() as stack:
            session = await stack.enter_async_context(session_of(args))
            runner = TaskRunner(session.model, prompts)
            judge = None
            if args.judge:
                spec = argparse.Namespace(**{**vars(args), "llm": args.judge})
                judge_session = await stack.enter_async_context(session_of(spec))
                judge = TaskRunner(judge_session.model, prompts)
            items = []
            for r in rounds:
                options = {**options_of(args.option), "rounds": r}
                pipeline = make_pipeline(
                    "kg-infused-rag", runner, retriever, graph=graph, **options
                )
                items += await ka_inputs(pipeline, questions)  # type: ignore[arg-type]
            pairs, stats = await PreferenceSampler(runner, judge).collect(items)
            return write_dpo_jsonl(pairs, args.out), stats.as_dict()

    written, stats = asyncio.run(collect())
    stats_path = args.out.with_suffix(".stats.json")
    stats_path.write_text(json.dumps(stats, indent=1), encoding="utf-8")
    if args.json:
        print(json.dumps({**stats, "rows": written, "out": str(args.out)}))
    else:
        print(
            f"{written} preference rows from {stats['inputs']} inputs to {args.out} "
            f"(ties {stats['ties']}, identical {stats['identical']}, unparsable "
            f"{stats['unparsable']}, generation failed {stats['generation_failed']}; "
            f"{stats['llm_calls']} LLM calls)"
        )
    return 0 if written else 1
