# Extraction fixtures are data: long lines stay.
"""KAG's LLM extraction with a scripted model: typed entities with semantic types,
triples constrained by the entity list, official names, and recorded failures."""

from __future__ import annotations

import json

from quillian.components.kag.extraction import KAGExtractor
from quillian.components.kag.graph import TypedGraphBuilder
from quillian.components.kag.schema import OTHERS, default_schema
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.types import Chunk

TEXT = "The Chamber passed the law in 1999."
CHUNK = Chunk("d1", 0, TEXT, 0, len(TEXT), title="Chamber of Deputies")
NER = [
    {
        "name": "Chamber of Deputies",
        "category": "Organization",
        "type": "Legislative Body",
        "description": "a lower house",
    },
    {"name": "1999", "category": "Date", "type": "year", "description": "a year"},
    {"name": "the law", "category": "Statute", "type": "law", "description": "a law"},
]
TRIPLES = {"triples": [["Chamber of Deputies", "passed", "the law"], ["Senate", "ignored", "Rome"]]}
STD = [
    {
        "name": "Chamber of Deputies",
        "category": "Organization",
        "official_name": "Italian Chamber of Deputies",
    }
]


def extractor(routes) -> tuple[KAGExtractor, ScriptedChatModel]:
    model = ScriptedChatModel(routes)
    return KAGExtractor(TaskRunner(model, default_registry()), default_schema()), model


def test_typed_entities_triples_and_official_names() -> None:
    kag, model = extractor(
        {"kag.ner": json.dumps(NER), "kag.triples": json.dumps(TRIPLES), "kag.std": json.dumps(STD)}
    )
    (extraction,) = kag.extract([CHUNK])
    entities = {e.name: e for e in extraction.entities}
    assert entities["Chamber of Deputies"].type == "Organization/Legislative Body"
    assert entities["Chamber of Deputies"].aliases == ("Italian Chamber of Deputies",)
    assert entities["Chamber of Deputies"].is_topic
    assert entities["the law"].type == "Others/law"  # Statute is not a schema class
    assert [(t.subject, t.object) for t in extraction.triples] == [
        ("Chamber of Deputies", "the law")
    ]
    assert sorted(i.kind for i in kag.issues) == ["rejected", "repaired"]
    assert "Senate" in next(i.message for i in kag.issues if i.kind == "rejected")
    ner_prompt = model.calls[0].messages[-1].content
    assert "GeographicLocation" in ner_prompt and "The Chamber passed" in ner_prompt
    # the typed graph reads the class and the semantic type back
    builder = TypedGraphBuilder(default_schema())
    builder.add_extraction(extraction)
    graph = builder.build()
    chamber = graph.node("Chamber of Deputies", "Organization")
    assert chamber is not None and graph.nodes[chamber].semantic_type == "legislative body"
    assert graph.node("Italian Chamber of Deputies", "Organization") is not None
    assert graph.node("the law", OTHERS) is not None


def test_unusable_output_is_retried_then_recorded() -> None:
    kag, model = extractor({"kag.ner": ["not json", '[{"name": "x"}]']})
    (extraction,) = kag.extract([CHUNK])
    assert extraction.entities == () and extraction.triples == ()
    (failure,) = kag.failures
    assert failure.task == "ner" and "category" in failure.message
    assert len(model.calls) == 2  # one repair attempt
