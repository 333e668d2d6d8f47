"""research/ppr_solvers.py: both solvers on an opened index, against the exact solution."""

from __future__ import annotations

import json

from ppr_solvers import main


def test_both_solvers_are_counted_and_checked_against_the_exact_solution(hotpot_index, capsys):
    index, questions = hotpot_index
    bench = questions.parent.parent
    main(["--bench", str(bench), "--index", f"hotpotqa:{index}", "-k", "2"])
    row = json.loads(capsys.readouterr().out)["indexes"][0]
    assert row["questions"] == 1
    for solver in ("chebyshev", "power"):
        # ppr's walk (descriptions folded, float32) and the whole float64 one it replaced
        for walk in ("ppr", "folded-float32", "whole-float64"):
            got = row[solver][walk]
            assert got["same_top_k_as_exact"] == 1.0 and got["fallbacks"] == 0
            assert 1 <= got["products_mean"] <= got["products_max"] <= 100
            assert got["p50_ms"] > 0
