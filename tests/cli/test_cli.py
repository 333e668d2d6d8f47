"""The command line end to end on a tiny corpus, without any model."""

import json

import pytest

from quillian.cli.main import main

CORPUS = [
    {"title": "Ada Lovelace", "text": "Ada Lovelace worked with Charles Babbage."},
    {"title": "Charles Babbage", "text": "Charles Babbage was born in London."},
    {"title": "London", "text": "London is the capital of England."},
]
EXTRACTIONS = [
    {
        **CORPUS[0],
        "entities": ["Ada Lovelace", "Charles Babbage"],
        "triples": [["Ada Lovelace", "worked with", "Charles Babbage"]],
    },
    {
        **CORPUS[1],
        "entities": ["Charles Babbage", "London"],
        "triples": [["Charles Babbage", "born in", "London"]],
    },
    {
        **CORPUS[2],
        "entities": ["London", "England"],
        "triples": [["London", "capital of", "England"]],
    },
]


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "ex.jsonl").write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    return tmp_path


def index(corpus, *extra):
    return main(
        [
            "index",
            str(corpus / "corpus.json"),
            "--out",
            str(corpus / "idx"),
            "--embedder",
            "hash",
            "--extractions",
            str(corpus / "ex.jsonl"),
            *extra,
        ]
    )


def test_index_then_retrieve(corpus, capsys):
    assert index(corpus) == 0
    assert "documents: 3 new, 0 already indexed, 0 failed" in capsys.readouterr().out
    assert index(corpus) == 0  # a rerun skips what is indexed
    assert "documents: 0 new, 3 already indexed" in capsys.readouterr().out
    code = main(
        [
            "retrieve",
            str(corpus / "idx"),
            "Where was Charles Babbage born?",
            "--method",
            "sa",
            "-k",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].startswith("sa: 2 passages")
    # hash embeddings make cosines arbitrary: the named entity's passage must be in the top 2
    assert any("Charles Babbage:" in line for line in out.splitlines()[1:3])
    assert "seeds: Charles Babbage (lexical" in out


def test_retrieve_json_carries_the_trace(corpus, capsys):
    index(corpus)
    capsys.readouterr()
    assert main(["retrieve", str(corpus / "idx"), "Ada Lovelace", "--json", "-k", "3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["method"] == "sa" and len(result["passages"]) == 3
    assert result["passages"][0]["title"] == "Ada Lovelace"
    assert result["trace"]["seeds"][0]["name"] == "Ada Lovelace"
    relation = result["trace"]["relations"][0] if result["trace"]["relations"] else None
    assert relation is None or relation["sentence"]


@pytest.mark.parametrize("method", ["sa-paper", "ppr", "dense", "bm25"])
def test_every_method_answers(corpus, capsys, method):
    index(corpus)
    assert main(["retrieve", str(corpus / "idx"), "London", "--method", method, "-k", "1"]) == 0
    assert f"{method}: 1 passages" in capsys.readouterr().out


def test_missing_index_is_a_clear_error(tmp_path, capsys):
    assert main(["retrieve", str(tmp_path / "nope"), "q"]) == 2
    assert "no such index directory" in capsys.readouterr().err


def test_bad_corpus_names_the_entry_and_stores_nothing(tmp_path, capsys):
    (tmp_path / "bad.json").write_text(json.dumps([{"title": "x", "text": "ok"}, {"title": 3}]))
    code = main(
        ["index", str(tmp_path / "bad.json"), "--out", str(tmp_path / "idx"), "--embedder", "hash"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "bad.json" in err and "entry 1" in err
    assert not (tmp_path / "idx").exists()


def test_unknown_file_type_is_refused(tmp_path, capsys):
    (tmp_path / "notes.pdf").write_bytes(b"%PDF")
    assert (
        main(
            [
                "index",
                str(tmp_path / "notes.pdf"),
                "--out",
                str(tmp_path / "i"),
                "--embedder",
                "hash",
            ]
        )
        == 2
    )
    assert "notes.pdf" in capsys.readouterr().err
