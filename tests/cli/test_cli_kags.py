"""KAGS from the command line: an index built with the LLM 4-tuple extractor and the
kags stage, retrieval-only, and an answer, all with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quillian.cli.main import main

CORPUS = [
    {"title": "Charles Babbage", "text": "Charles Babbage was born in London."},
    {"title": "London", "text": "London is the capital of England."},
]
ROUTES = {  # tried in order: the answer prompt also holds the sentences
    "kags.answer": "Answer: London",
    "born in London": json.dumps(
        ["Charles Babbage", "was born in", "London", "Charles Babbage was born in London."]
    ),
    "capital of England": json.dumps(
        ["London", "is the capital of", "England", "London is the capital of England."]
    ),
}


def test_index_retrieve_and_ask_with_kags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "routes.json").write_text(json.dumps(ROUTES))
    llm = f"scripted:{tmp_path / 'routes.json'}"
    idx = str(tmp_path / "idx")
    build = ["index", str(tmp_path / "corpus.json"), "--out", idx, "--embedder", "keyword",
             "--extractor", "kags-llm", "--llm", llm, "--no-cache", "--for", "kags"]  # fmt: skip
    assert main(build) == 0
    capsys.readouterr()
    assert main(["retrieve", idx, "Where was Charles Babbage born?", "--method", "kags",
                 "--json"]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert result["passages"][0]["title"] == "Charles Babbage"
    relations = result["trace"]["relations"]
    assert {(r["subject"], r["hop"]) for r in relations} == {("Charles Babbage", 0), ("London", 1)}
    assert relations[0]["sentence"] == "Charles Babbage was born in London."
    assert main(["ask", idx, "Where was Charles Babbage born?", "--method", "kags", "--llm", llm,
                 "--no-cache", "--option", "h=1", "--option", "tau=0.2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "answer: London" in out
    # the generator read the relations; the passages are shown as their support
    assert "supporting passages (not read) (* states the answer):" in out
    assert "passages given to the model" not in out
    assert "relations given to the model, with their source sentences:" in out
