"""Relation names read from dependency parses: hand-built trees, then the real model on
the sample corpus's sentences."""

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.predicates import (
    PARSE_VERSION,
    DependencyParse,
    ParsedToken,
    read_predicate,
)
from quillian.components.extraction.serde import extraction_from_json, extraction_to_json
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.ingestion.readers import read_documents
from quillian.types import Chunk

SAMPLE = Path(__file__).parents[2] / "src" / "quillian" / "data" / "sample"


def tokens(text, rows):
    """Tokens of ``text`` split on spaces, each row ``(head, dep, tag, word)``."""
    out, at = [], 0
    for piece, (head, dep, tag, word) in zip(text.split(" "), rows, strict=True):
        start = text.index(piece, at)
        at = start + len(piece)
        out.append(ParsedToken(start, at, head, dep, tag, word))
    return out


def span(text, name):
    start = text.index(name)
    return [(start, start + len(name))]


BORN = "He was born in Milwaukee"
BORN_ROWS = [
    (2, "nsubjpass", "PRP", "he"),
    (2, "auxpass", "VBD", "be"),
    (2, "ROOT", "VBN", "born"),
    (2, "prep", "IN", "in"),
    (3, "pobj", "NNP", "milwaukee"),
]


def test_a_verb_with_its_preposition_reads_from_the_subject():
    parse = tokens(BORN, BORN_ROWS)
    reading = read_predicate(parse, span(BORN, "He"), span(BORN, "Milwaukee"))
    assert reading is not None and reading == ("born in", True)
    assert read_predicate(parse, span(BORN, "Milwaukee"), span(BORN, "He")) == ("born in", False)


def test_a_negated_verb_names_nothing():
    text = "He was not born in Milwaukee"
    rows = [
        (3, "nsubjpass", "PRP", "he"),
        (3, "auxpass", "VBD", "be"),
        (3, "neg", "RB", "not"),
        (3, "ROOT", "VBN", "born"),
        (3, "prep", "IN", "in"),
        (4, "pobj", "NNP", "milwaukee"),
    ]
    parse = tokens(text, rows)
    assert read_predicate(parse, span(text, "He"), span(text, "Milwaukee")) is None


def test_two_modifiers_of_one_word_are_not_related_by_it():
    text = "a university in Stanford near Alto"
    parse = tokens(
        text,
        [
            (1, "det", "DT", "a"),
            (1, "ROOT", "NN", "university"),
            (1, "prep", "IN", "in"),
            (2, "pobj", "NNP", "stanford"),
            (1, "prep", "IN", "near"),
            (4, "pobj", "NNP", "alto"),
        ],
    )
    assert read_predicate(parse, span(text, "Stanford"), span(text, "Alto")) is None


def test_a_path_without_a_content_word_or_between_unknown_spans_names_nothing():
    text = "Kingdom of Leon"
    parse = tokens(
        text, [(0, "ROOT", "NNP", "kingdom"), (0, "prep", "IN", "of"), (1, "pobj", "NNP", "leon")]
    )
    assert read_predicate(parse, span(text, "Kingdom"), span(text, "Leon")) is None
    assert read_predicate(parse, [(100, 104)], span(text, "Leon")) is None


def test_a_parse_round_trips_through_its_encoding_and_the_stored_record():
    parse = DependencyParse.of(tokens(BORN, BORN_ROWS))
    assert parse.tokens() == tokens(BORN, BORN_ROWS) and parse.version == PARSE_VERSION
    assert DependencyParse.of([]).tokens() == []
    stored = Extraction("chunk", "doc", parse=parse)
    assert extraction_from_json(extraction_to_json(stored)) == stored


def test_records_without_a_current_parse_read_as_missing():
    old = b'{"chunk_id": "c", "doc_id": "d", "entities": [], "triples": []}'
    assert extraction_from_json(old).parse is None
    other = Extraction("c", "d", parse=replace(DependencyParse("1\t2\t0\tROOT\tNN\tx"), version=0))
    assert extraction_from_json(extraction_to_json(other)).parse is None


# --- the real model --------------------------------------------------------------------


def sample_chunks():
    return [Chunk(d.id, 0, d.text, 0, len(d.text), d.title) for d in read_documents(SAMPLE)]


@pytest.fixture(scope="module")
def sample_triples():
    chunks = sample_chunks()
    extractions = SpacyExtractor(corpus_titles=[c.title for c in chunks]).extract(chunks)
    return {(t.subject, t.object): t for e in extractions for t in e.triples}


@pytest.mark.model
def test_the_sample_corpus_reads_advisor_and_birthplace(sample_triples):
    advisor = sample_triples[("M. Ross Quillian", "Herbert A. Simon")]
    assert advisor.predicate == "doctoral advisor"
    assert "his doctoral advisor was Herbert A. Simon" in advisor.description
    born = sample_triples[("Herbert A. Simon", "Milwaukee")]
    assert born.predicate == "born in"
    assert born.description == "He was born in Milwaukee, Wisconsin, in 1916."
    assert born.provenance is not None and born.provenance.sentence == born.description


@pytest.mark.model
def test_the_sample_corpus_reads_passives_and_keeps_related_to_where_nothing_reads(
    sample_triples,
):
    assert sample_triples[("Stanford University", "Leland Stanford")].predicate == "founded by"
    assert sample_triples[("Milwaukee", "Milwaukee County")].predicate == "county seat of"
    # "Leland Stanford and Jane Stanford": a list names no relation between its members
    assert sample_triples[("Leland Stanford", "Jane Stanford")].predicate == "related_to"
    predicates = {t.predicate for t in sample_triples.values()}
    assert "related_to" in predicates and len(predicates) > 5


@pytest.mark.model
@pytest.mark.parametrize(
    ("text", "subject", "object", "predicate"),
    [
        ("Steve Jobs is the founder of Apple.", "Steve Jobs", "Apple", "founder of"),
        ("John Smith is a member of the Labour Party.", "John Smith", "Labour Party", "member of"),
        (
            "Quillian's doctoral advisor Herbert A. Simon taught at Carnegie Mellon.",
            "Quillian",
            "Herbert A. Simon",
            "doctoral advisor",
        ),
        (
            "Leland Stanford founded Stanford University.",
            "Leland Stanford",
            "Stanford University",
            "founded",
        ),
        ("Marie Curie did not study in Berlin.", "Marie Curie", "Berlin", "related_to"),
        (
            "Marie Curie received many awards, including the Nobel Prize.",
            "Marie Curie",
            "Nobel Prize",
            "related_to",
        ),
    ],
)
def test_sentences_read_as_their_relation(text, subject, object, predicate):
    c = Chunk("doc", 0, text, 0, len(text))
    [extraction] = SpacyExtractor().extract([c])
    names = {e.name for e in extraction.entities}
    assert {subject, object} <= names
    [triple] = [t for t in extraction.triples if {t.subject, t.object} == {subject, object}]
    assert (triple.subject, triple.predicate, triple.object) == (subject, predicate, object)


@pytest.mark.model
def test_a_titled_passage_reads_the_relation_of_its_topic():
    text = "The Goose Girl is a 1957 German film directed by Fritz Genschow."
    c = Chunk("doc", 0, text, 0, len(text), "The Goose Girl (1957 film)")
    [extraction] = SpacyExtractor().extract([c])
    [triple] = extraction.triples
    assert (triple.subject, triple.predicate, triple.object) == (
        "The Goose Girl (1957 film)",
        "directed by",
        "Fritz Genschow",
    )


@pytest.mark.model
def test_link_needs_no_model_and_reextracts_results_stored_before_parses(caplog):
    chunks = sample_chunks()
    titles = [c.title for c in chunks]
    extractor = SpacyExtractor(corpus_titles=titles)
    local = extractor.extract_local(chunks)
    assert all(e.parse is not None and e.parse.rows for e in local)
    stored = [extraction_from_json(extraction_to_json(e)) for e in local]
    linker = SpacyExtractor(model="no_such_spacy_model")  # link alone never loads it
    linked = linker.link(chunks, stored, titles)
    assert linked == extractor.extract(chunks)
    assert all(e.parse is None for e in linked)
    old = [replace(e, parse=None) for e in stored]  # as an index stored them before
    with caplog.at_level(logging.WARNING):
        again = extractor.link(chunks, old, titles)
    assert again == linked
    assert f"{len(chunks)} of {len(chunks)} spaCy extractions given to link predate" in caplog.text


@pytest.mark.model
def test_without_predicates_every_link_is_related_to():
    chunks = sample_chunks()
    extractor = SpacyExtractor(corpus_titles=[c.title for c in chunks], predicates=False)
    local = extractor.extract_local(chunks)
    assert all(e.parse == DependencyParse() for e in local)
    triples = [t for e in extractor.link(chunks, local, extractor.corpus_titles) for t in e.triples]
    assert triples and {t.predicate for t in triples} == {"related_to"}
