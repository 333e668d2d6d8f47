"""KAGS 4-tuples: the strict parser, the LLM extractor and the offline conversion."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.quad_tasks import parse_quads
from quillian.components.extraction.quads import QuadExtractor, sentence_quads
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.structured import ParseError
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.types import Chunk, Provenance, Triple

TEXT = (
    "Operation Gladio was the codename for a clandestine operation in Italy. "
    "The name Gladio is the Italian form of gladius."
)
CHUNK = Chunk("doc-1", 0, TEXT, 0, len(TEXT), "Operation Gladio")
S1 = "Operation Gladio was the codename for a clandestine operation in Italy."
S2 = "The name Gladio is the Italian form of gladius."


def line(*items: object) -> str:
    return json.dumps(list(items))


def test_parser_keeps_four_strings_and_records_malformed_lines() -> None:
    raw = "\n".join(
        [
            "```",
            line("head", "relationship", "tail", "sentences"),
            line("Operation Gladio", "operated in", "Italy", S1),
            line("Operation Gladio", "operated in", "Italy", S1),  # repeated
            line("Gladio", "is the Italian form of", "gladius"),  # three elements
            line("Gladio", "is", 5, S2),  # not a string
            line("Gladio", " ", "gladius", S2),  # empty element
            '["Gladio", "is", "broken',  # not JSON
            "```",
        ]
    )
    reply = parse_quads(raw)
    assert reply.quads == [("Operation Gladio", "operated in", "Italy", S1)]
    assert reply.duplicates == 1
    assert [why for _, why in reply.rejected] == [
        "3 elements, not 4",
        "an element is not a string",
        "an element is empty",
        "not valid JSON",
    ]


def test_parser_reads_one_array_of_arrays_and_an_empty_reply() -> None:
    raw = json.dumps([["A", "knows", "B", "A knows B."], ["B", "knows", "C", "B knows C."]])
    assert [q[2] for q in parse_quads(raw).quads] == ["B", "C"]
    assert parse_quads("[]").quads == []


@pytest.mark.parametrize(
    "raw",
    ["", "I could not find any triples.", line("A", "knows", "B"), '["A", "b", "c", "d"'],
)
def test_parser_refuses_replies_without_a_usable_tuple(raw: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_quads(raw)
    assert err.value.raw == raw


def run_extractor(model: ScriptedChatModel) -> tuple[QuadExtractor, list[Extraction]]:
    extractor = QuadExtractor(TaskRunner(model, default_registry()))
    return extractor, extractor.extract([CHUNK])


def test_llm_extractor_keeps_the_model_sentence_with_its_span_and_records_failures() -> None:
    reply = "\n".join(
        [
            line("Operation Gladio", "was the codename for", "a clandestine operation", S1),
            line("Gladio", "is the Italian form of", "gladius", S2),
            line("Gladio", "is the Italian form of", "gladius", S2),
            line("Gladio", "is", "gladio", S2),  # one entity
            line("Gladio", "means", "sword"),  # malformed
            line("Gladio", "means", "sword", "Gladio means sword."),  # not in the chunk
        ]
    )
    extractor, [extraction] = run_extractor(ScriptedChatModel({"kags.extract": reply}))
    triples = extraction.triples
    assert [(t.subject, t.object) for t in triples] == [
        ("Operation Gladio", "a clandestine operation"),
        ("Gladio", "gladius"),
        ("Gladio", "sword"),
    ]
    first = triples[0].provenance
    assert first is not None and TEXT[first.start : first.end] == S1 == first.sentence
    assert first.chunk_id == CHUNK.id and first.doc_id == "doc-1"
    last = triples[2].provenance
    assert last is not None and (last.start, last.end, last.sentence) == (
        -1,
        -1,
        "Gladio means sword.",
    )
    assert triples[1].description == "Gladio is the Italian form of gladius"
    assert {e.name for e in extraction.entities} == {
        "Operation Gladio",
        "a clandestine operation",
        "Gladio",
        "gladius",
        "sword",
    }
    report = extractor.report
    assert report.dropped == Counter({"malformed": 1, "duplicate": 1, "same entity": 1})
    assert report.rejected == [(CHUNK.id, line("Gladio", "means", "sword"), "3 elements, not 4")]
    assert report.quads == 3 and report.calls == 1 and not report.failures
    assert extractor.name == "kags-llm:scripted:kags.extract@1"


def test_llm_extractor_records_a_reply_that_stays_unusable() -> None:
    model = ScriptedChatModel({"kags.extract": ["no triples here", "still prose"]})
    extractor, [extraction] = run_extractor(model)
    assert extraction.triples == () and extraction.entities == ()
    [failure] = extractor.report.failures
    assert failure.chunk_id == CHUNK.id and failure.stage == "quads"
    assert failure.raw == "still prose"
    assert extractor.report.calls == 2  # the repair attempt was made


def test_offline_quads_use_the_sentence_holding_both_ends() -> None:
    wrong = Provenance("doc-1", CHUNK.id, 0, len(S1), S1)  # holds only the subject
    triples = (
        Triple("Gladio", "form of", "gladius", "", wrong),
        Triple("Operation Gladio", "in", "Italy", "", wrong),
        Triple("Operation Gladio", "in", "Italy", "", wrong),  # repeated
        Triple("Gladio", "related_to", "Rome", "", None),  # no sentence names Rome
    )
    dropped: Counter[str] = Counter()
    quads = sentence_quads(Extraction(CHUNK.id, "doc-1", (), triples), CHUNK, dropped)
    assert [(q.subject, q.provenance.sentence if q.provenance else "") for q in quads] == [
        ("Gladio", S2),
        ("Operation Gladio", S1),
    ]
    prov = quads[0].provenance
    assert prov is not None and TEXT[prov.start : prov.end] == S2
    assert dropped == Counter({"duplicate": 1, "no sentence holds both ends": 1})


def test_the_prompt_demonstration_parses_as_seven_tuples_from_its_text() -> None:
    prompt = default_registry().get("kags.extract")
    demo_text = prompt.messages[1].content
    demo = parse_quads(prompt.messages[2].content)
    assert len(demo.quads) == 7 and not demo.rejected and demo.duplicates == 0
    assert all(sentence in demo_text for *_, sentence in demo.quads)


def test_offline_quads_hold_the_topic_in_every_sentence_of_its_chunk() -> None:
    """A passage names its subject once and then says "he" or "it"; the spaCy extractor
    links the topic to each entity by that entity's sentence, and KAGS keeps the link."""
    text = "L'Amour was a rock club in Brooklyn. It hosted Metallica and Anthrax."
    chunk = Chunk("doc-2", 0, text, 0, len(text), "L'Amour (music venue)")
    second = "It hosted Metallica and Anthrax."
    at = text.index(second)
    prov = Provenance("doc-2", chunk.id, at, at + len(second), second)
    triples = (
        Triple("L'Amour (music venue)", "related_to", "Metallica", "", prov),  # full title
        Triple("L'Amour", "related_to", "Anthrax", "", prov),  # the title's base
        Triple("Metallica", "related_to", "Brooklyn", "", prov),  # no sentence holds both
    )
    dropped: Counter[str] = Counter()
    quads = sentence_quads(Extraction(chunk.id, "doc-2", (), triples), chunk, dropped)
    kept = [(q.subject, q.object, q.provenance.sentence if q.provenance else "") for q in quads]
    assert kept == [
        ("L'Amour (music venue)", "Metallica", second),
        ("L'Amour", "Anthrax", second),
    ]
    assert dropped == Counter({"no sentence holds both ends": 1})
    untitled = Chunk("doc-2", 0, text, 0, len(text), "")
    assert sentence_quads(Extraction(chunk.id, "doc-2", (), triples[:1]), untitled) == []
