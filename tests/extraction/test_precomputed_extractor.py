"""Importing precomputed LLM (OpenIE) extractions from JSONL, bad lines included."""

import json

import pytest

from quillian.components.extraction.base import Extractor
from quillian.components.extraction.precomputed import PrecomputedExtractor
from quillian.errors import ConfigError, InputError
from quillian.types import Chunk, normalize_name

CURIE_TEXT = "Marie Curie was born in Warsaw. She won the Nobel Prize in 1903."
CURIE = {
    "title": "Marie Curie",
    "text": CURIE_TEXT,
    "entities": ["Marie Curie", "Warsaw", "Nobel Prize"],
    "triples": [
        ["Marie Curie", "born in", "Warsaw"],
        ["Marie Curie", "won", "Nobel Prize"],
        ["Nobel Prize", "awarded in", 1903],  # a number: repaired as text
        ["Warsaw", "is a city"],  # 2 elements: skipped
        ["Marie Curie", "is", "wife of", "Pierre Curie"],  # 4 elements: repaired
        ["Marie Curie", "aka", "marie curie"],  # self-loop: skipped when extracting
    ],
}
TOWNSHIP_TEXT = "Au Gres Township is a civil township of Arenac County.  It is in Michigan."
TOWNSHIP = {
    "title": "Au Gres Township, Michigan",
    "text": TOWNSHIP_TEXT,
    "entities": ["Au Gres Township", "Arenac County", None],
    "triples": "not a list",
}


def write_jsonl(path, lines):
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def chunk(text, title="", doc_id="doc-1", index=0):
    return Chunk(doc_id=doc_id, index=index, text=text, start=0, end=len(text), title=title)


@pytest.fixture
def openie_file(tmp_path):
    return write_jsonl(
        tmp_path / "openie.jsonl",
        [
            CURIE,  # line 1
            '{"title": "Broken", "text": ',  # line 2: invalid JSON
            {"title": "No text"},  # line 3
            "",  # line 4: blank, ignored
            TOWNSHIP,  # line 5
            ["not", "an", "object"],  # line 6
            CURIE,  # line 7: duplicate of line 1
        ],
    )


def test_report_names_every_problem_with_its_line(openie_file):
    extractor = PrecomputedExtractor(openie_file)
    report = extractor.report
    assert (report.lines, report.records) == (7, 3)
    problems = {(i.line, i.field, i.action) for i in report.issues}
    assert problems == {
        (1, "triples[2][2]", "repaired"),
        (1, "triples[3]", "skipped"),
        (1, "triples[4]", "repaired"),
        (2, "", "skipped"),
        (3, "text", "skipped"),
        (5, "entities[2]", "skipped"),
        (5, "triples", "skipped"),
        (6, "", "skipped"),
        (7, "", "skipped"),  # a duplicate: its own item problems are listed too
        (7, "triples[2][2]", "repaired"),
        (7, "triples[3]", "skipped"),
        (7, "triples[4]", "repaired"),
    }
    assert report.counts()["triples: repaired"] == 4
    assert "invalid JSON" in next(i.message for i in report.issues if i.line == 2)


def test_extraction_from_a_record(openie_file):
    extractor = PrecomputedExtractor(openie_file)
    assert isinstance(extractor, Extractor)
    # matched although the chunk's whitespace differs from the record's
    c = chunk(CURIE_TEXT.replace(". ", ".\n  "), title="Marie Curie")
    [extraction] = extractor.extract([c])
    assert (extraction.chunk_id, extraction.doc_id) == (c.id, "doc-1")
    entities = {e.name: e for e in extraction.entities}
    assert set(entities) == {"Marie Curie", "Warsaw", "Nobel Prize", "1903", "Pierre Curie"}
    topic = entities["Marie Curie"]
    assert topic.is_topic and topic.type == "TITLE" and (topic.start, topic.end) == (0, 11)
    assert entities["Warsaw"].description == "Marie Curie was born in Warsaw."
    # not in the text: described by its triple
    assert entities["Pierre Curie"].description == "Marie Curie is wife of Pierre Curie"
    assert entities["Pierre Curie"].start == -1
    triples = {(t.subject, t.predicate, t.object): t for t in extraction.triples}
    assert set(triples) == {
        ("Marie Curie", "born in", "Warsaw"),
        ("Marie Curie", "won", "Nobel Prize"),
        ("Nobel Prize", "awarded in", "1903"),
        ("Marie Curie", "is wife of", "Pierre Curie"),
    }
    born = triples[("Marie Curie", "born in", "Warsaw")]
    assert born.description == "Marie Curie born in Warsaw"
    assert born.provenance.sentence == "Marie Curie was born in Warsaw."
    p = born.provenance
    assert (p.doc_id, p.chunk_id) == ("doc-1", c.id) and c.text[p.start : p.end] == p.sentence
    # both ends in one sentence: that sentence
    awarded = triples[("Nobel Prize", "awarded in", "1903")].provenance
    assert awarded.sentence == "She won the Nobel Prize in 1903."
    # no sentence holds both ends: the subject's sentence
    won = triples[("Marie Curie", "won", "Nobel Prize")].provenance
    assert won.sentence == "Marie Curie was born in Warsaw."
    # the subject is not in the text: no sentence
    wife = triples[("Marie Curie", "is wife of", "Pierre Curie")].provenance
    assert wife.sentence == "Marie Curie was born in Warsaw."
    self_loop = [i for i in extractor.report.issues if "same entity" in i.message]
    assert [i.line for i in self_loop] == [1]


def test_every_triple_names_an_extracted_entity(openie_file):
    extractor = PrecomputedExtractor(openie_file)
    chunks = [chunk(CURIE_TEXT, "Marie Curie"), chunk(TOWNSHIP_TEXT, TOWNSHIP["title"], "d2")]
    for extraction in extractor.extract(chunks):
        keys = {normalize_name(n) for e in extraction.entities for n in (e.name, *e.aliases)}
        for triple in extraction.triples:
            assert {normalize_name(triple.subject), normalize_name(triple.object)} <= keys


def test_title_base_mention_becomes_the_topic(openie_file):
    [extraction] = PrecomputedExtractor(openie_file).extract(
        [chunk(TOWNSHIP_TEXT, TOWNSHIP["title"])]
    )
    names = [(e.name, e.is_topic) for e in extraction.entities]
    assert names == [("Au Gres Township, Michigan", True), ("Arenac County", False)]
    topic = extraction.entities[0]
    assert topic.aliases == ()  # comma titles export no alias
    # the leading sentences, up to lead_chars
    assert topic.description == (
        "Au Gres Township is a civil township of Arenac County. It is in Michigan."
    )
    [short] = PrecomputedExtractor(openie_file, lead_chars=20).extract(
        [chunk(TOWNSHIP_TEXT, TOWNSHIP["title"])]
    )
    assert short.entities[0].description == "Au Gres Township is a civil township of Arenac County."


def test_missing_chunk_is_recorded_and_keeps_its_topic(openie_file):
    extractor = PrecomputedExtractor(openie_file)
    unknown = chunk("Something else entirely.", title="Elsewhere", doc_id="d9")
    out = extractor.extract([unknown, chunk(CURIE_TEXT, "Marie Curie")])
    assert [e.name for e in out[0].entities] == ["Elsewhere"] and out[0].triples == ()
    assert extractor.report.missed == [unknown.id]
    assert extractor.report.matched == 1
    extractor.extract([unknown, chunk(CURIE_TEXT, "Marie Curie")])  # counted once
    assert (extractor.report.missed, extractor.report.matched) == ([unknown.id], 1)


def test_chunk_of_a_longer_passage_is_matched_by_containment(openie_file):
    part = chunk("She won the Nobel Prize in 1903.", title="Marie Curie", index=1)
    extractor = PrecomputedExtractor(openie_file)
    [extraction] = extractor.extract([part])
    assert extractor.report.partial == 1
    names = {e.name for e in extraction.entities}
    assert "Nobel Prize" in names and "Warsaw" not in names
    assert ("Marie Curie", "born in", "Warsaw") not in {
        (t.subject, t.predicate, t.object) for t in extraction.triples
    }


def test_link_topic_adds_related_to_links(openie_file):
    extractor = PrecomputedExtractor(openie_file, link_topic=True)
    [extraction] = extractor.extract([chunk(TOWNSHIP_TEXT, TOWNSHIP["title"])])
    [link] = [t for t in extraction.triples if t.predicate == "related_to"]
    assert (link.subject, link.object) == ("Au Gres Township, Michigan", "Arenac County")


def test_strict_mode_raises_on_the_first_problem(openie_file):
    with pytest.raises(InputError, match=r"openie\.jsonl, line 1, field 'triples\[2\]\[2\]'"):
        PrecomputedExtractor(openie_file, strict=True)


def test_strict_mode_raises_on_a_missed_chunk(tmp_path):
    path = write_jsonl(tmp_path / "ok.jsonl", [{"title": "A", "text": "A b.", "entities": []}])
    extractor = PrecomputedExtractor(path, strict=True)
    with pytest.raises(InputError, match="no record for chunk"):
        extractor.extract([chunk("Other text.", "B")])


def test_fatal_input_problems(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        PrecomputedExtractor(tmp_path / "absent.jsonl")
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{", {"text": 3}])
    with pytest.raises(InputError, match="no usable record"):
        PrecomputedExtractor(bad)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"title": "Caf\xe9", "text": "x"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        PrecomputedExtractor(latin)
    with pytest.raises(ConfigError):
        PrecomputedExtractor(bad, description_chars=0)
