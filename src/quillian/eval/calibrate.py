"""Choosing Know3-RAG's θ0 for a KG, a model and a question set (``quillian know3
calibrate``).

The scale of relative triple scores depends on the KG and its embedding model, so the
paper's θ0 values (Table 6) do not carry over. θ only decides *where the loop stops*:
the answers and scores of each turn do not depend on it. So each question is run once
with θ0 = 0 (nothing is accepted before T), recording its answer and score at every
turn; any θ0 is then evaluated exactly, offline: a question stops at the first turn
t < T whose score is below θ_t(θ0), else at T.

:func:`calibrate` picks the θ0 that makes the share of questions answered at turn 0
closest to a target (the paper's Table 5 reports that share), and reports for it, and
for a grid of θ0 values, the share answered at each turn and, when gold answers are
known, EM and F1 of the answers output.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quillian.engine import Engine
from quillian.eval.datasets import Question
from quillian.eval.metrics import score_answer
from quillian.methods.base import AnswerResult
from quillian.methods.know3.config import Know3Config, threshold
from quillian.methods.steps import ConfidenceCheck, TurnAnswer

__all__ = [
    "Calibration",
    "Trajectory",
    "calibrate",
    "collect_trajectories",
    "evaluate_theta",
    "trajectory",
]


@dataclass(frozen=True)
class Trajectory:
    """One question run to the last turn: the answer and score of every turn."""

    question: str
    answers: tuple[str, ...]
    """a_t for t = 0..T."""
    scores: tuple[float | None, ...]
    """s_t for t = 0..T-1 (None: nothing scorable, never accepted)."""
    gold: tuple[str, ...] = ()
    error: str = ""


def trajectory(result: AnswerResult, gold: Sequence[str] = ()) -> Trajectory:
    """A run's answers and scores by turn, read from its steps."""
    answers = [s.answer for s in result.steps if isinstance(s, TurnAnswer)]
    scores = [s.score for s in result.steps if isinstance(s, ConfidenceCheck)]
    return Trajectory(result.question, tuple(answers), tuple(scores), tuple(gold), result.error)


def stop_turn(path: Trajectory, theta0: float, config: Know3Config) -> int:
    """The turn whose answer is output under ``theta0``."""
    for turn, score in enumerate(path.scores):
        if score is not None and score < _theta(config, theta0, turn):
            return turn
    return len(path.answers) - 1


def _theta(config: Know3Config, theta0: float, turn: int) -> float:
    return threshold(theta0, turn, c=config.theta_c, kind=config.threshold)


@dataclass(frozen=True)
class ThetaReport:
    """Where questions stop under one θ0, and how good the output answers are."""

    theta0: float
    thresholds: tuple[float, ...]
    answered_at_turn: tuple[float, ...]
    em: float | None = None
    f1: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "theta0": self.theta0,
            "thresholds": [round(t, 4) for t in self.thresholds],
            "answered_at_turn": {str(t): s for t, s in enumerate(self.answered_at_turn)},
            "em": self.em,
            "f1": self.f1,
        }


def evaluate_theta(paths: Sequence[Trajectory], theta0: float, config: Know3Config) -> ThetaReport:
    """Shares per turn (and EM/F1 against gold answers, when every question has some)."""
    usable = [p for p in paths if p.answers]
    turns = max((len(p.answers) for p in usable), default=1)
    stops = [stop_turn(p, theta0, config) for p in usable]
    shares = tuple(round(stops.count(t) / len(stops), 4) if stops else 0.0 for t in range(turns))
    em = f1 = None
    if usable and all(p.gold for p in usable):
        scored = [
            score_answer(p.answers[s], list(p.gold)) for p, s in zip(usable, stops, strict=True)
        ]
        em = round(sum(s.em for s in scored) / len(scored), 4)
        f1 = round(sum(s.f1 for s in scored) / len(scored), 4)
    thresholds = tuple(_theta(config, theta0, t) for t in range(turns))
    return ThetaReport(theta0, thresholds, shares, em, f1)


@dataclass(frozen=True)
class Calibration:
    """The chosen θ0 and the grid it was chosen from."""

    target: float
    chosen: ThetaReport
    grid: tuple[ThetaReport, ...]
    questions: int
    unscorable_at_turn_0: int
    errors: int = 0
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "target_share_at_turn_0": self.target,
            "questions": self.questions,
            "unscorable_at_turn_0": self.unscorable_at_turn_0,
            "errors": self.errors,
            "chosen": self.chosen.as_dict(),
            "grid": [r.as_dict() for r in self.grid],
            "notes": list(self.notes),
        }


def _cut(scores: Sequence[float], wanted: float) -> float:
    """The turn-0 threshold accepting the count of ``scores`` (sorted) closest to
    ``wanted``: half-way between two distinct scores, or just outside them all."""
    if not scores:
        return 0.0
    distinct = sorted(set(scores))
    cuts = [distinct[0] / 2 if distinct[0] > 0 else 0.0]
    cuts += [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    cuts.append(distinct[-1] * 1.01 + 1e-9)
    accepted = [sum(1 for s in scores if s < cut) for cut in cuts]
    best = min(range(len(cuts)), key=lambda i: (abs(accepted[i] - wanted), accepted[i]))
    return cuts[best]


def _grid() -> list[float]:
    """θ0 from 1e-4 to 1e4, eight values a decade."""
    return [10 ** (e / 8) for e in range(-32, 33)]


def calibrate(paths: Sequence[Trajectory], target: float, config: Know3Config) -> Calibration:
    """The θ0 whose share of questions answered at turn 0 is closest to ``target``:
    the threshold at turn 0 is placed half-way between two consecutive distinct scores
    (tied scores cannot be split), and θ0 follows from θ_0 = θ0·c/(1+e) (both
    threshold kinds agree at turn 0)."""
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target must be in [0, 1], got {target}")
    usable = [p for p in paths if p.answers]
    first = sorted(p.scores[0] for p in usable if p.scores and p.scores[0] is not None)
    notes: list[str] = []
    if target * len(usable) > len(first):
        notes.append(
            f"only {len(first)} of {len(usable)} turn-0 answers could be scored: the "
            "share answered at turn 0 cannot exceed theirs"
        )
    cut = _cut(first, target * len(usable))
    theta0 = cut * (1 + math.e) / config.theta_c
    chosen = evaluate_theta(usable, theta0, config)
    grid = tuple(evaluate_theta(usable, g, config) for g in _grid())
    return Calibration(
        target,
        chosen,
        grid,
        len(usable),
        sum(1 for p in usable if not p.scores or p.scores[0] is None),
        sum(1 for p in paths if p.error),
        tuple(notes),
    )


async def collect_trajectories(
    engine: Engine,
    questions: Sequence[Question],
    options: dict[str, Any],
    *,
    concurrency: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Trajectory]:
    """Run Know3-RAG with θ0 = 0 (nothing accepted before T) on every question; a
    ``theta0_preset`` among ``options`` is dropped (θ0 is what is being chosen)."""
    options = {k: v for k, v in options.items() if k != "theta0_preset"}
    options |= {"theta0": 0.0, "adaptive": True}
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(question: Question) -> Trajectory:
        nonlocal done
        async with gate:
            result = await engine.answer(question.question, "know3-rag", **options)
        done += 1
        if on_progress is not None:
            on_progress(done, len(questions))
        return trajectory(result, question.answers)

    return list(await asyncio.gather(*(one(q) for q in questions)))
