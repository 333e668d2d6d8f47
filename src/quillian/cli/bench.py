"""``quillian bench retrieval`` and ``quillian bench qa``: methods side by side on a
multi-hop QA dataset; ``quillian bench tune``: a retriever's options chosen by
cross-validation over the dev questions; ``quillian bench report``: the benchmark pages
and plots of the docs."""

from __future__ import annotations

import asyncio
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from quillian.bench.qa import (
    QASettings,
    load_qa_questions,
    needs_index,
    prepare_index,
    run_qa_bench,
    summary_table,
)
from quillian.bench.report import main as report_main
from quillian.bench.retrieval import METHODS, BenchSettings, default_index_dir, run_retrieval_bench
from quillian.bench.splits import splits_summary
from quillian.bench.tune import parse_grid, run_tuning
from quillian.cli.console import CountBar, count_bar, stage_bars
from quillian.cli.flags import (
    BenchFlags,
    DatasetOpt,
    EndpointTextsOpt,
    Flags,
    JsonFlag,
    choice,
    shares_flags,
)
from quillian.components.factories import DEFAULT_EMBEDDER, EMBEDDERS, RETRIEVERS
from quillian.engine import Engine
from quillian.errors import ConfigError
from quillian.eval.datasets import Dataset
from quillian.eval.qa import DEFAULT_METRICS, METRICS, check_metrics
from quillian.methods.table import method_spec

__all__ = ["app", "qa", "report", "retrieval", "tune"]

app = typer.Typer(
    help="Benchmarks on multi-hop QA datasets.", no_args_is_help=True, rich_markup_mode="markdown"
)


@dataclass(frozen=True)
class BenchData(Flags):
    """The dataset a benchmark runs on, and where its index is built or reused."""

    dataset: DatasetOpt
    corpus: Annotated[Path, typer.Option(metavar="FILE", help="the passages (JSON)")]
    questions: Annotated[Path, typer.Option(metavar="FILE", help="the questions")]
    extractions: Annotated[
        Path | None, typer.Option(metavar="FILE", help="precomputed extractions (JSONL)")
    ] = None
    index_dir: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="where to build or reuse the index: a directory (default: indexes/), "
            "or postgresql://...",
        ),
    ] = None
    endpoint_texts: EndpointTextsOpt = None

    def settings(self, first_n: int | None = None, **fields: Any) -> BenchSettings:
        """The benchmark's settings; ``fields`` are the other :class:`BenchSettings`."""
        dataset = cast(Dataset, self.dataset)  # checked by DatasetOpt
        return BenchSettings(
            dataset=dataset,
            corpus=self.corpus,
            questions=self.questions,
            index_dir=self.index_dir or default_index_dir(dataset, first_n, self.extractions),
            first_n=first_n,
            extractions=self.extractions,
            endpoint_texts=self.endpoint_texts,
            **fields,
        )


#: The embedder a benchmark builds a new index with.
EmbedderOpt = Annotated[
    str | None,
    choice(EMBEDDERS, f"default: the index's own, for a new one {DEFAULT_EMBEDDER}"),
]


@app.command()
@shares_flags
def retrieval(
    data: BenchData,
    first_n: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="index only the first N passages")
    ] = None,
    methods: Annotated[
        str | None,
        typer.Option(metavar="M1,M2", help=f"a subset of {', '.join(RETRIEVERS)}"),
    ] = None,
    kg: Annotated[
        str | None,
        typer.Option(
            metavar="DIR+index",
            help="also run the SA methods crossing into DIR (linked by 'quillian kg link')",
        ),
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            metavar="A:B",
            help="also compare two of the methods (or peers: peer:NAME) question by "
            "question (repeatable; each method is compared with dense anyway)",
        ),
    ] = None,
    embedder: EmbedderOpt = None,
    json_out: JsonFlag = False,
) -> None:
    """Every retriever side by side on a QA dataset (no LLM).

    The index is built (or reused), then each retriever ranks passages for every
    question; prints each one's recall with its bootstrap 95% interval, its latency,
    and paired comparisons (mean difference, interval, permutation p-value, questions
    won and lost).
    """
    settings = data.settings(
        first_n, methods=_retrievers(methods) if methods else METHODS, embedder=embedder
    )
    pairs = [_pair(c) for c in compare] if compare else None
    with stage_bars() as progress:
        result = run_retrieval_bench(settings, kg=kg, on_progress=progress, pairs=pairs)
    if json_out:
        print(json.dumps(result))
        return
    for method, figures in result.items():
        if not method.startswith("_"):
            cells = [
                f"{k} {v}" + (f" [{ci[0]}, {ci[1]}]" if (ci := figures.get(f"{k}_ci")) else "")
                for k, v in figures.items()
                if not k.endswith("_ci")
            ]
            print(f"{method:24s}", "  ".join(cells))
    for pair, metrics in result["_paired"].items():
        for metric, c in metrics.items():
            print(
                f"{pair:28s} {metric:20s} diff {c['diff']:+.3f} [{c['ci'][0]:+.3f}, "
                f"{c['ci'][1]:+.3f}]  p={c['p']:.3f}  wins {c['wins']} losses {c['losses']} "
                f"ties {c['ties']}"
            )


@app.command()
@shares_flags
def tune(
    data: BenchData,
    method: Annotated[str, choice(RETRIEVERS, "the retriever whose options are tuned")],
    grid: Annotated[
        list[str],
        typer.Option(metavar="NAME=V1,V2", help="an option and its values to try (repeatable)"),
    ],
    metric: Annotated[
        str | None,
        typer.Option(metavar="METRIC", help="what to maximise (default: perfect@8 or R@5)"),
    ] = None,
    folds: Annotated[int, typer.Option(min=2, metavar="N", help="cross-validation folds")] = 5,
    seed: Annotated[int, typer.Option(metavar="N", help="the folds' shuffle")] = 0,
    first_n: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="index only the first N passages")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Choose a retriever's options by cross-validation over the dev questions.

    Every combination of the --grid values ranks every question; each fold is scored
    with the combination best on the other folds. Prints that held-out estimate with its
    bootstrap interval, its paired comparison with the defaults, and the combination
    best on all questions (an in-sample, optimistic figure).
    """
    chosen = parse_grid(method, grid)
    settings = data.settings(first_n, methods=(method,))
    with stage_bars() as progress:
        result = run_tuning(
            settings, method, chosen, metric=metric, folds=folds, seed=seed, on_progress=progress
        )
    if json_out:
        print(json.dumps(result))
        return
    m = result["metric"]
    for row in result["grid"]:
        c = row["vs_default"]
        print(
            f"{json.dumps(row['options']):40s} {m} {row['score']} {row['ci']}  vs defaults "
            f"{c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] wins {c['wins']} "
            f"losses {c['losses']}"
        )
    d, cv = result["default"], result["cv"]
    print(f"defaults: {m} {d['score']} {d['ci']}")
    print(f"cross-validated ({result['folds']} folds): {m} {cv['score']} {cv['ci']}")
    c = cv["vs_default"]
    print(
        f"  vs defaults: {c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] p={c['p']:.3f}"
        f"  wins {c['wins']} losses {c['losses']}"
    )
    best = result["chosen_on_all"]
    print(f"best on all questions (in-sample): {json.dumps(best['options'])} {best['in_sample']}")
    print(splits_summary(result["splits"]))


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)
def report(ctx: typer.Context) -> None:
    """Render docs/benchmarks.md, its detail and study pages and its plots.

    The options are ``python -m quillian.bench.report``'s (``--help`` lists them):
    ``--no-runs`` redraws the pages and plots from docs/benchmarks.json, ``--plots-only``
    only the plots; neither needs an index.
    """
    report_main(ctx.args)


def _pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition(":")
    if not sep or not a or not b:
        raise ConfigError(f"--compare takes two methods as A:B, got {text!r}")
    return (a, b)


def _retrievers(text: str) -> list[str]:
    names = text.split(",")
    unknown = [n for n in names if n not in RETRIEVERS]
    if unknown:
        raise ConfigError(f"unknown retriever(s) {unknown}; choose from {', '.join(RETRIEVERS)}")
    return names


@app.command()
@shares_flags
def qa(
    ctx: typer.Context,
    data: BenchData,
    method: Annotated[
        str, typer.Option(metavar="M1,M2", help="a method or a comma-separated list")
    ],
    out: Annotated[Path, typer.Option(metavar="DIR", help="where results are written")],
    model: BenchFlags,
    limit: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="the first N questions")
    ] = None,
    offset: Annotated[
        int, typer.Option(min=0, metavar="N", help="skip the first N questions (runs in parts)")
    ] = 0,
    kind: Annotated[
        str | None,
        typer.Option(
            metavar="K1,K2",
            help="only questions of these kinds, before --offset and --limit: HotpotQA's "
            "bridge or comparison, MuSiQue's 2hop, 3hop1, ... (the summary reports each kind)",
        ),
    ] = None,
    first_n: Annotated[
        int | None,
        typer.Option(metavar="N", help="index only the first N passages (as bench retrieval)"),
    ] = None,
    embedder: EmbedderOpt = None,
    metrics: Annotated[
        str,
        typer.Option(
            metavar="M1,M2",
            help=f"scored beside EM, F1 and accuracy: a subset of {', '.join(METRICS)} "
            "(the last two are judged by the --llm model)",
        ),
    ] = ",".join(DEFAULT_METRICS),
    json_out: JsonFlag = False,
) -> None:
    """Question answering: methods side by side with one LLM.

    Each method is scored (EM, F1, accuracy, evidence recall) with its cost; the
    per-question rows and manifests go to --out. See 'quillian methods' for the methods.
    """
    methods = [method_spec(name).name for name in method.split(",")]
    settings = QASettings(
        index=data.settings(first_n, embedder=embedder),
        methods=methods,
        out=out,
        limit=limit,
        offset=offset,
        kinds=tuple(k.strip() for k in kind.split(",") if k.strip()) if kind else (),
        retriever=model.retriever,
        concurrency=model.concurrency,
        options=model.method_options(*methods),
        command=shlex.join(["quillian", *(ctx.find_root().obj or ())]),
        kg=model.kg,
        metrics=_metrics(metrics),
        verify=model.verify_options(),
    )
    load_qa_questions(settings)  # a set with some answers missing: refused before any work
    with stage_bars() as stages:
        index_info = prepare_index(settings, stages)
    engine = model.open_engine(settings.index.index_dir if needs_index(settings) else None)
    with count_bar("questions answered", rounds=len(methods)) as progress:
        result = asyncio.run(_run(settings, engine, index_info, progress))
    if json_out:
        print(json.dumps(result["methods"]))
    else:
        print(summary_table(result))
        print(f"written to {out}")


def _metrics(text: str) -> tuple[str, ...]:
    try:
        return check_metrics([m for m in text.split(",") if m])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


async def _run(
    settings: QASettings, engine: Engine, index_info: dict[str, Any], progress: CountBar
) -> dict[str, Any]:
    async with engine:
        return await run_qa_bench(settings, engine, index_info, progress)
