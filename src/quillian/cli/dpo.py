"""``quillian dpo-data``: preference data for KG-Infused RAG's knowledge augmentation."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from quillian.cli.flags import DatasetOpt, IndexDir, JsonFlag, MethodFlags, shares_flags
from quillian.components.llm.tasks import TaskRunner
from quillian.engine import Engine
from quillian.errors import ConfigError
from quillian.eval.datasets import Dataset, load_questions
from quillian.methods.kg_infused.dpo import collect_preferences, write_dpo_jsonl
from quillian.methods.kg_infused.pipeline import KGInfusedRAG

__all__ = ["dpo_data", "register"]

#: The method whose knowledge augmentation the preferences train.
METHOD = "kg-infused-rag"


@shares_flags
def dpo_data(
    index: IndexDir,
    dataset: DatasetOpt,
    questions: Annotated[Path, typer.Option(metavar="FILE", help="the questions")],
    out: Annotated[Path, typer.Option(metavar="FILE", help="the preference rows (JSONL)")],
    model: MethodFlags,
    limit: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="the first N questions")
    ] = None,
    rounds: Annotated[str, typer.Option(metavar="1,2", help="activation rounds, pooled")] = "1,2",
    judge: Annotated[
        str | None, typer.Option(metavar="SPEC", help="judge LLM (default: --llm)")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """DPO preference data for KG-Infused RAG's knowledge augmentation.

    Runs KG-Infused RAG up to the knowledge-augmentation step for each question (once
    per number of activation rounds, pooled as the paper pools D_KA^1 and D_KA^2),
    samples six outputs per input and has the judge pick the best and the worst
    (Appendix F). Rows go to --out in TRL's preference format; --out with .stats.json
    holds what was filtered. Train with 'python -m quillian.methods.kg_infused.dpo_train'.
    """
    if not model.kg:
        raise ConfigError("dpo-data needs the knowledge graph to activate (--kg)")
    try:
        counts = [int(r) for r in rounds.split(",")]
    except ValueError as exc:
        raise ConfigError(f"--rounds must be comma-separated ints, got {rounds!r}") from exc
    asked = [q.question for q in load_questions(cast(Dataset, dataset), questions)]
    asked = asked[:limit] if limit else asked
    options = [{**model.method_options(METHOD), "rounds": n} for n in counts]
    engine = model.open_engine(index)
    written, stats = asyncio.run(_collect(engine, model.retriever, options, asked, judge, out))
    out.with_suffix(".stats.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
    if json_out:
        print(json.dumps({**stats, "rows": written, "out": str(out)}))
    else:
        print(
            f"{written} preference rows from {stats['inputs']} inputs to {out} "
            f"(ties {stats['ties']}, identical {stats['identical']}, unparsable "
            f"{stats['unparsable']}, generation failed {stats['generation_failed']}; "
            f"{stats['llm_calls']} LLM calls)"
        )
    if not written:
        raise typer.Exit(1)


async def _collect(
    engine: Engine,
    retriever: str | None,
    options: list[dict[str, Any]],
    questions: list[str],
    judge: str | None,
    out: Path,
) -> tuple[int, dict[str, Any]]:
    """One pipeline per number of rounds, the judge's session if one is named, and the
    preference pairs written to ``out``."""
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(engine)
        pipelines = [
            cast(KGInfusedRAG, engine.pipeline(METHOD, retriever=retriever, **o)) for o in options
        ]
        judge_runner = None
        if judge is not None:
            session = await stack.enter_async_context(engine.session_for(judge))
            judge_runner = TaskRunner(session.model, engine.prompts)
        pairs, stats = await collect_preferences(pipelines, questions, engine.runner, judge_runner)
        return write_dpo_jsonl(pairs, out), stats.as_dict()


def register(app: typer.Typer) -> None:
    app.command("dpo-data")(dpo_data)
