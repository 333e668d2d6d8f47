"""``quillian index`` keeps every document's text exactly, refuses a document on its own,
counts its failures the same way everywhere, and indexes documents longer than spaCy
takes at once (issue 51)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quillian.cli.main import main
from quillian.engine import Engine
from quillian.types import Document

#: Characters that break lines for ``str.splitlines`` or are otherwise easy to lose:
#: separators, controls, NUL, a BOM, carriage returns, astral characters.
AWKWARD = [
    *"\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\x1f\r\n\x00\x01\x7f\ufeff\t ",
    "😀",
    "\U0010ffff",
    "𠀀",
]
#: Any text a JSON string can hold but a lone surrogate (category Cs), rich in the
#: awkward characters.
TEXT = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(AWKWARD)), max_size=40
)
#: An extractions file with one record for no document: extraction without a model.
NO_EXTRACTIONS = {"title": "Nothing", "text": "nothing", "entities": [], "triples": []}

_runs = itertools.count()


def index(corpus: Path, out: Path, *paths: Path) -> int:
    extractions = corpus.parent / "ex.jsonl"
    extractions.write_text(json.dumps(NO_EXTRACTIONS) + "\n")
    args = ["index", *map(str, paths), "--out", str(out), "--embedder", "hash"]
    return main([*args, "--extractions", str(extractions)])


def passage(engine: Engine, marker: str) -> str:
    (found,) = engine.retrieve(marker, method="bm25", k=1).passages
    return found.text


@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=3), plain=TEXT)
def test_any_text_round_trips_through_quillian_index(tmp_path, capsys, texts, plain):
    """Documents of a JSON corpus are stored exactly, and their passage is the text
    without its surrounding whitespace; a text file's only change is the documented
    one (``\\r\\n`` and ``\\r`` read as ``\\n``, a leading BOM dropped)."""
    run = tmp_path / f"run{next(_runs)}"
    run.mkdir()
    docs = [
        Document(f"{before} qmark{i}q {after}", title)
        for i, (title, before, after) in enumerate(texts)
    ]
    (run / "corpus.json").write_text(json.dumps([{"title": d.title, "text": d.text} for d in docs]))
    raw = f"{plain} qmarkplainq \ufeff{plain}"
    (run / "plain.txt").write_bytes(raw.encode("utf-8"))
    assert index(run, run / "idx", run / "corpus.json", run / "plain.txt") == 0, capsys.readouterr()
    engine = Engine.open(run / "idx")
    try:
        for i, doc in enumerate(docs):
            stored = engine.document(doc.id)
            assert stored is not None and stored.text == doc.text
            assert passage(engine, f"qmark{i}q") == doc.text.strip()
        read = raw.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
        assert passage(engine, "qmarkplainq") == read.strip()
    finally:
        engine.close()


def test_a_refused_entry_fails_alone_and_every_count_agrees(tmp_path, capsys):
    """An entry whose text holds an unpaired surrogate escape is refused naming it; the
    others are indexed, the summary's failures and the index's count agree, also when
    the rest of the build is reused unchanged (it said "1 failed" and
    "failed_documents 0")."""
    good = [{"title": "Ada Lovelace", "text": "Ada Lovelace wrote the first program."}]
    (tmp_path / "good.json").write_text(json.dumps(good))
    assert index(tmp_path, tmp_path / "idx", tmp_path / "good.json") == 0
    capsys.readouterr()
    bad = [*good, {"title": "Bad", "text": "lone \ud800 surrogate"}]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert index(tmp_path, tmp_path / "idx", tmp_path / "bad.json") == 1
    out = capsys.readouterr().out
    assert "documents: 0 new, 1 already indexed, 1 failed" in out
    assert "entry 1: text holds an unpaired surrogate (U+D800 at character 5)" in out
    assert "failed_documents 1" in out and "failed_documents 0" not in out
    engine = Engine.open(tmp_path / "idx")
    try:
        page = engine.documents()
        assert page.total == 2
        assert sorted(d.status for d in page.documents) == ["failed", "processed"]
    finally:
        engine.close()


@pytest.mark.model
def test_a_file_longer_than_spacy_takes_is_indexed(tmp_path, capsys):
    """A file over spaCy's 1,000,000 characters failed inside spaCy ("1 failed", its
    five-line advice printed twice, yet "failed_documents 0" on an existing index); it
    is read in pieces and indexed, its entities found to its end, as passages of a
    bounded size. (Long filler words
    keep the model's work, and this test, short.)"""
    (tmp_path / "small.txt").write_text("Charles Babbage was born in London.")
    assert main(["index", str(tmp_path / "small.txt"), "--out", str(tmp_path / "idx")]) == 0
    filler = " ".join(["Lorem" + "x" * 60] * 15) + ".\n\n"
    head = "Ada Lovelace met Charles Babbage in London.\n\n"
    tail = "Grace Hopper was born in New York City."
    text = head + filler * (1_000_050 // len(filler)) + tail
    assert len(text) > 1_000_000
    (tmp_path / "long.txt").write_text(text)
    capsys.readouterr()
    code = main(["index", str(tmp_path / "long.txt"), "--out", str(tmp_path / "idx")])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "documents: 1 new, 0 already indexed, 0 failed" in captured.out
    assert "failed_documents 0" in captured.out and "E088" not in captured.err
    engine = Engine.open(tmp_path / "idx")
    try:
        names = {e.name for e in engine.index.context.kg.entities}
        assert {"Grace Hopper", "New York City", "Ada Lovelace"} <= names
        # the file is cut into passages of at most 8,000 characters, its text kept
        hopper, lovelace = passage(engine, "Hopper"), passage(engine, "Lovelace")
        assert text.endswith(hopper) and text.startswith(lovelace)
        assert hopper.endswith(tail) and len(hopper) <= 8_000 >= len(lovelace)
    finally:
        engine.close()


@pytest.mark.model
def test_a_title_without_letters_does_not_fail_the_build(tmp_path, capsys):
    """A title of punctuation alone (found by the server's round-trip property) became a
    topic linked to its passage's entities, and the graph stage failed the whole build
    on the link's nameless end; the link is dropped, the document indexed."""
    corpus = [{"title": ")", "text": "Ada Lovelace met Charles Babbage in London."}]
    (tmp_path / "c.json").write_text(json.dumps(corpus))
    code = main(["index", str(tmp_path / "c.json"), "--out", str(tmp_path / "idx")])
    assert code == 0, capsys.readouterr().err
    engine = Engine.open(tmp_path / "idx")
    try:
        assert passage(engine, "Lovelace") == corpus[0]["text"]
    finally:
        engine.close()
