"""``quillian index --out postgresql://...`` then ``retrieve``: the same passages as the
same build into a directory (a real server; marked ``postgres``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quillian.cli.main import main
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.storage import load_model, model_directory
from quillian.engine.kge import graph_triples, train_kge
from quillian.index import open_storage, read_manifest
from quillian.testing.corpus import tiny_index

pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres

CORPUS = [
    {"title": "Ada Lovelace", "text": "Ada Lovelace worked with Charles Babbage on engines."},
    {"title": "Charles Babbage", "text": "Charles Babbage was born in London in 1791."},
    {"title": "London", "text": "London is the capital of England, on the Thames."},
    {"title": "Thames", "text": "The Thames flows through Oxford and London to the sea."},
    {"title": "Oxford", "text": "Oxford is a city in England with an old university."},
]
EXTRACTIONS = [
    {**CORPUS[0], "entities": ["Ada Lovelace", "Charles Babbage"],
     "triples": [["Ada Lovelace", "worked with", "Charles Babbage"]]},
    {**CORPUS[1], "entities": ["Charles Babbage", "London"],
     "triples": [["Charles Babbage", "born in", "London"]]},
    {**CORPUS[2], "entities": ["London", "England", "Thames"],
     "triples": [["London", "capital of", "England"], ["London", "on", "Thames"]]},
    {**CORPUS[3], "entities": ["Thames", "Oxford", "London"],
     "triples": [["Thames", "flows through", "Oxford"]]},
    {**CORPUS[4], "entities": ["Oxford", "England"],
     "triples": [["Oxford", "city in", "England"]]},
]  # fmt: skip
QUESTIONS = ["Where was Charles Babbage born?", "Which river flows through Oxford?"]


def _index(tmp_path: Path, out: str, corpus: list[dict[str, str]], *flags: str) -> int:
    (tmp_path / "corpus.json").write_text(json.dumps(corpus))
    (tmp_path / "ex.jsonl").write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    argv = ["index", str(tmp_path / "corpus.json"), "--out", out, "--embedder", "hash", *flags]
    return main([*argv, "--extractions", str(tmp_path / "ex.jsonl")])


def _retrieve(location: str, question: str, method: str, capsys: pytest.CaptureFixture[str]):
    assert main(["retrieve", location, question, "--method", method, "-k", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    return [(p["title"], round(p["score"], 5)) for p in result["passages"]]


def test_index_and_retrieve_match_the_embedded_build(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    embedded = str(tmp_path / "idx")
    # both in float32, so that the scores agree to the last digit shown (float16's are
    # summed in another order by the server: the next test)
    assert _index(tmp_path, embedded, CORPUS, "--vector-dtype", "float32") == 0
    assert _index(tmp_path, postgres_url, CORPUS, "--vector-dtype", "float32") == 0
    out = capsys.readouterr().out
    assert "documents: 5 new" in out and "written to postgresql://postgres@" in out
    assert read_manifest(postgres_url)["state"] == "complete"
    assert read_manifest(postgres_url)["counts"] == read_manifest(embedded)["counts"]
    for method in ("sa", "ppr", "dense", "bm25"):
        for question in QUESTIONS:
            got = _retrieve(postgres_url, question, method, capsys)
            assert got and got == _retrieve(embedded, question, method, capsys), method


def test_a_float16_workspace_answers_as_a_float16_folder(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new workspace stores float16, pgvector's ``halfvec`` (a new folder stores int8,
    which pgvector has no type for), and answers as a float16 folder does."""
    embedded = str(tmp_path / "idx")
    assert _index(tmp_path, embedded, CORPUS, "--vector-dtype", "float16") == 0
    assert _index(tmp_path, postgres_url, CORPUS) == 0
    capsys.readouterr()
    for location in (embedded, postgres_url):
        assert read_manifest(location)["config"]["vector_dtype"] == "float16"
    for method in ("sa", "ppr", "dense"):
        for question in QUESTIONS:
            got = _retrieve(postgres_url, question, method, capsys)
            want = _retrieve(embedded, question, method, capsys)
            # the same passages; scores within float16's rounding (the server sums the
            # products of halfvec values in its own order, the folder in float64)
            assert got and [t for t, _ in got] == [t for t, _ in want], method
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)


def test_a_second_machine_reads_the_index_from_the_server(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another cache directory (another machine) fetches the files and rebuilds the
    snapshot from the tables; a rerun of the build adds nothing."""
    assert _index(tmp_path, postgres_url, CORPUS) == 0
    capsys.readouterr()
    first = _retrieve(postgres_url, QUESTIONS[0], "sa", capsys)
    elsewhere = postgres_url.replace("pg-cache", "other-cache")
    assert _retrieve(elsewhere, QUESTIONS[0], "sa", capsys) == first
    assert (tmp_path / "other-cache" / "bm25").is_dir()
    assert _index(tmp_path, elsewhere, CORPUS) == 0
    assert "documents: 0 new, 5 already indexed" in capsys.readouterr().out
    with open_storage(postgres_url) as storage:
        assert storage.documents.count_documents() == 5


def test_adding_a_document_refreshes_the_snapshot(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _index(tmp_path, postgres_url, CORPUS[:4]) == 0
    with open_storage(postgres_url) as storage:
        before = storage.graph().snapshot()
    assert _index(tmp_path, postgres_url, CORPUS) == 0
    capsys.readouterr()
    with open_storage(postgres_url) as storage:
        after = storage.graph().snapshot()
    assert after.n_nodes > before.n_nodes and after.n_edges > before.n_edges
    assert "Oxford" in [t for t, _ in _retrieve(postgres_url, "Oxford university", "bm25", capsys)]


def test_delete_through_the_command_line(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _index(tmp_path, postgres_url, CORPUS) == 0
    with open_storage(postgres_url) as storage:
        oxford = next(
            d for d in storage.documents.get_documents(_ids(storage)) if d and d.title == "Oxford"
        )
    assert main(["delete", postgres_url, oxford.id]) == 0
    out = capsys.readouterr().out
    assert "written to postgresql://postgres@" in out and "cache=" not in out
    assert read_manifest(postgres_url)["state"] == "complete"
    with open_storage(postgres_url) as storage:
        assert storage.documents.count_documents() == 4
        assert storage.documents.get_documents([oxford.id]) == [None]
    assert "Oxford" not in [
        t for t, _ in _retrieve(postgres_url, "Oxford university", "bm25", capsys)
    ]


def _ids(storage: Any) -> list[str]:
    return list(dict.fromkeys(c.doc_id for c in storage.documents.iter_chunks()))


def test_train_kge_on_a_postgres_index(postgres_url: str, tmp_path: Path) -> None:
    """The model is trained in the local cache and sent to the workspace: another
    machine (cache) finds it."""
    tiny_index(postgres_url)  # type: ignore[arg-type]
    triples = graph_triples(postgres_url)
    result = train_kge(postgres_url, ComplExConfig(dim=8, epochs=2, batch_size=8))
    assert result.epochs == 2
    elsewhere = postgres_url.replace("pg-cache", "other-cache")
    with open_storage(elsewhere) as storage:
        assert load_model(model_directory(storage.directory), triples).epochs == 2


def test_bench_retrieval_builds_and_scores_on_a_workspace(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``quillian bench retrieval --index-dir postgresql://...`` builds the dev set in
    the workspace and scores it as a folder index of the same dtype."""
    questions = [
        {"id": f"q{i}", "question": q, "answer": a, "answer_aliases": [],
         "paragraphs": [{"title": c["title"], "paragraph_text": c["text"],
                         "is_supporting": c["title"] in gold} for c in CORPUS]}
        for i, (q, a, gold) in enumerate([
            (QUESTIONS[0], "London", ("Charles Babbage",)),
            (QUESTIONS[1], "Thames", ("Thames", "Oxford")),
        ])
    ]  # fmt: skip
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "ex.jsonl").write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    scores = {}
    for location in (str(tmp_path / "idx"), postgres_url):
        argv = ["bench", "retrieval", "--dataset", "musique", "--corpus",
                str(tmp_path / "corpus.json"), "--questions", str(tmp_path / "q.jsonl"),
                "--extractions", str(tmp_path / "ex.jsonl"), "--embedder", "hash",
                "--index-dir", location, "--methods", "sa,dense,bm25", "--json"]  # fmt: skip
        assert main(argv) == 0
        result = json.loads(capsys.readouterr().out)
        scores[location] = {m: result["_per_question"][m] for m in ("sa", "dense", "bm25")}
    assert read_manifest(postgres_url)["counts"]["documents"] == len(CORPUS)
    assert read_manifest(postgres_url)["config"]["embedder_name"] == "hash"  # --embedder
    assert all(len(v) == 2 for m in scores[postgres_url].values() for v in m.values())
    assert scores[postgres_url] == scores[str(tmp_path / "idx")]


def test_a_server_whose_pgvector_has_no_float16_is_refused_before_an_index_is_written(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """float16 is ``halfvec``, which pgvector has had since 0.7: an older one refuses a
    new workspace's default in one line naming the way out, and writes no index."""
    from quillian.errors import IndexMissingError
    from quillian.stores.postgres import vectors

    monkeypatch.setattr(vectors, "HALFVEC_SINCE", (99, 0, 0))  # every pgvector too old
    assert _index(tmp_path, postgres_url, CORPUS) == 2
    err = capsys.readouterr().err
    assert "cannot store float16 vectors" in err and "--vector-dtype float32" in err
    with pytest.raises(IndexMissingError):
        read_manifest(postgres_url)
    assert _index(tmp_path, postgres_url, CORPUS, "--vector-dtype", "float32") == 0
    assert read_manifest(postgres_url)["config"]["vector_dtype"] == "float32"


def test_int8_vectors_are_refused_for_a_workspace_before_an_index_is_written(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pgvector has no int8 type: ``--vector-dtype int8`` on a workspace fails in one
    line naming what a workspace stores, and writes no index; the default is float16."""
    from quillian.errors import IndexMissingError

    assert _index(tmp_path, postgres_url, CORPUS, "--vector-dtype", "int8") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no int8 type" in err and "float16" in err
    with pytest.raises(IndexMissingError):
        read_manifest(postgres_url)
    assert _index(tmp_path, postgres_url, CORPUS) == 0
    assert read_manifest(postgres_url)["config"]["vector_dtype"] == "float16"
