"""Progress and logs on stderr; results go to stdout.

On a terminal, long steps draw rich progress bars with the time left. Where stderr is a
file or a pipe the bars are off, so logs get no per-item lines; the callbacks still
run and cost next to nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["CountBar", "StageBars", "configure_logging", "count_bar", "stage_bars", "working"]

#: Where progress, logs and warnings go (it follows ``sys.stderr`` when that changes).
stderr = Console(stderr=True)


def configure_logging(verbose: bool) -> None:
    """Warnings (with ``verbose``, progress details too) on stderr, drawn above the bars
    on a terminal."""
    level = logging.INFO if verbose else logging.WARNING
    handler: logging.Handler
    if stderr.is_terminal:
        handler = RichHandler(console=stderr, show_time=False, show_path=False)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    # on the handler too: a library may set its own logger's level when first imported
    # (bm25s sets DEBUG), after this runs
    handler.setLevel(level)
    logging.basicConfig(level=level, handlers=[handler])


def _display(*columns: ProgressColumn | str) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        *columns,
        console=stderr,
        disable=not stderr.is_terminal,
        redirect_stdout=False,
    )


def _bars() -> Progress:
    return _display(
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        "elapsed,",
        TimeRemainingColumn(),
        "left",
    )


class StageBars:
    """An ``on_progress(stage, done, total)`` callback drawing one bar per stage
    (``total`` 0: not known yet). Safe to call from worker threads."""

    def __init__(self, display: Progress) -> None:
        self._display = display
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        with self._lock:
            task = self._tasks.get(stage)
            if task is None:
                task = self._tasks[stage] = self._display.add_task(stage, total=total or None)
        self._display.update(task, completed=done, total=total or None)


class CountBar:
    """An ``on_progress(done, total)`` callback for ``rounds`` runs that each count up
    to the same total (``bench qa``: one run per method), drawn as one bar."""

    def __init__(self, display: Progress, description: str, rounds: int = 1) -> None:
        self._display = display
        self._task = display.add_task(description, total=None)
        self._rounds = rounds
        self._offset = 0
        self._last = 0

    def __call__(self, done: int, total: int) -> None:
        if self._last == total:  # the previous run finished: this is the next one
            self._offset += total
        self._last = done
        self._display.update(
            self._task, completed=self._offset + done, total=total * self._rounds or None
        )


@contextmanager
def stage_bars() -> Iterator[StageBars]:
    """Bars for a step that reports ``(stage, done, total)``."""
    with _bars() as display:
        yield StageBars(display)


@contextmanager
def count_bar(description: str, rounds: int = 1) -> Iterator[CountBar]:
    """One bar for a step that reports ``(done, total)``, ``rounds`` times over."""
    with _bars() as display:
        yield CountBar(display, description, rounds)


@contextmanager
def working(description: str) -> Iterator[None]:
    """A spinner with the time elapsed, for a long step that reports no progress."""
    with _display(TimeElapsedColumn()) as display:
        display.add_task(description, total=None)
        yield
