"""Plain progress lines (a log, not a terminal): the pace and the time left."""

from __future__ import annotations

import pytest

from quillian.cli import console
from quillian.cli.console import ProgressLines, progress_line


def test_the_time_left_comes_from_the_pace_since_the_first_report():
    assert progress_line("embed", 0, 100, 0.0) == "embed: 0/100 (0%), 0 s elapsed"
    assert progress_line("embed", 50, 100, 10.0).endswith("about 10 s left")
    # first seen at 40 of 100: 10 more in 5 s, so 50 left take 25 s
    assert progress_line("batch", 50, 100, 5.0, since=40).endswith("about 25 s left")
    assert progress_line("batch", 40, 100, 5.0, since=40).endswith("5 s elapsed")
    assert progress_line("save", 1, 1, 2.0).endswith(", done")
    assert progress_line("read", 7, 0, 2.0) == "read: 7 done, 2 s elapsed"


def test_each_epoch_of_a_stage_is_logged_again(monkeypatch: pytest.MonkeyPatch, capsys):
    clock = iter([0.0, 1.0, 2.0, 100.0, 101.0, 102.0])
    monkeypatch.setattr(console.time, "monotonic", lambda: next(clock))
    lines = ProgressLines(every=10.0)
    for done in (0, 50, 100, 0, 50, 100):  # two epochs of 100 examples
        lines.report("batch", done, 100)
    out = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in out] == [
        "batch: 0/100 (0%)",
        "batch: 100/100 (100%)",
        "batch: 0/100 (0%)",
        "batch: 100/100 (100%)",
    ]


def test_quick_epochs_share_the_pace_of_one_stage(monkeypatch: pytest.MonkeyPatch, capsys):
    # 25 epochs of 1 s (reports at 0, 0.3 and 0.6 s into each), a line at most every
    # 9.5 s: the first epoch's start and end, then the first report 9.5 s after the
    # last line (epoch 10's middle) and that epoch's end, and so on; not a start and an
    # end for every epoch
    clock = iter([e + f for e in range(25) for f in (0.0, 0.3, 0.6)])
    monkeypatch.setattr(console.time, "monotonic", lambda: next(clock))
    lines = ProgressLines(every=9.5)
    for _ in range(25):
        for done in (0, 50, 100):
            lines.report("batch", done, 100)
    out = [line.split(",")[0] for line in capsys.readouterr().err.splitlines()]
    assert out == [
        "batch: 0/100 (0%)",
        "batch: 100/100 (100%)",  # 0.6 s
        "batch: 50/100 (50%)",  # 10.3 s
        "batch: 100/100 (100%)",  # 10.6 s
        "batch: 50/100 (50%)",  # 20.3 s
        "batch: 100/100 (100%)",
    ]
