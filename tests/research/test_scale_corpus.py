"""The scale corpus builder on tiny inputs written by the tests: a fake WordNet data
file and fake bench corpora in the bench data's own formats."""

import json

import pytest

from quillian.components.ingestion.readers import read_documents
from scale_corpus import (
    Passage,
    bench_passages,
    main,
    mixed,
    parse_wordnet_line,
    text_file_lines,
    wordnet_passages,
)

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
NOUN = (
    "00001740 03 n 02 entity 0 thing 1 003 ~ 00001930 n 0000 | that which is perceived; "
    '"it was a thing of beauty"  \n'
)
ADJ = (
    "00002312 00 a 02 abaxial 0 dorsal(a) 4 002 ;c 06037666 n 0000 | facing away from the axis  \n"
)
VERB = (
    "00001740 29 v 01 breathe_in 0 005 $ 00004227 v 0000 01 + 02 00 | draw air into the lungs  \n"
)


def test_a_wordnet_line_gives_its_lemmas_and_gloss():
    assert parse_wordnet_line(NOUN) == (
        ["entity", "thing"],
        'that which is perceived; "it was a thing of beauty"',
    )
    # an adjective's marker goes, underscores become spaces, the hex count is read
    assert parse_wordnet_line(ADJ) == (["abaxial", "dorsal"], "facing away from the axis")
    assert parse_wordnet_line(VERB) == (["breathe in"], "draw air into the lungs")
    assert parse_wordnet_line(HEADER) is None and parse_wordnet_line("\n") is None


def test_a_line_without_a_gloss_is_refused_by_name():
    with pytest.raises(ValueError, match="not a WordNet data line"):
        parse_wordnet_line("00001740 03 n 02 entity 0\n")


def _fake_wordnet(folder):
    folder.mkdir()
    (folder / "data.noun").write_text(HEADER + NOUN, encoding="utf-8")
    (folder / "data.adj").write_text(HEADER + ADJ, encoding="utf-8")
    (folder / "data.verb").write_text(HEADER + VERB, encoding="utf-8")
    (folder / "data.adv").write_text(HEADER, encoding="utf-8")
    return folder


def _fake_bench(folder):
    for name, rows in {
        "musique": [{"title": "Alpha", "text": "Alpha is a town."}],
        "2wiki": [
            {"title": "Beta", "text": "Beta is a river."},
            {"title": "Beta", "text": "Beta is a river."},
        ],
    }.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "corpus.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "hotpotqa").mkdir()
    hotpot = {"Gamma": ["Gamma is a band.", " It plays rock."]}
    (folder / "hotpotqa" / "corpus.json").write_text(json.dumps(hotpot), encoding="utf-8")
    return folder


def test_every_synset_is_one_passage(tmp_path):
    passages = list(wordnet_passages(_fake_wordnet(tmp_path / "wn")))
    assert [p.title for p in passages] == ["entity, thing", "breathe in", "abaxial, dorsal"]
    assert {p.source for p in passages} == {"wordnet"}


def test_a_missing_wordnet_names_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        list(wordnet_passages(tmp_path))


def test_the_bench_formats_are_read_and_repeats_dropped(tmp_path):
    passages = list(bench_passages(_fake_bench(tmp_path)))
    assert Passage("Gamma", "Gamma is a band. It plays rock.", "hotpotqa") in passages
    kept = mixed(passages)
    assert sorted(p.title for p in kept) == ["Alpha", "Beta", "Gamma"]


def test_the_order_is_fixed_by_the_seed():
    passages = [Passage(f"t{i}", f"text {i}", "wordnet") for i in range(50)]
    assert mixed(passages, 1) == mixed(list(reversed(passages))[::-1], 1)
    assert mixed(passages, 1) != mixed(passages, 2)
    assert sorted(mixed(passages, 1), key=lambda p: int(p.title[1:])) == passages


def test_the_text_file_stops_within_its_size_and_starts_again():
    passages = [Passage("A", "one.", "x"), Passage("B", "two.", "x")]
    lines = list(text_file_lines(passages, 40))
    assert lines == ["A. one.\n\n", "B. two.\n\n", "A. one.\n\n", "B. two.\n\n"]
    assert sum(len(s) for s in lines) <= 40
    assert list(text_file_lines([], 40)) == []


def test_the_files_are_prefixes_quillian_reads(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("scale_corpus.PREFIXES", {"2": 2, "4": 4})
    monkeypatch.setattr("scale_corpus.TEXT_BYTES", 300)
    out = tmp_path / "out"
    main(
        [
            str(out),
            "--bench",
            str(_fake_bench(tmp_path / "b")),
            "--wordnet",
            str(_fake_wordnet(tmp_path / "wn")),
        ]
    )
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["passages"] == 6 and manifest["sources"]["wordnet"] == 3
    small = list(read_documents(out / "scale-2.jsonl"))
    large = list(read_documents(out / "scale-4.jsonl"))
    assert len(small) == 2 and len(large) == 4
    assert [(d.title, d.text) for d in small] == [(d.title, d.text) for d in large[:2]]
    text = (out / "scale-20mb.txt").read_text(encoding="utf-8")
    assert len(text.encode()) <= 300 and text.startswith(f"{small[0].title}. {small[0].text}\n\n")
    assert manifest["files"]["scale-4.jsonl"]["passages"] == 4
