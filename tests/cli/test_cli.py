"""The command line end to end on a tiny corpus, without any model."""

import json

import pytest

from quillian.cli.main import main
from quillian.components.ingestion.readers import read_documents
from quillian.engine import Engine
from quillian.methods.table import METHODS

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
    # the paths as the API shows them: from where activation entered the relations
    # (a seed, or here Babbage, reached from the seed Ada by no relation), to a passage
    (path, *_) = [p for p in result["paths"] if p["chunk_id"]]
    assert path["seed"]["name"] == "Charles Babbage" and path["title"] == "London"
    assert path["steps"][-1]["target"] == path["entity"]
    assert path["chunk_id"] in {p["chunk_id"] for p in result["passages"]}


@pytest.mark.parametrize("method", ["sa-paper", "ppr", "dense", "bm25"])
def test_every_method_answers(corpus, capsys, method):
    index(corpus)
    assert main(["retrieve", str(corpus / "idx"), "London", "--method", method, "-k", "1"]) == 0
    assert f"{method}: 1 passages" in capsys.readouterr().out


def test_retriever_options_reach_the_retriever_and_bad_ones_are_named(corpus, capsys):
    index(corpus)
    capsys.readouterr()
    idx = str(corpus / "idx")
    base = ["retrieve", idx, "Where was Charles Babbage born?", "--method", "ppr", "--json"]
    assert main([*base, "--option", "solver=power"]) == 0
    power = json.loads(capsys.readouterr().out)
    assert main(base) == 0
    default = json.loads(capsys.readouterr().out)
    assert [p["title"] for p in power["passages"]] == [p["title"] for p in default["passages"]]
    assert {s["source"] for s in default["trace"]["seeds"]} == {"lexical", "description"}
    assert main([*base, "--option", "seeding=lexical", "--option", "seed_k=1"]) == 0
    lexical = json.loads(capsys.readouterr().out)
    assert {s["source"] for s in lexical["trace"]["seeds"]} == {"lexical"}
    # the index was built without endpoint texts: fact seeds on them are refused clearly
    assert main([*base, "--option", "triple_seeds=5"]) == 2
    assert "--endpoint-texts" in capsys.readouterr().err
    assert main([*base, "--option", "hops=2"]) == 2
    assert "retriever 'ppr' has no option 'hops'" in capsys.readouterr().err
    assert main([*base, "--option", "solver"]) == 2
    assert "must look like key=value" in capsys.readouterr().err


def test_missing_index_is_a_clear_error(tmp_path, capsys):
    assert main(["retrieve", str(tmp_path / "nope"), "q"]) == 2
    assert "no such index directory" in capsys.readouterr().err


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


def test_index_logs_a_few_progress_lines_when_stderr_is_not_a_terminal(corpus, capsys):
    assert index(corpus) == 0
    lines = capsys.readouterr().err.splitlines()
    stages = {line.split(":")[0] for line in lines}
    assert lines, "a log should show the build's stages"
    # a start and an end line per stage on a build this quick, never one line per item
    assert len(lines) <= 2 * len(stages)
    assert all("elapsed" in line for line in lines)
    assert any(line.endswith(", done") for line in lines)


@pytest.mark.parametrize(
    ("name", "content", "named"),
    [
        ("empty.txt", "", "empty.txt: empty document"),
        ("blank.md", "  \n\n", "blank.md: empty document"),
        ("empty.json", "[]", "empty.json: no documents"),
    ],
)
def test_indexing_nothing_is_one_clear_line(tmp_path, capsys, name, content, named):
    (tmp_path / name).write_text(content)
    argv = ["index", str(tmp_path / name), "--out", str(tmp_path / "i"), "--embedder", "hash"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert error.startswith("error: nothing to index: ") and error.endswith(named)
    assert "Traceback" not in err and not (tmp_path / "i").exists()


def test_a_folder_of_empty_files_names_them(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.md", "d.txt"):
        (folder / name).write_text("")
    assert main(["index", str(folder), "--out", str(tmp_path / "i"), "--embedder", "hash"]) == 2
    (error,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert "a.txt: empty document" in error and "and 1 more skipped" in error


def test_delete_by_id_and_by_path(corpus, capsys):
    index(corpus)
    capsys.readouterr()
    doc_id = next(read_documents(corpus / "corpus.json")).id
    assert main(["delete", str(corpus / "idx"), doc_id]) == 0
    out = capsys.readouterr().out
    assert f"removed 1 documents: {doc_id}" in out and "index: documents 2, chunks 2" in out
    assert main(["retrieve", str(corpus / "idx"), "Ada Lovelace", "--json"]) == 0
    titles = [p["title"] for p in json.loads(capsys.readouterr().out)["passages"]]
    assert "Ada Lovelace" not in titles and len(titles) == 2
    assert main(["delete", str(corpus / "idx"), doc_id]) == 2  # already gone
    assert "no such document" in capsys.readouterr().err
    assert main(["delete", str(corpus / "idx"), "--path", str(corpus / "corpus.json")]) == 2
    assert main(["delete", str(corpus / "idx")]) == 2
    assert "DOC_ID... or --path" in capsys.readouterr().err


def test_methods_lists_the_table(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for spec in METHODS.values():
        assert f"{spec.name}" in out and spec.summary in out
    assert "kg-infused-rag (alias kg-infused):" in out
    assert "--option k=INT (default 6)" in out and "--kg: needed" in out
    assert main(["methods", "--json"]) == 0
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(records) == list(METHODS)
    vanilla = records["vanilla-rag"]
    assert vanilla["retriever"] == "dense" and vanilla["needs_kg"] is False
    assert {"name": "note", "type": "bool", "default": True} in [
        {k: o[k] for k in ("name", "type", "default")} for o in vanilla["options"]
    ]
    assert records["kg-infused-rag"]["needs_kg"] and records["no-retrieval"]["options"] == []


def test_help_lists_the_methods_with_summaries_and_options(capsys):
    assert main(["ask", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines
    for spec in METHODS.values():
        assert f"{spec.name}" in out and " ".join(spec.summary.split()) in out
    assert "max_subquestions=4" in out


def test_usage_errors_exit_2_with_the_usage(corpus, capsys):
    assert main(["retrieve", str(corpus), "q", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert "Usage: quillian retrieve" in err and "--no-such-flag" in err
    assert main(["retrieve", str(corpus), "q", "--method", "nope"]) == 2
    assert "'nope' is not one of sa, sa-paper" in capsys.readouterr().err
    assert main([]) == 2  # no command: the help, as a usage error


def test_ctrl_c_says_how_to_resume(corpus, capsys, monkeypatch):
    index(corpus)
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Engine, "retrieve", interrupted)
    assert main(["retrieve", str(corpus / "idx"), "q"]) == 130
    assert capsys.readouterr().err == "interrupted; rerun the same command to resume\n"
