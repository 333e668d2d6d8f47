"""Progress and logs on stderr; results go to stdout.

On a terminal, long steps draw rich progress bars with the time left. Where stderr is a
file or a pipe the bars are off and a step writes a plain line instead when it starts,
every :data:`LOG_EVERY` seconds while it runs (done, total, elapsed and time left) and
when it ends, so a log shows a long step's pace without one line per item.
"""

from __future__ import annotations

import logging
import threading
import time
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

__all__ = [
    "CountBar",
    "ProgressLines",
    "StageBars",
    "configure_logging",
    "count_bar",
    "one_line",
    "progress_line",
    "stage_bars",
    "working",
]

#: Where progress, logs and warnings go (it follows ``sys.stderr`` when that changes).
stderr = Console(stderr=True)

#: Seconds between two progress lines of one step where stderr is not a terminal.
LOG_EVERY = 10.0

#: The most characters :func:`one_line` keeps of a message from a library.
LINE_LIMIT = 300


def one_line(message: str, limit: int | None = LINE_LIMIT) -> str:
    """``message`` on one line: its lines joined by spaces, runs of spaces as one, and
    cut at ``limit`` characters (None: whole) with an ellipsis. A library's advice
    that spans lines (spaCy's five about a long text) prints as one line."""
    flat = " ".join(message.split())
    if limit is not None and len(flat) > limit:
        return flat[: limit - 1].rstrip() + "…"
    return flat


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
    # psycopg's pool logs each failed reconnect as a multi-line warning while the store
    # rides out an outage; the store itself ends in one line when it gives up (-v shows them)
    logging.getLogger("psycopg.pool").setLevel(logging.WARNING if verbose else logging.ERROR)


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


class ProgressLines:
    """Plain progress lines for a log: one when a stage starts, then at most one every
    ``every`` seconds with the time left (from the pace since the stage's first
    report), and one when it ends. A stage whose count goes back (the next epoch of a
    training) starts again; its lines keep the same pace, so a round that starts
    within ``every`` seconds of the stage's last line is logged only once it runs that
    long (a hundred one-second epochs write a line every ``every`` seconds, not two
    each), and a round whose start was logged also logs its end."""

    def __init__(self, every: float = LOG_EVERY) -> None:
        self._every = every
        self._started: dict[str, tuple[float, int]] = {}
        self._last: dict[str, tuple[float, int]] = {}  # the last line's time, the count
        self._finished: set[str] = set()
        self._shown: set[str] = set()  # stages whose current round has a line

    def report(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        last = self._last.get(stage)
        if last is not None and done < last[1]:  # a new round
            self._finished.discard(stage)
            self._shown.discard(stage)
            self._started[stage] = (now, done)
        start, since = self._started.setdefault(stage, (now, done))
        if stage in self._finished:
            return
        finished = total > 0 and done >= total
        due = last is None or now - last[0] >= self._every or (finished and stage in self._shown)
        if due:
            stderr.print(progress_line(stage, done, total, now - start, since), markup=False)
            self._last[stage] = (now, done)
            self._shown.add(stage)
        else:
            self._last[stage] = (last[0] if last else now, done)
        if finished:
            self._finished.add(stage)


def progress_line(stage: str, done: int, total: int, elapsed: float, since: int = 0) -> str:
    """``stage: done/total (pct), N s elapsed, about M s left`` (what is known of it):
    the time left from the pace since ``since`` was done (the first report's count)."""
    if total <= 0:
        return f"{stage}: {done} done, {elapsed:.0f} s elapsed"
    line = f"{stage}: {done}/{total} ({100 * done / total:.0f}%), {elapsed:.0f} s elapsed"
    if done >= total:
        return line + ", done"
    if done > since and elapsed > 0:
        return line + f", about {elapsed * (total - done) / (done - since):.0f} s left"
    return line


class StageBars:
    """An ``on_progress(stage, done, total)`` callback drawing one bar per stage
    (``total`` 0: not known yet), or writing :class:`ProgressLines` where stderr is not
    a terminal. Safe to call from worker threads."""

    def __init__(self, display: Progress) -> None:
        self._display = display
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()
        self._lines = None if stderr.is_terminal else ProgressLines()

    def __call__(self, stage: str, done: int, total: int) -> None:
        with self._lock:
            if self._lines is not None:
                self._lines.report(stage, done, total)
                return
            task = self._tasks.get(stage)
            if task is None:
                task = self._tasks[stage] = self._display.add_task(stage, total=total or None)
        self._display.update(task, completed=done, total=total or None)


class CountBar:
    """An ``on_progress(done, total)`` callback for ``rounds`` runs that each count up
    to the same total (``bench qa``: one run per method), drawn as one bar."""

    def __init__(self, display: Progress, description: str, rounds: int = 1) -> None:
        self._display = display
        self._description = description
        self._task = display.add_task(description, total=None)
        self._rounds = rounds
        self._offset = 0
        self._last = 0
        self._lines = None if stderr.is_terminal else ProgressLines()

    def __call__(self, done: int, total: int) -> None:
        if self._last == total:  # the previous run finished: this is the next one
            self._offset += total
        self._last = done
        self._display.update(
            self._task, completed=self._offset + done, total=total * self._rounds or None
        )
        if self._lines is not None:
            self._lines.report(self._description, self._offset + done, total * self._rounds)


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
    start = time.monotonic()
    if not stderr.is_terminal:
        stderr.print(f"{description} ...", markup=False)
    with _display(TimeElapsedColumn()) as display:
        display.add_task(description, total=None)
        yield
    if not stderr.is_terminal:
        stderr.print(f"{description}: done in {time.monotonic() - start:.0f} s", markup=False)
