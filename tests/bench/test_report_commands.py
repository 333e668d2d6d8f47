"""The benchmark page shows every figure with the command that produced it: a result
given without its command is refused before any benchmark runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quillian.bench import report
from quillian.errors import InputError


def test_the_command_is_read_from_either_file_beside_the_result(tmp_path: Path) -> None:
    result = tmp_path / "kge-scoring-4.json"
    result.write_text(json.dumps({"p50": 1}))
    (tmp_path / "kge-scoring-4.json.cmd").write_text("python research/kge.py --json\n")
    assert report.with_command(result)["_command"] == "python research/kge.py --json"
    other = tmp_path / "tune.json"
    other.write_text("{}")
    (tmp_path / "tune.cmd").write_text("quillian bench tune --json")
    assert report.with_command(other)["_command"] == "quillian bench tune --json"


def test_a_result_without_its_command_is_refused(tmp_path: Path) -> None:
    result = tmp_path / "scoring.json"
    result.write_text("{}")
    with pytest.raises(InputError, match="no command recorded"):
        report.with_command(result)


def test_the_report_refuses_before_running_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "scoring.json"
    result.write_text("{}")
    ran: list[str] = []
    monkeypatch.setattr(report, "_run", lambda *a: ran.append("run"))
    out = tmp_path / "page.md"
    with pytest.raises(SystemExit) as exit_info:
        report.main(["--out", str(out), "--skip-scale", "--know3-calibration", str(result)])
    assert exit_info.value.code == 2
    assert "no command recorded beside" in capsys.readouterr().err
    assert ran == [] and not out.exists()


def test_each_result_given_is_recorded_where_its_page_reads_it(tmp_path: Path) -> None:
    def result(name: str, figures: dict[str, int]) -> str:
        (tmp_path / name).write_text(json.dumps(figures))
        (tmp_path / f"{name}.cmd").write_text(f"command of {name}\n")
        return str(tmp_path / name)

    args = report._parser().parse_args(
        [
            *("--kg-link", result("link.json", {"links": 3})),
            *("--know3-calibration", result("calibration.json", {"questions": 4})),
            *("--serve-load", result("serve.json", {"cpus": 2})),
            *("--tune", result("tune-sa.json", {"folds": 5})),
            *("--tune", result("tune-ppr.json", {"folds": 3})),
        ]
    )
    recorded = {"kg": {"cross": {"kept": 1}}, "tune": {"tune-sa": {"old": 1}, "other": {}}}
    report._add_inputs(args, recorded)
    assert recorded["kg"] == {
        "cross": {"kept": 1},
        "link": {"links": 3, "_command": "command of link.json"},
        "know3_calibration": {"questions": 4, "_command": "command of calibration.json"},
    }
    assert recorded["serve"] == {"cpus": 2, "_command": "command of serve.json"}
    assert recorded["tune"] == {
        "tune-sa": {"folds": 5, "_command": "command of tune-sa.json"},
        "other": {},
        "tune-ppr": {"folds": 3, "_command": "command of tune-ppr.json"},
    }
