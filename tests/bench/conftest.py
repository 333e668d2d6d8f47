"""A tiny MuSiQue-format data set (five passages, four questions) for the benchmark
tests, and the settings of a run on it."""

from __future__ import annotations

import json

import pytest

from quillian.bench.retrieval import BenchSettings

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


@pytest.fixture
def bench_settings(data):
    """The settings of a run on ``data`` with the given retrievers."""

    def make(methods=("dense", "bm25", "ppr")) -> BenchSettings:
        return BenchSettings(
            dataset="musique",
            corpus=data / "corpus.json",
            questions=data / "questions.jsonl",
            index_dir=data / "index",
            embedder="hash",
            methods=methods,
        )

    return make


@pytest.fixture
def hotpot_index(tmp_path):
    """An index of three passages (hash embedder) and one HotpotQA-format question at
    ``tmp_path/bench/hotpotqa/questions.json``: ``(index directory, questions file)``."""
    from quillian.engine import IndexSettings, index_documents
    from quillian.types import Document

    docs = [
        Document("Ada Lovelace worked with Charles Babbage in London.", "ada", "Ada Lovelace"),
        Document("Charles Babbage designed the Analytical Engine.", "babbage", "Charles Babbage"),
        Document("London is the capital of England.", "london", "London"),
    ]
    index_documents(tmp_path / "idx", docs, IndexSettings(embedder="hash"))
    questions = tmp_path / "bench" / "hotpotqa" / "questions.json"
    questions.parent.mkdir(parents=True)
    question = {
        "_id": "q1",
        "question": "Who designed the engine Ada Lovelace worked on?",
        "answer": "Charles Babbage",
        "supporting_facts": [["Charles Babbage", 0]],
        "context": [],
    }
    questions.write_text(json.dumps([question]))
    return tmp_path / "idx", questions
