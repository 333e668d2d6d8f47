"""bench.options: settings of one retriever compared on an index that is only opened."""

from __future__ import annotations

import json

from quillian.bench.options import main, parse_setting
from quillian.engine import IndexSettings, index_documents
from quillian.types import Document


def test_settings_parse_as_json_values_else_text():
    assert parse_setting("tolerance=1e-6,triple_seeds=0,triple_text=endpoints") == {
        "tolerance": 1e-6,
        "triple_seeds": 0,
        "triple_text": "endpoints",
    }


def test_two_settings_rank_alike_and_are_timed(tmp_path, capsys):
    docs = [
        Document("Ada Lovelace worked with Charles Babbage in London.", "ada", "Ada Lovelace"),
        Document("Charles Babbage designed the Analytical Engine.", "babbage", "Charles Babbage"),
        Document("London is the capital of England.", "london", "London"),
    ]
    index_documents(tmp_path / "idx", docs, IndexSettings(embedder="hash"))
    questions = tmp_path / "q.json"
    questions.write_text(
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
    argv = ["--index", str(tmp_path / "idx"), "--dataset", "hotpotqa", "--questions"]
    argv += [str(questions), "--setting", "tolerance=1e-8", "--setting", "tolerance=1e-6"]
    main([*argv, "--rounds", "2", "-k", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert [row["setting"] for row in out["settings"]] == ["tolerance=1e-8", "tolerance=1e-6"]
    assert all(row["same_top_k_as_first"] == 1.0 for row in out["settings"])
    assert all(row["p50_ms"] > 0 for row in out["settings"]) and out["questions"] == 1
