"""``python research/qa_compare.py`` on two small runs written in the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa_compare import compare, main
from quillian.errors import InputError


def run(root: Path, name: str, f1: list[float], seconds: list[float]) -> Path:
    folder = root / name
    folder.mkdir()
    rows = [
        {"id": f"q{i}", "prediction": "x" if score else "", "f1": score, "em": None,
         "seconds": s}
        for i, (score, s) in enumerate(zip(f1, seconds, strict=True))
    ]  # fmt: skip
    (folder / "predictions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def test_paired_figures_time_ratio_and_same_predictions(tmp_path: Path) -> None:
    a = run(tmp_path, "a", [1.0, 1.0, 0.5, 0.0], [1.0, 2.0, 3.0, 4.0])
    b = run(tmp_path, "b", [0.0, 1.0, 0.5, 0.0], [2.0, 4.0, 6.0, 8.0])
    result = compare(a, b, ("f1", "em"))
    assert result["questions"] == 4 and result["same_predictions"] == 3
    f1 = result["f1"]
    assert (f1["a"], f1["b"]) == (0.625, 0.375)
    d = f1["a_minus_b"]
    assert (d["diff"], d["wins"], d["losses"], d["ties"]) == (0.25, 1, 0, 3)
    assert result["em"] is None  # no row of either run scored it (no gold answers)
    assert result["seconds_ratio"] == {"ratio": 0.5, "ci": [0.5, 0.5]}  # every question
    assert result["by_prompt"] == {}  # no calls recorded


def test_calls_are_set_side_by_side_per_prompt(tmp_path: Path, capsys) -> None:
    a = run(tmp_path, "a", [1.0, 0.0], [1.0, 1.0])
    b = run(tmp_path, "b", [1.0, 0.0], [1.0, 1.0])
    plan = {"prompt": "kag.plan@1", "completion_tokens": 512, "seconds": 20.0, "truncated": True}
    judge = {"prompt": "kag.judge@1", "completion_tokens": 3, "seconds": 0.5}
    for folder, calls in ((a, [plan, plan, judge]), (b, [{**plan, "truncated": False}])):
        rows = [
            json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()
        ]
        rows[0]["calls"] = calls
        (folder / "predictions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = compare(a, b, ("f1",))["by_prompt"]
    assert (
        result["kag.plan@1"]["a"]["truncated"] == 2 and result["kag.plan@1"]["b"]["truncated"] == 0
    )
    assert result["kag.judge@1"]["b"]["calls"] == 0 and result["kag.judge@1"]["a"]["calls"] == 1
    main([str(a), str(b), "--metrics", "f1,em"])
    out = capsys.readouterr().out
    assert "kag.plan@1: calls 2 / 1, parse failures 0 / 0, cut at the limit 2 / 0" in out
    assert "em: not scored in either run" in out


def test_only_shared_questions_count_and_bad_files_are_named(tmp_path: Path, capsys) -> None:
    a = run(tmp_path, "a", [1.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    b = run(tmp_path, "b", [1.0, 0.0], [1.0, 1.0])
    assert compare(a, b)["questions"] == 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "predictions.jsonl").write_text('{"id": "q0"}\nnot json\n')
    with pytest.raises(InputError, match="line 2"):
        compare(a, tmp_path / "bad")
    with pytest.raises(SystemExit) as exit_:
        main([str(a), str(tmp_path / "missing")])
    assert exit_.value.code == 2
    assert "cannot read predictions" in capsys.readouterr().err
    main([str(a), str(b), "--metrics", "f1"])
    out = capsys.readouterr().out
    assert "f1: 0.500 against 0.500, a - b +0.000" in out
    assert "same predictions: 2 of 2" in out


def test_a_run_in_parts_is_joined_and_a_question_twice_refused(tmp_path: Path) -> None:
    run(tmp_path, "b", [1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0])
    head = run(tmp_path, "head", [1.0, 1.0], [1.0, 1.0])
    tail = tmp_path / "tail"
    tail.mkdir()
    rows = [{"id": f"q{i}", "prediction": "x", "f1": 1.0, "seconds": 1.0} for i in (2, 3)]
    (tail / "predictions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    joined = compare(f"{head}+{tail}", tmp_path / "b", ("f1",))
    assert joined["questions"] == 4 and joined["f1"]["a"] == 1.0
    assert joined["f1"]["a_minus_b"]["wins"] == 2
    with pytest.raises(InputError, match=r"two parts.*'q0'"):
        compare(f"{head}+{head}", tmp_path / "b")
    with pytest.raises(InputError, match="empty directory"):
        compare(f"{head}+", tmp_path / "b")
