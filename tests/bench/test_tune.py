"""Choosing a retriever's options by cross-validation: the selection itself on a score
table, and the whole run on a tiny MuSiQue-format set."""

from __future__ import annotations

import numpy as np
import pytest

from quillian.bench.tune import parse_grid, run_tuning, select_by_cv
from quillian.cli.main import main
from quillian.errors import ConfigError


def test_each_fold_is_scored_by_the_point_best_on_the_others() -> None:
    # point 1 is best on questions 0-5, point 0 on 6-7: a fold holding 6-7 still
    # picks point 1 (best on the rest), so their held-out scores are point 1's
    scores = np.array(
        [
            [0, 0, 0, 0, 0, 0, 1, 1],
            [1, 1, 1, 1, 1, 1, 0, 0],
        ],
        dtype=float,
    )
    held_out, chosen = select_by_cv(scores, folds=4, seed=0)
    assert chosen == [1, 1, 1, 1]
    assert held_out.tolist() == scores[1].tolist()
    # the in-sample best would claim 0.75; the held-out estimate says the same here
    assert held_out.mean() == pytest.approx(0.75)


def test_a_point_that_only_wins_by_chance_loses_held_out() -> None:
    rng = np.random.default_rng(0)
    scores = (rng.random((20, 40)) < 0.5).astype(float)  # 20 equally good points
    held_out, _ = select_by_cv(scores, folds=5, seed=1)
    in_sample = scores.mean(axis=1).max()
    # picking the best of 20 coin flips is optimistic; cross-validation is not
    assert held_out.mean() < in_sample - 0.05


def test_folds_must_fit_the_questions() -> None:
    with pytest.raises(ConfigError, match="folds"):
        select_by_cv(np.zeros((2, 3)), folds=4)


def test_the_grid_is_parsed_as_the_options_types() -> None:
    grid = parse_grid("ppr", ["damping=0.3,0.5", "seed_k=2,4"])
    assert grid == {"damping": [0.3, 0.5], "seed_k": [2, 4]}
    # a Literal option takes its names as they are written, and no other
    assert parse_grid("ppr", ["solver=chebyshev,power"]) == {"solver": ["chebyshev", "power"]}
    with pytest.raises(ConfigError, match="'gauss' is not one of chebyshev, power"):
        parse_grid("ppr", ["solver=gauss"])
    with pytest.raises(ConfigError, match="has no option 'nope'"):
        parse_grid("ppr", ["nope=1"])
    with pytest.raises(ConfigError, match="is not an int"):
        parse_grid("ppr", ["seed_k=two"])
    with pytest.raises(ConfigError, match="NAME=V1,V2"):
        parse_grid("ppr", ["damping"])
    with pytest.raises(ConfigError, match="unknown retriever"):
        parse_grid("nope", ["k=1"])


def test_a_tuning_run_reports_held_out_in_sample_and_defaults(bench_settings) -> None:
    grid = parse_grid("ppr", ["damping=0.2,0.5,0.8"])
    result = run_tuning(bench_settings(("ppr",)), "ppr", grid, folds=2, k=5)
    assert result["metric"] == "R@5" and len(result["grid"]) == 3
    assert [row["options"] for row in result["grid"]] == [{"damping": d} for d in (0.2, 0.5, 0.8)]
    assert len(result["cv"]["chosen_per_fold"]) == 2
    best = max(row["score"] for row in result["grid"])
    assert result["chosen_on_all"]["in_sample"]["score"] == best
    assert result["cv"]["score"] <= best
    low, high = result["cv"]["ci"]
    assert low <= result["cv"]["score"] <= high
    assert result["cv"]["vs_default"]["wins"] + result["cv"]["vs_default"]["losses"] <= 4
    # each grid point beside the defaults, question by question: damping 0.5 is the default
    same = result["grid"][1]["vs_default"]
    assert (same["diff"], same["wins"], same["losses"]) == (0.0, 0, 0)
    for row in result["grid"]:
        assert row["vs_default"]["diff"] == pytest.approx(
            row["score"] - result["default"]["score"], abs=1e-3
        )
        assert np.mean(row["per_question"]) == pytest.approx(row["score"], abs=1e-4)
    # per-question scores kept for pooling across sets, and the repeated half-splits
    assert len(result["default"]["per_question"]) == len(result["questions"]) == 4
    splits = result["splits"]
    assert splits["splits"] == 200 and len(splits["variants"]) == 3
    assert splits["variants"][1]["pooled"]["gain"] == 0.0  # the default itself
    assert isinstance(splits["decision"]["change"], bool)


def test_the_cli_refuses_an_option_the_retriever_lacks(data, capsys) -> None:
    index = data / "index"
    argv = ["bench", "tune", "--dataset", "musique", "--corpus", str(data / "corpus.json")]
    argv += ["--questions", str(data / "questions.jsonl"), "--index-dir", str(index)]
    assert main([*argv, "--method", "bm25", "--grid", "k=1"]) == 2
    assert "has no option 'k'" in capsys.readouterr().err
