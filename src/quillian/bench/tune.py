"""Choosing a retriever's parameters by cross-validation over the dev questions.

A parameter picked because it scores best on the questions at hand scores better there
than it will on questions not seen: the figure it reports is a tuning figure. Here the
questions are split into folds (seeded); for each fold, the grid point that scores best
on the other folds is scored on that fold, so every question is scored by a choice made
without it. The mean of those held-out scores, with its bootstrap interval, estimates
what the tuning procedure gives on new questions; it is compared question by question
with the retriever's defaults. The point chosen on all the questions is reported too,
with its (optimistic) in-sample score, marked as such, and every grid point is compared
with the defaults question by question.

The repeated half-splits of :mod:`quillian.bench.splits` estimate the same on this one
set with 200 splits (``splits``): the out-of-sample gain of choosing among the grid
against the defaults, and whether the best point would replace them. Every grid point
and the defaults keep their per-question scores in the JSON (``per_question``), so
:mod:`quillian.bench.lodo` can pool the choice across data sets.

Every grid point ranks every question once (queries embedded once); the folds only
regroup those scores, so cross-validation costs no more retrieval than the grid.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from quillian.bench.retrieval import BenchSettings, ensure_index, per_question, read_corpus
from quillian.bench.splits import SetScores, repeated_splits
from quillian.components.factories import RETRIEVER_CONFIGS, make_retriever
from quillian.config import build_config, config_options, parse_option_value
from quillian.engine import Engine
from quillian.errors import ConfigError
from quillian.eval.datasets import load_questions, passage_key
from quillian.eval.stats import interval, paired
from quillian.types import Progress, no_progress

__all__ = ["parse_grid", "run_tuning", "select_by_cv"]


def parse_grid(method: str, pairs: Sequence[str]) -> dict[str, list[Any]]:
    """``["hops=1,2,3", "c=0.1,0.2"]`` as typed values of ``method``'s options."""
    if method not in RETRIEVER_CONFIGS:
        raise ConfigError(
            f"unknown retriever {method!r}; choose one of {', '.join(RETRIEVER_CONFIGS)}"
        )
    options = {o.name: o for o in config_options(RETRIEVER_CONFIGS[method])}
    grid: dict[str, list[Any]] = {}
    for pair in pairs:
        name, sep, values = pair.partition("=")
        if not sep or not values:
            raise ConfigError(f"--grid takes NAME=V1,V2,..., got {pair!r}")
        if name not in options:
            known = ", ".join(sorted(options)) or "none"
            raise ConfigError(f"retriever {method!r} has no option {name!r}; options: {known}")
        if name in grid:
            raise ConfigError(f"--grid names {name!r} twice")
        grid[name] = [parse_option_value(options[name], v.strip()) for v in values.split(",")]
    if not grid:
        raise ConfigError("give at least one --grid NAME=V1,V2,...")
    return grid


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination, in the order the values were given."""
    names = list(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values())]


def select_by_cv(scores: np.ndarray, folds: int, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """Cross-validated selection over ``scores`` (grid points × questions).

    Returns each question's held-out score (from the point chosen on the other folds)
    and the point chosen for each fold; ties go to the earlier point."""
    n_questions = scores.shape[1]
    if not 2 <= folds <= n_questions:
        raise ConfigError(f"folds must be between 2 and the {n_questions} questions, got {folds}")
    order = np.random.default_rng(seed).permutation(n_questions)
    held_out = np.empty(n_questions)
    chosen = []
    for fold in np.array_split(order, folds):
        train = np.setdiff1d(order, fold)
        best = int(np.argmax(scores[:, train].mean(axis=1)))
        chosen.append(best)
        held_out[fold] = scores[best, fold]
    return held_out, chosen


def run_tuning(
    settings: BenchSettings,
    method: str,
    grid: Mapping[str, Sequence[Any]],
    *,
    metric: str | None = None,
    folds: int = 5,
    seed: int = 0,
    k: int = 8,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Score every grid point of ``method`` on the dev questions and choose by
    cross-validation; returns one JSON-able dict."""
    progress = on_progress or no_progress
    config_cls = RETRIEVER_CONFIGS.get(method)
    points = grid_points(grid)
    for point in points:  # a bad value fails before any work
        build_config(f"retriever {method!r}", config_cls, point)
    questions = load_questions(settings.dataset, settings.questions)
    metric = metric or ("perfect@8" if settings.dataset == "2wiki" else "R@5")
    build = ensure_index(settings, read_corpus(settings), progress, methods=())
    engine = Engine.open(settings.index_dir, embedder=settings.embedder)
    ctx = engine.index.context
    keys = [
        passage_key(settings.dataset, t, x)
        for t, x in zip(ctx.chunk_titles, ctx.chunk_texts, strict=True)
    ]
    vectors = ctx.embedder.embed([q.question for q in questions])

    def score(options: Mapping[str, Any]) -> list[float]:
        retriever = make_retriever(ctx, method, **options)
        ranked = [
            [keys[p.chunk] for p in retriever.retrieve(q.question, k, v).passages]
            for q, v in zip(questions, vectors, strict=True)
        ]
        by_metric = per_question(settings.dataset, ranked, questions)
        if metric not in by_metric:
            raise ConfigError(f"metric {metric!r} is not one of {', '.join(by_metric)}")
        return by_metric[metric]

    start = time.perf_counter()
    default = score({})
    table = []
    for i, point in enumerate(points):
        table.append(score(point))
        progress(f"tune:{method}", i + 1, len(points))
    scores = np.asarray(table, dtype=np.float64)
    held_out, chosen = select_by_cv(scores, folds, seed)
    best_all = int(np.argmax(scores.mean(axis=1)))

    def figure(values: Sequence[float] | np.ndarray) -> dict[str, Any]:
        low, high = interval(values)
        return {"score": round(float(np.mean(values)), 4), "ci": [round(low, 4), round(high, 4)]}

    def scored(values: Sequence[float] | np.ndarray) -> dict[str, Any]:
        return {**figure(values), "per_question": [round(float(v), 6) for v in values]}

    one_set: dict[str, SetScores] = {
        settings.dataset: SetScores(metric, scores, np.asarray(default, np.float64))
    }

    return {
        "method": method,
        "metric": metric,
        "folds": folds,
        "seed": seed,
        "questions": [q.id for q in questions],
        "default": scored(default),
        "cv": {
            **figure(held_out),
            "chosen_per_fold": [points[c] for c in chosen],
            "vs_default": paired(held_out.tolist(), default).as_dict(),
        },
        "splits": repeated_splits(one_set, points, seed=seed),
        "chosen_on_all": {"options": points[best_all], "in_sample": figure(scores[best_all])},
        "grid": [
            {"options": p, **scored(row), "vs_default": paired(row.tolist(), default).as_dict()}
            for p, row in zip(points, scores, strict=True)
        ],
        "_run": {
            "dataset": settings.dataset,
            "questions": len(questions),
            "index": build,
            "seconds": round(time.perf_counter() - start, 1),
        },
    }
