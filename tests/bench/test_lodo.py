"""Leave-one-data-set-out selection on grids worked out by hand."""

import json

import pytest

from quillian.bench.lodo import leave_one_set_out, main
from quillian.errors import InputError


def tune(scores: list[float], default: float, metric: str = "R@5") -> dict:
    grid = [{"options": {"n": n}, "score": s} for n, s in zip((0, 1, 2), scores, strict=True)]
    return {"method": "fused", "metric": metric, "grid": grid, "default": {"score": default}}


TUNES = {
    # a: 2 best; b: 1 best; c: all tie
    "a": tune([0.5, 0.6, 0.9], 0.5),
    "b": tune([0.7, 0.8, 0.6], 0.7),
    "c": tune([0.9, 0.9, 0.9], 0.9, "perfect@8"),
}


def test_each_set_is_scored_by_the_choice_made_on_the_others() -> None:
    out = leave_one_set_out(TUNES)
    held = out["held_out"]
    # without a: b and c mean 0.8, 0.85, 0.75 -> n=1, which scores 0.6 on a
    assert held["a"]["chosen"] == {"n": 1} and held["a"]["score"] == 0.6
    # without b: a and c mean 0.7, 0.75, 0.9 -> n=2, 0.6 on b
    assert held["b"]["chosen"] == {"n": 2} and held["b"]["score"] == 0.6
    # without c: a and b mean 0.6, 0.7, 0.75 -> n=2
    assert held["c"]["chosen"] == {"n": 2} and held["c"]["metric"] == "perfect@8"
    assert held["a"]["best_here"] == {"n": 2} and held["c"]["best_here"] == {"n": 0}  # tie: first
    assert held["a"]["default"] == 0.5
    assert out["chosen_on_all"] == {"n": 2}  # means 0.7, 0.767, 0.8


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(InputError, match="two or more"):
        leave_one_set_out({"a": TUNES["a"]})
    other = {**TUNES["b"], "grid": TUNES["b"]["grid"][:2]}
    with pytest.raises(InputError, match="b: its grid differs"):
        leave_one_set_out({"a": TUNES["a"], "b": other})
    with pytest.raises(InputError, match="different methods"):
        leave_one_set_out({"a": TUNES["a"], "b": {**TUNES["b"], "method": "ppr"}})
    with pytest.raises(InputError, match="x: not the JSON"):
        leave_one_set_out({"a": TUNES["a"], "x": {"grid": [{"score": 1}]}})


def test_the_command_reads_tune_files(tmp_path, capsys) -> None:
    paths = []
    for name, t in TUNES.items():
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(t))
    # these hand-made results hold no per-question scores: no repeated splits
    main([str(p) for p in paths] + ["--splits", "0", "--json"])
    assert json.loads(capsys.readouterr().out)["chosen_on_all"] == {"n": 2}
    main([str(p) for p in paths] + ["--splits", "0"])
    assert "a: chosen on the others {'n': 1} -> R@5 0.6" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SystemExit, match=r"bad\.json: cannot read"):
        main([str(paths[0]), str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit, match="a: no per-question scores"):
        main([str(p) for p in paths])
