# Extraction fixtures are data: long lines stay.
"""KAG's LLM extraction with a scripted model: typed entities with semantic types,
triples constrained by the entity list, official names, and recorded failures."""

from __future__ import annotations

import json

from quillian.components.kag.extraction import KAGExtractor
from quillian.components.kag.graph import TypedGraphBuilder
from quillian.components.kag.schema import OTHERS, default_schema, load_schema
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.testing.kag import last_user
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


def test_the_ner_prompt_lists_the_schema_classes_with_their_descriptions() -> None:
    kag, model = extractor({"kag.ner": "[]", "kag.triples": '{"triples": []}'})
    kag.extract([CHUNK])
    (ner,) = [c for c in model.calls if c.prompt == "kag.ner@2"]
    text = last_user(ner.messages)
    assert "- Person: A real or fictional person." in text
    assert "- GeographicLocation: A place, region, country, city" in text
    assert text.index("- Others:") > text.index("- Person:")  # Others last


WORKS_FOR = """
namespace: Firms
types:
  Person:
    description: A person.
    relations: {worksFor: Company, synonyms: $self}
  Company:
    description: A company.
"""


def test_triples_are_read_against_the_relations_of_their_subjects_class(tmp_path) -> None:
    """A relation the subject's class declares takes the schema's spelling; a triple
    outside them, or with an object of another class than the relation's target, is
    recorded and kept. The shipped schema declares only the shared block, so its
    triples stay as extracted and unrecorded."""
    path = tmp_path / "firms.yaml"
    path.write_text(WORKS_FOR, encoding="utf-8")
    ner = [
        {"name": "Ada", "category": "Person"},
        {"name": "Acme", "category": "Company"},
        {"name": "Bob", "category": "Person"},
    ]
    triples = {
        "triples": [
            ["Ada", "works for", "Acme"],
            ["Ada", "likes", "Bob"],
            ["Ada", "works for", "Bob"],
            ["Acme", "hired", "Ada"],
        ]
    }
    routes = {"kag.ner": json.dumps(ner), "kag.triples": json.dumps(triples), "kag.std": "[]"}
    model = ScriptedChatModel(routes)
    kag = KAGExtractor(TaskRunner(model, default_registry()), load_schema(path))
    (extraction,) = kag.extract([CHUNK])
    assert [(t.subject, t.predicate, t.object) for t in extraction.triples] == [
        ("Ada", "worksFor", "Acme"),
        ("Ada", "likes", "Bob"),
        ("Ada", "worksFor", "Bob"),
        ("Acme", "hired", "Ada"),  # Company declares no relations of its own
    ]
    kept = [(i.kind, i.raw, i.message) for i in kag.issues]
    assert kept == [
        (
            "kept",
            "likes",
            "(Ada, likes, Bob): 'likes' is not a relation of Person (worksFor); kept",
        ),
        (
            "kept",
            "Person",
            "(Ada, worksFor, Bob): worksFor of Person points to Company, 'Bob' is Person; kept",
        ),
    ]
    # the open-domain schema: predicates as written, nothing recorded
    open_kag, _ = extractor(
        {**routes, "kag.ner": json.dumps([{**e, "category": "Person"} for e in ner])}
    )
    (plain,) = open_kag.extract([CHUNK])
    assert plain.triples[0].predicate == "works for" and open_kag.issues == []
