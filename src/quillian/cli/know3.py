"""``quillian know3 calibrate``: pick Know3-RAG's θ0 for a KG, a model and questions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from quillian.cli.console import CountBar, count_bar
from quillian.cli.flags import DatasetOpt, IndexDir, JsonFlag, MethodFlags, shares_flags
from quillian.config import build_config
from quillian.engine import Engine
from quillian.errors import InputError
from quillian.eval.calibrate import Calibration, calibrate, collect_trajectories
from quillian.eval.datasets import Dataset, Question, load_questions
from quillian.methods.know3.config import Know3Config
from quillian.methods.table import method_spec

__all__ = ["app"]

app = typer.Typer(help="Know3-RAG tools.", no_args_is_help=True, rich_markup_mode="markdown")


def _questions(dataset: str | None, path: Path) -> list[Question]:
    if dataset is not None:
        return load_questions(cast(Dataset, dataset), path)
    if not path.is_file():
        raise InputError("questions file not found", path=str(path))
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [Question(str(i), q, frozenset()) for i, q in enumerate(lines) if q]


@app.command("calibrate")
@shares_flags
def calibrate_command(
    index: IndexDir,
    questions: Annotated[
        Path,
        typer.Option(
            metavar="FILE",
            help="the questions: a data set's file (with --dataset), or one question a line",
        ),
    ],
    model: MethodFlags,
    dataset: DatasetOpt | None = None,
    target: Annotated[
        float,
        typer.Option(
            metavar="SHARE",
            help="share of questions to answer at turn 0, without retrieval (0 to 1); "
            "the only share targeted: later turns' shares follow from θ0 and are reported",
        ),
    ] = 0.3,
    limit: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="the first N questions")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Pick θ0 so that a target share of QUESTIONS is answered at turn 0.

    Only the turn-0 share (answered without retrieval) is targeted: θ0 is one number,
    so it cannot be fitted to a share at every turn; the shares at later turns follow
    from it. Runs know3-rag once per question to the last turn (θ0 = 0), recording each
    turn's answer and KGE score, then evaluates every θ0 exactly: the share answered at
    each turn (the paper's Table 5) and, with a data set's gold answers, EM and F1. Use
    the chosen value as --option theta0=VALUE.
    """
    if not 0.0 <= target <= 1.0:
        raise typer.BadParameter(f"--target must be in [0, 1], got {target}")
    options = model.method_options(method_spec("know3-rag").name)
    config: Know3Config = build_config("know3-rag", Know3Config, options)
    asked = _questions(dataset, questions)[:limit] if limit else _questions(dataset, questions)
    engine = model.open_engine(index)
    with count_bar("questions run to the last turn") as progress:
        paths = asyncio.run(_collect(engine, asked, options, model.concurrency, progress))
    result = calibrate(paths, target, config)
    if json_out:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        _print(result)


async def _collect(
    engine: Engine,
    questions: list[Question],
    options: dict[str, Any],
    concurrency: int,
    progress: CountBar,
) -> Any:
    async with engine:
        return await collect_trajectories(
            engine, questions, options, concurrency=concurrency, on_progress=progress
        )


def _print(result: Calibration) -> None:
    chosen = result.chosen
    print(f"θ0 = {chosen.theta0:.6g} (target: {result.target:.0%} answered at turn 0)")
    shares = ", ".join(f"t={t}: {s:.1%}" for t, s in enumerate(chosen.answered_at_turn))
    print(f"answered at each turn: {shares}")
    if chosen.f1 is not None:
        print(f"EM {chosen.em:.3f}, F1 {chosen.f1:.3f} over {result.questions} questions")
    print(f"turn-0 answers with no scorable triple: {result.unscorable_at_turn_0}")
    for note in result.notes:
        print(f"note: {note}")
    print("\n| θ0 | answered at t=0,1,.. | EM | F1 |\n|---|---|---|---|")
    seen: set[tuple[float, ...]] = set()
    for row in result.grid:
        if row.answered_at_turn in seen:
            continue
        seen.add(row.answered_at_turn)
        turns = " / ".join(f"{s:.2f}" for s in row.answered_at_turn)
        em = "" if row.em is None else f"{row.em:.3f}"
        f1 = "" if row.f1 is None else f"{row.f1:.3f}"
        print(f"| {row.theta0:.4g} | {turns} | {em} | {f1} |")
