"""Bad input to every command is one clear line and a non-zero exit, never a traceback:
corpus shapes, numeric options, ``--out`` targets, failed documents, long questions,
missing or foreign index paths, and an unexpected error."""

import json
from pathlib import Path

import pytest

from quillian.cli.main import DEBUG_ENV, main
from quillian.cli.render import print_build
from quillian.components.ingestion.pipeline import IngestFailure, IngestReport
from quillian.engine import Engine
from quillian.engine.engine import MAX_QUESTION_CHARS
from quillian.index import BuildReport
from quillian.server import models

CORPUS = [
    {"title": "Ada Lovelace", "text": "Ada Lovelace worked with Charles Babbage."},
    {"title": "Charles Babbage", "text": "Charles Babbage was born in London."},
]
#: spaCy's advice on a long text, five lines as a user saw it under each failed document.
SPACY_ADVICE = (
    "[E088] Text of length 1000017 exceeds maximum of 1000000. The parser and NER models\n"
    "require roughly 1GB of temporary memory per 100,000 characters in the input.\n"
    "This means long texts may cause memory allocation errors. If you're not using the\n"
    "parser or NER, it's probably safe to increase the `nlp.max_length` limit.\n"
    "The limit is in number of characters."
)


def run(capsys, *argv):
    """``quillian argv``: its exit code, stdout and stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.out, captured.err


def error_line(err):
    """The one ``error:`` line on stderr (there must be exactly one)."""
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    return line


def index_args(corpus, out, *extra):
    return ["index", corpus, "--out", out, "--embedder", "hash", *extra]


@pytest.fixture
def built(tmp_path, capsys):
    """A small hash-embedded index (spaCy extraction), and its folder."""
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    code, _, _ = run(capsys, *index_args(tmp_path / "corpus.json", tmp_path / "idx"))
    assert code == 0
    return tmp_path


# --- corpus shapes ----------------------------------------------------------------------


def test_a_json_object_is_indexed_as_one_document(tmp_path, capsys):
    (tmp_path / "one.json").write_text(json.dumps({"title": "Ada", "text": "Ada wrote notes."}))
    code, out, _ = run(capsys, *index_args(tmp_path / "one.json", tmp_path / "idx"))
    assert code == 0
    assert "documents: 1 new, 0 already indexed, 0 failed" in out
    code, out, _ = run(capsys, "retrieve", tmp_path / "idx", "notes", "--json", "-k", "5")
    assert [p["title"] for p in json.loads(out)["passages"]] == ["Ada"]


def test_malformed_entries_are_refused_one_by_one_and_the_rest_indexed(tmp_path, capsys):
    corpus = [CORPUS[0], {"title": "no text"}, {"title": "B", "text": 5}, CORPUS[1]]
    (tmp_path / "c.json").write_text(json.dumps(corpus))
    code, out, err = run(capsys, *index_args(tmp_path / "c.json", tmp_path / "idx"))
    assert code == 1
    assert "documents: 2 new, 0 already indexed, 0 failed, 2 refused" in out
    refused = [line.strip() for line in out.splitlines() if "refused:" in line]
    assert refused == [
        f"refused: {tmp_path / 'c.json'}, field 'text': entry 1: missing field 'text'",
        f"refused: {tmp_path / 'c.json'}, field 'text': entry 2: field 'text' must be a "
        "string, got a int",
    ]
    assert "index: documents 2," in out and "missing field" not in err
    code, out, _ = run(capsys, "retrieve", tmp_path / "idx", "Babbage", "--json", "-k", "5")
    assert sorted(p["title"] for p in json.loads(out)["passages"]) == [
        "Ada Lovelace",
        "Charles Babbage",
    ]


def test_a_jsonl_line_that_is_not_json_is_refused_on_its_own(tmp_path, capsys):
    lines = [json.dumps(CORPUS[0]), '{"title": "broken", ', json.dumps(CORPUS[1])]
    (tmp_path / "c.jsonl").write_text("\n".join(lines))
    code, out, _ = run(capsys, *index_args(tmp_path / "c.jsonl", tmp_path / "idx"))
    assert code == 1 and "2 new, 0 already indexed, 0 failed, 1 refused" in out
    assert f"refused: {tmp_path / 'c.jsonl'}, line 2: invalid JSON" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("5", "expected a list of"),
        ('"just text"', "one such object"),
        (json.dumps({"title": "Ada", "body": "x"}), "the document object: missing field 'text'"),
    ],
)
def test_a_corpus_of_no_known_shape_is_one_line_naming_the_file(
    tmp_path, capsys, content, expected
):
    (tmp_path / "c.json").write_text(content)
    code, _, err = run(capsys, *index_args(tmp_path / "c.json", tmp_path / "idx"))
    line = error_line(err)
    assert code == 2 and str(tmp_path / "c.json") in line and expected in line
    assert not (tmp_path / "idx").exists()


def test_index_help_documents_the_corpus_formats(capsys):
    code, out, _ = run(capsys, "index", "--help")
    text = " ".join(out.split())
    assert code == 0
    for shown in (".txt", ".md", ".jsonl", '{"title": ..., "text": ...}', "{title: [sentences]}"):
        assert shown in text
    assert "refused on its own" in text


# --- numeric options --------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["retrieve", "IDX", "q", "-k", "0"],
        ["retrieve", "IDX", "q", "-k", "-5"],
        ["retrieve", "IDX", "q", "--max-question-chars", "0"],
        ["index", "--chunk-size", "0", "C", "--out", "O"],
        ["index", "--overlap", "-1", "C", "--out", "O"],
        ["index", "--budget-tokens", "0", "C", "--out", "O"],
        ["index", "--budget-calls", "-1", "C", "--out", "O"],
        ["ask", "IDX", "q", "--concurrency", "0"],
        ["ask", "IDX", "q", "--verify-theta0", "-1"],
        ["dpo-data", "--limit", "-1"],
        ["bench", "qa", "--limit", "0"],
        ["bench", "qa", "--offset", "-1"],
        ["bench", "retrieval", "--first-n", "0"],
        ["bench", "tune", "--folds", "1"],
        ["know3", "calibrate", "--limit", "0"],
        ["kg", "show", "KG", "Ada", "--limit", "-1"],
        ["kg", "show", "KG", "Ada", "--triples", "-1"],
        ["kg", "link", "KG", "--show", "-1"],
        ["kg", "link", "KG", "--description-candidates", "-1"],
        ["kg", "ann", "KG", "--nlist", "0"],
        ["kg", "ann", "KG", "--nprobe", "-1"],
        ["kg", "import", "--max-bad-lines", "-2"],
        ["kg", "train-kge", "KG", "--epochs", "0"],
        ["kg", "train-kge", "KG", "--batch-size", "0"],
        ["kg", "train-kge", "KG", "--negatives", "0"],
        ["kg", "train-kge", "KG", "--dim", "0"],
    ],
)
def test_a_numeric_option_out_of_range_is_a_usage_error(tmp_path, capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2
    option = next(a for a in argv if a.startswith("-"))
    flat = " ".join(err.replace("│", " ").split())
    assert f"Invalid value for '{option}'" in flat


def test_retrieve_k_zero_on_a_real_index_is_one_usage_error(built, capsys):
    for k in ("0", "-5"):
        code, out, err = run(capsys, "retrieve", built / "idx", "Ada", "-k", k)
        assert code == 2 and out == "" and "Invalid value for '-k'" in err


# --- --out ------------------------------------------------------------------------------


def test_out_naming_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "taken").write_text("mine")
    code, _, err = run(capsys, *index_args(tmp_path / "corpus.json", tmp_path / "taken"))
    assert code == 2
    assert error_line(err) == (
        f"error: --out {tmp_path / 'taken'}: a file, not a folder; choose an empty or new folder"
    )
    assert (tmp_path / "taken").read_text() == "mine"


def test_out_naming_a_folder_of_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "a.jpg").write_bytes(b"\xff")
    code, _, err = run(capsys, *index_args(tmp_path / "corpus.json", photos))
    assert code == 2
    line = error_line(err)
    assert str(photos) in line and "no manifest.json" in line
    assert line.endswith("choose an empty or new folder")
    assert sorted(p.name for p in photos.iterdir()) == ["a.jpg"]


def test_out_may_be_an_empty_folder_or_an_index(tmp_path, capsys):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "empty").mkdir()
    assert run(capsys, *index_args(tmp_path / "corpus.json", tmp_path / "empty"))[0] == 0
    code, out, _ = run(capsys, *index_args(tmp_path / "corpus.json", tmp_path / "empty"))
    assert code == 0 and "0 new, 2 already indexed" in out


# --- failed documents -------------------------------------------------------------------


def test_each_failed_document_is_listed_once_on_one_line(tmp_path, capsys):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "routes.json").write_text(json.dumps({"no-such-prompt": "x"}))
    llm = f"scripted:{tmp_path / 'routes.json'}"
    argv = index_args(tmp_path / "corpus.json", tmp_path / "idx", "--extractor", "llm")
    code, out, err = run(capsys, *argv, "--llm", llm, "--no-cache")
    assert code == 1
    assert "documents: 0 new, 0 already indexed, 2 failed" in out
    assert "failed_documents 2" in out  # the summary and the index's counts agree
    failed = [line.strip() for line in out.splitlines() if line.strip().startswith("failed:")]
    reason = "UnscriptedPromptError: no scripted answer for prompt 'sa-rag.ner@1'"
    corpus = tmp_path / "corpus.json"
    assert failed == [
        f"failed: {corpus} (Ada Lovelace): {reason}",
        f"failed: {corpus} (Charles Babbage): {reason}",
    ]
    assert "no scripted answer" not in err  # not again in the log


@pytest.mark.model
def test_a_million_character_file_is_summed_up_once_and_consistently(tmp_path, capsys):
    """Past spaCy's 1,000,000-character limit: whether the document fails or is
    indexed in pieces, the summary's counts agree with the index's and a failure is one
    line, not spaCy's advice again in the log."""
    # long words: past the limit in fewer tokens, so spaCy reads it in half the time
    words = " ".join(["Constantinople", "riverbanks", "London", "municipalities"] * 21_000)
    (tmp_path / "big.txt").write_text(words[:1_000_018])
    (tmp_path / "small.json").write_text(json.dumps(CORPUS[0]))
    argv = ["index", tmp_path / "big.txt", tmp_path / "small.json", "--out", tmp_path / "idx"]
    code, out, err = run(capsys, *argv, "--embedder", "hash")
    summary = next(line for line in out.splitlines() if line.startswith("documents:"))
    failed = int(summary.split(", ")[2].split()[0])
    assert f"failed_documents {failed}" in out
    assert code == (1 if failed else 0)
    lines = [line for line in out.splitlines() if line.strip().startswith("failed:")]
    shown = [line.replace(str(tmp_path / "big.txt"), "big.txt") for line in lines]
    assert len(lines) == failed and all(len(line) < 330 for line in shown)
    assert "E088" not in err and "max_length" not in err


def test_a_multi_line_failure_prints_as_one_line(capsys):
    failure = IngestFailure("doc-1", "big", "/data/big.txt", f"ValueError: {SPACY_ADVICE}")
    report = BuildReport(
        ingest=IngestReport(total=2, new=1, skipped=0, failed=1, failures=(failure,)),
        counts={"documents": 1, "failed_documents": 1},
    )
    print_build(report, Path("idx"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "documents: 1 new, 0 already indexed, 1 failed"
    assert lines[1].startswith("  failed: /data/big.txt: ValueError: [E088] Text of length")
    assert lines[1].endswith("…") and len(lines[1]) < 340
    assert lines[2] == "index: documents 1, failed_documents 1"
    assert lines[3] == "written to idx"


# --- long questions ---------------------------------------------------------------------


def test_a_question_over_the_limit_is_refused_naming_both(built, capsys):
    question = "Ada " * 25_000
    code, out, err = run(capsys, "retrieve", built / "idx", question)
    assert code == 2 and out == ""
    line = error_line(err)
    assert "100,000 characters" in line and f"limit of {MAX_QUESTION_CHARS:,}" in line
    assert "--max-question-chars" in line
    code, out, _ = run(
        capsys, "retrieve", built / "idx", question, "--max-question-chars", "100000"
    )
    assert code == 0 and out.startswith("sa: ")


def test_ask_refuses_a_long_question_before_any_model_call(built, capsys):
    (built / "routes.json").write_text(json.dumps({"sa-rag.answer": "never asked"}))
    llm = f"scripted:{built / 'routes.json'}"
    long = "x" * (MAX_QUESTION_CHARS + 1)
    code, out, err = run(capsys, "ask", built / "idx", long, "--llm", llm, "--no-cache")
    assert code == 2 and out == "" and "more than the limit of 4,000" in error_line(err)


def test_the_http_and_mcp_requests_take_the_engines_limit():
    at_limit = "q" * MAX_QUESTION_CHARS
    assert models.AnswerRequest(question=at_limit).question == at_limit
    assert models.RetrieveRequest(query=at_limit).query == at_limit
    with pytest.raises(ValueError, match="at most 4000 characters"):
        models.AnswerRequest(question=at_limit + "q")
    with pytest.raises(ValueError, match="at most 4000 characters"):
        models.RetrieveRequest(query=at_limit + "q")


# --- paths and methods ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["retrieve", "ask"])
def test_a_missing_index_or_a_folder_that_is_not_one_is_one_line(tmp_path, capsys, command):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    extra = ["--llm", "scripted:none.json"] if command == "ask" else []
    code, _, err = run(capsys, command, tmp_path / "nope", "q", *extra)
    assert code == 2 and error_line(err).endswith("nope: no such index directory")
    code, _, err = run(capsys, command, tmp_path / "notes", "q", *extra)
    assert code == 2 and error_line(err).endswith("not a Quillian index (no manifest.json)")


def test_an_unknown_method_is_a_usage_error_listing_the_methods(built, capsys):
    code, _, err = run(capsys, "ask", built / "idx", "q", "--method", "nope")
    assert code == 2 and "unknown method 'nope'" in " ".join(err.replace("│", " ").split())
    code, _, err = run(capsys, "retrieve", built / "idx", "q", "--method", "nope")
    assert code == 2 and "'nope' is not one of sa," in err


def test_an_unreadable_input_is_one_line(tmp_path, capsys):
    (tmp_path / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    code, _, err = run(capsys, *index_args(tmp_path / "gone.txt", tmp_path / "idx"))
    assert code == 2 and error_line(err).endswith("gone.txt: no such file or directory")


def permissions_hold(tmp_path):
    """Whether file modes bind this process (not for root with its usual capabilities)."""
    probe = tmp_path / "probe"
    probe.write_text("x")
    probe.chmod(0)
    try:
        probe.read_text()
    except PermissionError:
        return True
    finally:
        probe.chmod(0o600)
    return False


def test_files_and_indexes_without_permission_are_one_line(built, capsys):
    if not permissions_hold(built):
        pytest.skip("this process reads and writes anything (root)")
    secret = built / "secret.txt"
    secret.write_text("hidden")
    secret.chmod(0)
    code, _, err = run(capsys, *index_args(secret, built / "idx2"))
    flat = " ".join(err.replace("│", " ").split())
    assert code == 2 and "is not readable" in flat  # typer's check of a PATH it is given
    notes = built / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("readable")
    (notes / "b.txt").write_text("not")
    (notes / "b.txt").chmod(0)
    code, _, err = run(capsys, *index_args(notes, built / "idx2"))
    assert code == 2 and error_line(err).endswith("b.txt: cannot read file: Permission denied")
    locked = built / "locked"
    locked.mkdir(mode=0o500)
    code, _, err = run(capsys, *index_args(built / "corpus.json", locked / "idx"))
    assert code == 2 and "Permission denied" in error_line(err)
    (built / "idx").chmod(0)
    try:
        code, _, err = run(capsys, "retrieve", built / "idx", "Ada")
        assert code == 2 and "Permission denied" in error_line(err)
    finally:
        (built / "idx").chmod(0o755)


def test_an_index_path_the_system_cannot_create_is_one_line(tmp_path, capsys):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    code, _, err = run(capsys, *index_args(tmp_path / "corpus.json", "/proc/quillian/idx"))
    assert code == 2 and error_line(err).startswith("error: /proc/quillian")


# --- an unexpected error ----------------------------------------------------------------


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(built, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the disk\nwobbled")

    monkeypatch.setattr(Engine, "retrieve", broken)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    code, _, err = run(capsys, "retrieve", built / "idx", "Ada")
    assert code == 3
    assert err == (
        "error: unexpected RuntimeError: the disk wobbled; run with --debug "
        f"(or {DEBUG_ENV}=1) for the traceback\n"
    )
    assert main(["--debug", "retrieve", str(built / "idx"), "Ada"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("error: unexpected RuntimeError: the disk wobbled\n")
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert main(["retrieve", str(built / "idx"), "Ada"]) == 3
    assert "Traceback" in capsys.readouterr().err
