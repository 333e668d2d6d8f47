"""Typing entities an extractor left untyped, by spaCy's NER over their chunks."""

from __future__ import annotations

import pytest

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.spacy_ner import load_ner_pipeline
from quillian.components.kag.typing import NERTyper
from quillian.stores.embedded.sqlite import SqliteKeyValueStore
from quillian.types import Chunk

pytestmark = pytest.mark.model

TEXTS = [
    "Ada Lovelace worked with Charles Babbage in London.",
    "The engine was later described by Babbage's friend.",
    "Menabrea wrote about the engine in French.",
]
CHUNKS = [Chunk(f"d{i}", 0, text, 0, len(text)) for i, text in enumerate(TEXTS, 1)]
C1, C2, C3 = (c.id for c in CHUNKS)


def ents(*names: str, typed: dict[str, str] | None = None) -> tuple[ExtractedEntity, ...]:
    return tuple(ExtractedEntity(n, (typed or {}).get(n, "")) for n in names)


def test_untyped_entities_take_their_chunks_label_else_the_corpus_label(tmp_path) -> None:
    extractions = [
        Extraction(C1, "d1", ents("Ada Lovelace", "Charles Babbage", "London")),
        # no span "Charles Babbage" in c2: the corpus label from c1
        Extraction(C2, "d2", ents("Charles Babbage", "engine")),
        # an entity already typed keeps its type; TITLE is a role and gets one
        Extraction(C3, "d3", ents("Menabrea", "French", typed={"Menabrea": "AUTHOR"})),
    ]
    kv = SqliteKeyValueStore(tmp_path / "kv.sqlite")
    typed, report = NERTyper(kv).type(CHUNKS, extractions)
    types = {(e.chunk_id, x.name): x.type for e in typed for x in e.entities}
    assert types[(C1, "Ada Lovelace")] == "PERSON"
    assert types[(C1, "London")] == "GPE"
    assert types[(C2, "Charles Babbage")] == types[(C1, "Charles Babbage")] == "PERSON"
    assert types[(C2, "engine")] == ""  # no span of that name anywhere
    assert types[(C3, "Menabrea")] == "AUTHOR"
    assert report.typed_in_corpus == 1 and report.untyped >= 1 and report.chunks_run == 3
    # the spans are cached: a second run (say after a deletion) runs spaCy on nothing
    again, report = NERTyper(kv).type(CHUNKS, extractions)
    assert again == typed and report.chunks_run == 0
    kv.close()


def test_nothing_untyped_runs_nothing() -> None:
    typed = [Extraction(C1, "d1", ents("Ada Lovelace", typed={"Ada Lovelace": "PERSON"}))]
    out, report = NERTyper(None, model="no-such-model").type(CHUNKS, typed)
    assert out == typed and report.chunks_run == 0


def test_a_chunk_longer_than_the_model_takes_is_typed_in_pieces() -> None:
    """spaCy refuses a text over its ``max_length`` (1,000,000 characters): a longer
    chunk is read in pieces, so KAG's typing stage does not fail on it."""
    text = "Filler words go here. " * 300 + "Ada Lovelace worked with Charles Babbage in London."
    chunk = Chunk("long", 0, text, 0, len(text))
    typer = NERTyper(None)
    typer._nlp = load_ner_pipeline(typer.model)
    typer._nlp.max_length = 2000  # as if spaCy's 1,000,000 were 2,000
    extraction = Extraction(chunk.id, "long", ents("Ada Lovelace", "London"))
    (typed,), _ = typer.type([chunk], [extraction])
    assert {x.name: x.type for x in typed.entities} == {"Ada Lovelace": "PERSON", "London": "GPE"}
