"""research/options.py: settings of one retriever compared on an index that is only opened."""

from __future__ import annotations

import json

from options import main, parse_setting


def test_settings_parse_as_json_values_else_text():
    assert parse_setting("tolerance=1e-6,triple_seeds=0,triple_text=endpoints") == {
        "tolerance": 1e-6,
        "triple_seeds": 0,
        "triple_text": "endpoints",
    }


def test_two_settings_rank_alike_and_are_timed(hotpot_index, capsys):
    index, questions = hotpot_index
    argv = ["--index", str(index), "--dataset", "hotpotqa", "--questions"]
    argv += [str(questions), "--setting", "tolerance=1e-8", "--setting", "tolerance=1e-6"]
    main([*argv, "--rounds", "2", "-k", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert [row["setting"] for row in out["settings"]] == ["tolerance=1e-8", "tolerance=1e-6"]
    assert all(row["same_top_k_as_first"] == 1.0 for row in out["settings"])
    assert all(row["p50_ms"] > 0 for row in out["settings"]) and out["questions"] == 1
