"""``bench retrieval`` on a tiny MuSiQue-format set: every figure with its interval,
methods compared question by question, per-question scores kept."""

from __future__ import annotations

import json

import pytest

from quillian.bench.retrieval import BenchSettings, run_retrieval_bench
from quillian.cli.main import main
from quillian.errors import ConfigError

PASSAGES = [
    ("Ada Lovelace", "Ada Lovelace worked with Charles Babbage on the Analytical Engine."),
    ("Charles Babbage", "Charles Babbage was born in London."),
    ("London", "London is the capital of England."),
    ("Alan Turing", "Alan Turing was born in Maida Vale, London."),
    ("Maida Vale", "Maida Vale is a district of west London."),
]
QUESTIONS = [
    ("Where was the man Ada Lovelace worked with born?", [0, 1]),
    ("London is the capital of which country?", [2]),
    ("Where was Alan Turing born?", [3, 4]),
    ("Who worked on the Analytical Engine?", [0]),
]


@pytest.fixture
def data(tmp_path):
    corpus = [{"title": t, "text": x} for t, x in PASSAGES]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus))
    lines = []
    for n, (question, gold) in enumerate(QUESTIONS):
        paragraphs = [
            {"title": t, "paragraph_text": x, "is_supporting": i in gold}
            for i, (t, x) in enumerate(PASSAGES)
        ]
        lines.append(json.dumps({"id": f"q{n}", "question": question, "paragraphs": paragraphs}))
    (tmp_path / "questions.jsonl").write_text("\n".join(lines))
    return tmp_path


def settings(data, methods=("dense", "bm25", "ppr")) -> BenchSettings:
    return BenchSettings(
        dataset="musique",
        corpus=data / "corpus.json",
        questions=data / "questions.jsonl",
        index_dir=data / "index",
        embedder="hash",
        methods=methods,
    )


def test_every_figure_has_its_interval_and_methods_are_paired(data) -> None:
    result = run_retrieval_bench(settings(data), k=5)
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


def test_chosen_pairs_and_unknown_ones(data) -> None:
    result = run_retrieval_bench(settings(data), k=5, pairs=[("ppr", "bm25")])
    assert list(result["_paired"]) == ["ppr vs bm25"]
    with pytest.raises(ConfigError, match="sa was not run"):
        run_retrieval_bench(settings(data), k=5, pairs=[("sa", "dense")])


def test_the_cli_refuses_a_malformed_pair(data, capsys) -> None:
    argv = ["bench", "retrieval", "--dataset", "musique", "--corpus", str(data / "corpus.json")]
    argv += ["--questions", str(data / "questions.jsonl"), "--index-dir", str(data / "i")]
    assert main([*argv, "--compare", "sa-dense"]) == 2
    assert "A:B" in capsys.readouterr().err
