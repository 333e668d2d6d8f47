"""``bench retrieval`` on a tiny MuSiQue-format set: every figure with its interval,
methods compared question by question, per-question scores kept."""

from __future__ import annotations

import pytest

from quillian.bench.retrieval import run_retrieval_bench
from quillian.cli.main import main
from quillian.errors import ConfigError


def test_every_figure_has_its_interval_and_methods_are_paired(bench_settings) -> None:
    result = run_retrieval_bench(bench_settings(), k=5)
    per = result["_per_question"]
    assert per["ids"] == ["q0", "q1", "q2", "q3"]
    for method in ("dense", "bm25", "ppr"):
        figures = result[method]
        for metric in ("R@2", "R@5"):
            values = per[method][metric]
            assert len(values) == 4
            assert figures[metric] == pytest.approx(sum(values) / 4, abs=1e-4)
            low, high = figures[f"{metric}_ci"]
            assert low <= figures[metric] <= high
    # by default each method against dense, on the same questions
    assert set(result["_paired"]) == {"bm25 vs dense", "ppr vs dense"}
    c = result["_paired"]["bm25 vs dense"]["R@5"]
    diffs = [x - y for x, y in zip(per["bm25"]["R@5"], per["dense"]["R@5"], strict=True)]
    assert c["diff"] == pytest.approx(sum(diffs) / 4, abs=1e-4)
    assert c["wins"] + c["losses"] + c["ties"] == 4
    assert c["wins"] == sum(d > 0 for d in diffs) and 0 <= c["p"] <= 1


def test_chosen_pairs_and_unknown_ones(bench_settings) -> None:
    result = run_retrieval_bench(bench_settings(), k=5, pairs=[("ppr", "bm25")])
    assert list(result["_paired"]) == ["bm25 vs dense", "ppr vs dense", "ppr vs bm25"]
    with pytest.raises(ConfigError, match="sa was not run"):
        run_retrieval_bench(bench_settings(), k=5, pairs=[("sa", "dense")])


def test_the_cli_refuses_a_malformed_pair(data, capsys) -> None:
    argv = ["bench", "retrieval", "--dataset", "musique", "--corpus", str(data / "corpus.json")]
    argv += ["--questions", str(data / "questions.jsonl"), "--index-dir", str(data / "i")]
    assert main([*argv, "--compare", "sa-dense"]) == 2
    assert "A:B" in capsys.readouterr().err
