"""bench.ppr_solvers: both solvers on an opened index, against the exact solution."""

from __future__ import annotations

import json

from quillian.bench.ppr_solvers import main
from quillian.engine import IndexSettings, index_documents
from quillian.types import Document


def test_both_solvers_are_counted_and_checked_against_the_exact_solution(tmp_path, capsys):
    docs = [
        Document("Ada Lovelace worked with Charles Babbage in London.", "ada", "Ada Lovelace"),
        Document("Charles Babbage designed the Analytical Engine.", "babbage", "Charles Babbage"),
        Document("London is the capital of England.", "london", "London"),
    ]
    index_documents(tmp_path / "idx", docs, IndexSettings(embedder="hash"))
    bench = tmp_path / "bench"
    (bench / "hotpotqa").mkdir(parents=True)
    (bench / "hotpotqa" / "questions.json").write_text(
        json.dumps(
            [
                {
                    "_id": "q1",
                    "question": "Who designed the engine Ada Lovelace worked on?",
                    "answer": "Charles Babbage",
                    "supporting_facts": [["Charles Babbage", 0]],
                    "context": [],
                }
            ]
        )
    )
    main(["--bench", str(bench), "--index", f"hotpotqa:{tmp_path / 'idx'}", "-k", "2"])
    row = json.loads(capsys.readouterr().out)["indexes"][0]
    assert row["questions"] == 1
    for solver in ("chebyshev", "power"):
        assert row[solver]["same_top_k_as_exact"] == 1.0 and row[solver]["fallbacks"] == 0
        assert 1 <= row[solver]["products_mean"] <= row[solver]["products_max"] <= 100
