"""The stored form of extractions: compact (each distinct text once), read back equal,
and records in the earlier form still read."""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict

import pytest

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.predicates import DependencyParse, ParsedToken
from quillian.components.extraction.serde import (
    BZ2_FROM,
    FORM,
    compressed,
    extraction_from_json,
    extraction_to_json,
    stored_extraction,
    uncompressed,
)
from quillian.components.graph.compact import decode_extraction, encode_extraction
from quillian.types import Provenance, Triple

SENTENCE = "Ada Lovelace worked with Charles Babbage in London."


def _extraction(parse: DependencyParse | None = None) -> Extraction:
    here = Provenance("doc-1", "chunk-1", 0, len(SENTENCE), SENTENCE)
    elsewhere = Provenance("doc-2", "chunk-9", 4, 9, "Other sentence é.")
    return Extraction(
        "chunk-1",
        "doc-1",
        (
            ExtractedEntity("Ada Lovelace", "PERSON", ("Ada", "Countess"), SENTENCE, True, 0, 12),
            ExtractedEntity("Charles Babbage", "PERSON", (), SENTENCE, start=25, end=40),
            ExtractedEntity("London", "GPE"),
        ),
        (
            Triple("Ada Lovelace", "related_to", "Charles Babbage", SENTENCE, here),
            Triple("Ada Lovelace", "related_to", "London", SENTENCE, here),
            Triple("Charles Babbage", "worked_in", "London", "", elsewhere),
            Triple("Ada", "knows", "London"),
        ),
        parse,
    )


@pytest.mark.parametrize("parse", [None, DependencyParse("0\t3\t0\tROOT\tNNP\tada")])
def test_an_extraction_reads_back_equal_with_each_text_stored_once(
    parse: DependencyParse | None,
) -> None:
    extraction = _extraction(parse)
    raw = extraction_to_json(extraction)
    data = json.loads(raw)
    assert data[0] == FORM and raw.count(SENTENCE.encode()) == 1
    assert data[3].count("") == 1  # the texts
    back = extraction_from_json(raw)
    assert back == extraction
    # the rows that share a text share one string
    assert back.triples[0].description is back.entities[0].description
    assert back.triples[0].provenance is not None
    assert back.triples[0].provenance.sentence is back.triples[1].description


def test_a_record_in_the_earlier_form_still_reads() -> None:
    extraction = _extraction(DependencyParse("0\t3\t0\tROOT\tNNP\tada"))
    earlier = json.dumps(asdict(extraction), ensure_ascii=False).encode()
    assert extraction_from_json(earlier) == extraction
    assert extraction_from_json(zlib.decompress(compressed(earlier))) == extraction


def test_the_resolution_state_keeps_the_compact_form_without_the_parse() -> None:
    extraction = _extraction(DependencyParse("0\t3\t0\tROOT\tNNP\tada"))
    packed = encode_extraction(extraction)
    assert json.loads(zlib.decompress(packed))[0] == FORM
    assert decode_extraction(packed) == _extraction(None)
    # a state written before kept a list of fields by position, texts in place
    end = len(SENTENCE)
    earlier = [
        "chunk-1",
        "doc-1",
        [["Ada Lovelace", "PERSON", ["Ada"], SENTENCE, True, 0, 12],
         ["London", "GPE", [], "", False, -1, -1]],
        [["Ada Lovelace", "related_to", "London", SENTENCE, ["doc-1", "chunk-1", 0, end, SENTENCE]],
         ["Ada", "knows", "London", "", None]],
    ]  # fmt: skip
    assert decode_extraction(compressed(json.dumps(earlier).encode())) == Extraction(
        "chunk-1",
        "doc-1",
        (
            ExtractedEntity("Ada Lovelace", "PERSON", ("Ada",), SENTENCE, True, 0, 12),
            ExtractedEntity("London", "GPE"),
        ),
        (
            Triple(
                "Ada Lovelace", "related_to", "London", SENTENCE,
                Provenance("doc-1", "chunk-1", 0, end, SENTENCE),
            ),
            Triple("Ada", "knows", "London"),
        ),
    )  # fmt: skip


def test_a_compact_record_naming_a_text_it_lacks_fails_to_read() -> None:
    data = json.loads(extraction_to_json(_extraction()))
    data[3] = data[3][:1]
    with pytest.raises(IndexError):
        extraction_from_json(json.dumps(data).encode())
    with pytest.raises(ValueError, match="form 3"):
        extraction_from_json(json.dumps([3, *data[1:]]).encode())


def test_an_elided_parse_writes_only_the_words_its_text_does_not_give() -> None:
    """A lemma that is its token's text in lower case, or the empty word of a
    whitespace token, is left unwritten and read back from the chunk's text; any other
    word (a lemma, a verb's form, an empty word where the text is not whitespace) is
    kept as it is."""
    text = "Ada was born\n\nin Cities"
    tokens = [
        ParsedToken(0, 3, 2, "nsubjpass", "NNP", "ada"),
        ParsedToken(4, 7, 2, "auxpass", "VBD", "be"),
        ParsedToken(8, 12, 2, "ROOT", "VBN", "born"),
        ParsedToken(12, 14, 2, "dep", "_SP", ""),
        ParsedToken(14, 16, 2, "prep", "IN", ""),
        ParsedToken(17, 23, 4, "pobj", "NNS", "city"),
    ]
    parse = DependencyParse.of(tokens, text)
    words = [line.split("\t")[5] for line in parse.rows.split("\n")]
    assert parse.elided and words == ["", "be", "", "", "\x00", "city"]
    assert parse.tokens(text) == tokens
    with pytest.raises(ValueError, match="chunk's text"):
        parse.tokens()
    stored = extraction_from_json(extraction_to_json(Extraction("c", "d", parse=parse)))
    assert stored.parse == parse and stored.parse.tokens(text) == tokens
    # a parse stored before the elided form keeps its words, and reads without the text
    before = json.loads(extraction_to_json(Extraction("c", "d", parse=DependencyParse.of(tokens))))
    assert len(before[-1]) == 3
    read = extraction_from_json(json.dumps(before).encode()).parse
    assert read is not None and not read.elided and read.tokens() == tokens


def test_a_parse_keeps_its_tokens_relative_and_one_stored_before_reads_the_same() -> None:
    tokens = [
        ParsedToken(0, 3, 1, "compound", "NNP", "ada"),
        ParsedToken(4, 12, 3, "nsubj", "NNP", "lovelace"),
        ParsedToken(12, 13, 1, "punct", ",", ","),
        ParsedToken(14, 20, 3, "ROOT", "VBD", "worked"),
        ParsedToken(20, 21, 3, "punct", ".", "."),
    ]
    parse = DependencyParse.of(tokens)
    assert parse.relative and parse.rows.split("\n")[1] == "1\t8\t2\tnsubj\tNNP\tlovelace"
    assert parse.tokens() == tokens
    stored = extraction_from_json(extraction_to_json(Extraction("c", "d", parse=parse)))
    assert stored.parse == parse
    # a parse stored before kept each token's span and head as they are
    earlier = {"rows": "\n".join("\t".join(map(str, t)) for t in tokens), "version": 1}
    record = {"chunk_id": "c", "doc_id": "d", "parse": {**earlier, "version": parse.version}}
    read = extraction_from_json(json.dumps(record).encode()).parse
    assert read is not None and not read.relative and read.tokens() == tokens


def test_a_long_record_is_stored_in_bz2_where_shorter_and_every_form_reads() -> None:
    """From BZ2_FROM bytes of JSON, bz2 where it takes fewer bytes than zlib (a long
    parse); a short record stays zlib; records in either, or uncompressed, read back."""
    rows = "\n".join(f"1\t{3 + i % 5}\t{i % 3 - 1}\tnsubj\tNNP\t" for i in range(2000))
    long = _extraction(DependencyParse(rows, elided=True))
    short = _extraction(DependencyParse("0\t3\t0\tROOT\tNNP\tada"))
    for extraction, form in ((long, b"BZh"), (short, b"x")):
        raw = extraction_to_json(extraction)
        stored = stored_extraction(raw)
        assert stored[: len(form)] == form
        assert len(stored) <= len(compressed(raw))
        assert uncompressed(stored) == raw == uncompressed(compressed(raw)) == uncompressed(raw)
    assert len(extraction_to_json(long)) >= BZ2_FROM > len(extraction_to_json(short))
