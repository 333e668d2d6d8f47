"""Repeated half-splits: a choice among variants scored on questions it did not see,
on score tables worked out so the answer is known."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quillian.bench.lodo import main as lodo_main
from quillian.bench.lodo import pooled_splits
from quillian.bench.splits import SetScores, repeated_splits, splits_summary
from quillian.errors import ConfigError


def one_set(variants: list[list[float]], baseline: list[float]) -> SetScores:
    return SetScores("R@5", np.asarray(variants, float), np.asarray(baseline, float))


def test_a_variant_better_on_every_question_of_every_set_replaces_the_baseline() -> None:
    base = [0.0] * 20
    sets = {
        "a": one_set([[0.0] * 20, [1.0] * 20], base),
        "b": one_set([[0.0] * 20, [0.5] * 20], base),
    }
    out = repeated_splits(sets, ["off", "on"], splits=200, seed=1)
    proc = out["procedure"]
    assert proc["per_set"]["a"]["gain"] == 1.0 and proc["per_set"]["b"]["gain"] == 0.5
    assert proc["optimism"] == 0.0  # nothing to overfit: every half says the same
    on = out["variants"][1]
    assert on["chosen_share"] == 1.0 and on["pooled"]["gain"] == 0.75
    assert on["pooled"]["discounted_low"] == 0.75
    assert out["decision"] == {
        "change": True,
        "best": "on",
        "checks": dict.fromkeys(
            (
                "procedure gains on every set",
                "variant gains on every set",
                "discounted pooled gain above 0",
            ),
            True,
        ),
    }
    assert out["splits"] == 200 and out["variants_counted"] == 2


def test_a_variant_that_helps_one_set_and_costs_another_does_not() -> None:
    base = [0.5] * 40
    sets = {
        "a": one_set([[0.5] * 40, [1.0] * 40], base),  # the variant helps a lot here
        "b": one_set([[0.5] * 40, [0.4] * 40], base),  # and costs a little here
    }
    out = repeated_splits(sets, [{"x": 0}, {"x": 1}], splits=200)
    assert out["decision"]["best"] == {"x": 1}  # the pooled mean prefers it
    assert out["decision"]["change"] is False
    assert out["decision"]["checks"]["variant gains on every set"] is False
    assert out["procedure"]["per_set"]["b"]["gain"] == pytest.approx(-0.1)


def test_choosing_the_best_of_many_coin_flips_is_found_out() -> None:
    """Thirty variants no better than the baseline, scored by chance: the one best on
    the dev questions looks better there, but not on the other halves, and the rule
    keeps the baseline."""
    rng = np.random.default_rng(0)
    base = np.full(50, 0.5)  # what each variant scores on average
    sets = {
        name: one_set((rng.random((30, 50)) < 0.5).astype(float).tolist(), base.tolist())
        for name in ("a", "b", "c")
    }
    out = repeated_splits(sets, list(range(30)), splits=300, seed=2)
    proc = out["procedure"]
    assert proc["in_sample_gain"] > 0.05  # what tuning on the dev questions would report
    assert abs(proc["pooled"]["gain"]) < 0.03  # what it is worth on unseen ones
    assert proc["optimism"] > 0.05
    assert out["decision"]["change"] is False
    low, high = proc["pooled"]["spread"]
    assert low < proc["pooled"]["gain"] < high


def test_variants_tried_before_widen_the_discount() -> None:
    rng = np.random.default_rng(3)
    base = np.zeros(30)
    better = (rng.random(30) < 0.3).astype(float)  # gains 0.3 on average, noisily
    sets = {"a": one_set([base.tolist(), better.tolist()], base.tolist())}
    alone = repeated_splits(sets, ["off", "on"], splits=400)
    many = repeated_splits(sets, ["off", "on"], splits=400, tried=500)
    assert many["variants_counted"] == 502
    low_alone = alone["variants"][1]["pooled"]["discounted_low"]
    low_many = many["variants"][1]["pooled"]["discounted_low"]
    assert low_many <= low_alone


def test_the_splits_are_seeded() -> None:
    sets = {"a": one_set([[0, 1, 0, 1], [1, 0, 1, 1]], [0, 0, 1, 1])}
    first = repeated_splits(sets, [0, 1], splits=50, seed=5)
    assert first == repeated_splits(sets, [0, 1], splits=50, seed=5)
    assert "repeated half-splits (50, 2 variants counted)" in splits_summary(first)


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ConfigError, match="do not match a baseline of 3 questions"):
        one_set([[0, 1]], [0, 0, 1])
    with pytest.raises(ConfigError, match="at least two"):
        one_set([[1]], [0])
    sets = {"a": one_set([[0, 1]], [0, 0])}
    with pytest.raises(ConfigError, match="a: 1 variants, not 2"):
        repeated_splits(sets, [0, 1])
    with pytest.raises(ConfigError, match="splits must be at least 1"):
        repeated_splits(sets, [0], splits=0)
    with pytest.raises(ConfigError, match="no data set"):
        repeated_splits({}, [0])


def tune(per_point: list[list[float]], default: list[float], metric: str = "R@5") -> dict:
    grid = [
        {"options": {"n": n}, "score": float(np.mean(q)), "per_question": q}
        for n, q in enumerate(per_point)
    ]
    return {
        "method": "fused",
        "metric": metric,
        "grid": grid,
        "default": {"score": float(np.mean(default)), "per_question": default},
    }


def test_lodo_pools_the_tune_files_against_defaults_or_a_grid_point(tmp_path, capsys) -> None:
    tunes = {
        "a": tune([[0, 0, 0, 0], [1, 1, 1, 1]], [0, 0, 0, 0]),
        "b": tune([[0, 1, 0, 1], [1, 1, 1, 1]], [0, 1, 0, 1], "perfect@8"),
    }
    out = pooled_splits(tunes, splits=100)
    assert out["baseline"] == "defaults" and out["decision"]["best"] == {"n": 1}
    assert out["decision"]["change"] is True
    against_on = pooled_splits(tunes, splits=100, baseline={"n": 1})
    assert against_on["decision"]["best"] == {"n": 1}  # the baseline itself: no gain
    assert against_on["decision"]["change"] is False
    with pytest.raises(Exception, match=r"--baseline \{\"n\": 7\} is not a point"):
        pooled_splits(tunes, baseline={"n": 7})
    old = {
        **tunes["b"],
        "grid": [{k: v for k, v in p.items() if k != "per_question"} for p in tunes["b"]["grid"]],
    }
    with pytest.raises(Exception, match="b: no per-question scores"):
        pooled_splits({"a": tunes["a"], "b": old})
    paths = []
    for name, t in tunes.items():
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(t))
    lodo_main([str(p) for p in paths] + ["--splits", "50", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["splits"]["splits"] == 50 and "held_out" in result
    lodo_main([str(p) for p in paths] + ["--splits", "50", "--baseline", '{"n": 0}'])
    text = capsys.readouterr().out
    assert 'against {"n": 0}:' in text and "replaces the baseline" in text
    lodo_main([str(p) for p in paths] + ["--splits", "0", "--json"])
    assert "splits" not in json.loads(capsys.readouterr().out)
