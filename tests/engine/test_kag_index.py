"""KAG through the engine with no LLM at build time: the index from recorded OpenIE
extractions (HippoRAG's JSONL) with KAG's build stage, the typed graph with its mutual
index and WordNet alignment, the ``kag`` chunk retriever, and the ``kag-lfs`` method
answering from the graph."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from quillian.cli.main import main
from quillian.components.kag.graph import SOURCE, TypedGraph
from quillian.components.kag.schema import CHUNK, CONCEPT, SchemaError
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.engine import (
    Engine,
    IndexSettings,
    delete_documents,
    index_documents,
)
from quillian.engine.documents import list_documents
from quillian.errors import ConfigError
from quillian.index import read_manifest
from quillian.methods.kag.issues import extraction_issues
from quillian.methods.kag.pipeline import KAG
from quillian.methods.kag.stages import GRAPH_FILE, stored_schema
from quillian.methods.steps import KAGStep
from quillian.testing.kag import last_user
from quillian.types import Document

CORPUS = {
    "Antonio Vivaldi": "Antonio Vivaldi was a composer born in Venice.",
    "Venice": "Venice is a city in northern Italy.",
    "The Four Seasons": "The Four Seasons is a group of violin concertos by Antonio Vivaldi.",
}
OPENIE = [
    {
        "title": "Antonio Vivaldi",
        "text": CORPUS["Antonio Vivaldi"],
        "entities": ["Antonio Vivaldi", "Venice", "1678"],
        "triples": [["Antonio Vivaldi", "born in", "Venice"], ["Ghost", "haunts", "Nobody"]],
    },
    {
        "title": "Venice",
        "text": CORPUS["Venice"],
        "entities": ["Venice", "Italy", "city"],
        "triples": [["Venice", "is a", "city"], ["Venice", "located in", "Italy"]],
    },
    {
        "title": "The Four Seasons",
        "text": CORPUS["The Four Seasons"],
        "entities": ["The Four Seasons", "Antonio Vivaldi"],
        "triples": [["The Four Seasons", "composed by", "Antonio Vivaldi"]],
    },
]


DOCS = [Document(t, title) for title, t in CORPUS.items()]


def recorded(tmp_path, **options) -> IndexSettings:
    """Settings of a KAG build from the recorded extractions (written to ``tmp_path``)."""
    extractions = tmp_path / "openie.jsonl"
    extractions.write_text("\n".join(json.dumps(r) for r in OPENIE), encoding="utf-8")
    return IndexSettings(
        extractor="precomputed",
        extractions=extractions,
        embedder="hash",
        methods=("kag",),
        **options,
    )


def build(tmp_path):
    location = tmp_path / "index"
    index_documents(location, DOCS, recorded(tmp_path))
    return location


@pytest.mark.model
def test_index_with_kag_builds_the_typed_aligned_graph(tmp_path) -> None:
    location = build(tmp_path)
    counts = read_manifest(location)["counts"]
    assert counts["kag_chunks"] == 3 and counts["kag_source_edges"] > 0
    graph = TypedGraph.load(location / GRAPH_FILE)
    # the recorded extractions carry no types: spaCy's NER gives Venice (GPE) its class,
    # in its own chunk; "1678" is typed Date by its form
    venice = graph.node("Venice", "GeographicLocation")
    assert venice is not None and graph.node("Antonio Vivaldi", "Person") is not None
    assert counts["kag_typed_in_chunk"] >= 4 and counts["kag_untyped"] >= 1
    # the mutual index: Venice points to the two chunks it was extracted from
    assert len(graph.chunks_of(venice)) == 2
    assert all(
        graph.nodes[graph.edges[e].object].label == CHUNK
        for e in graph.one_hop(venice, with_source=True)
        if graph.edges[e].predicate == SOURCE
    )
    # WordNet alignment: Venice belongTo city isA ... as concept nodes
    concepts = {
        graph.nodes[graph.edges[e].object].name
        for e in graph.one_hop(venice, with_source=False)
        if graph.edges[e].predicate == "belongTo"
    }
    assert concepts == {"city"}
    assert any(n.label == CONCEPT and n.name == "municipality" for n in graph.nodes)
    assert graph.node("1678", "Date") is not None


def test_without_typing_recorded_entities_stay_in_others(tmp_path) -> None:
    location = tmp_path / "index"
    settings = recorded(tmp_path, kag_typing="none")
    index_documents(location, DOCS, settings)
    graph = TypedGraph.load(location / GRAPH_FILE)
    assert graph.node("Venice", "Others") is not None
    assert graph.node("Venice", "GeographicLocation") is None
    assert "kag_typed_in_chunk" not in read_manifest(location)["counts"]


@pytest.mark.model
def test_kag_retriever_and_method_through_the_engine(tmp_path) -> None:
    location = build(tmp_path)
    engine = Engine.open(location, embedder="hash")
    result = engine.retrieve("Where was Antonio Vivaldi born?", method="kag", k=2)
    assert result.method.startswith("kag:")
    assert result.trace.seeds and result.trace.seeds[0].name == "Antonio Vivaldi"
    plan = (
        "Step1: Where was Antonio Vivaldi born?\n"
        "Action1: Retrieval(s=s1:Person[Antonio Vivaldi], p=p1:bornIn, o=o1:GeographicLocation)\n"
        "Step2: Output the place.\nAction2: Output(o1)"
    )
    model = ScriptedChatModel({"kag.plan": plan, "kag.query_ner": "[]"})

    async def ask():
        async with Engine.open(location, llm=model, embedder="hash") as engine:
            return await engine.answer("Where was Antonio Vivaldi born?", "kag-lfs")

    answer = asyncio.run(ask())
    assert answer.error == "" and answer.answer == "Venice"
    steps = [s for s in answer.steps if isinstance(s, KAGStep)]
    assert steps[0].layer == "graph-exact"  # Venice typed GeographicLocation by the NER


MUSIC_SCHEMA = """\
namespace: Music
types:
  Composer:
    description: A person who writes music.
    relations: {bornIn: City}
  City:
    description: A town or city.
"""


@pytest.mark.model
def test_a_schema_given_at_index_time_is_kept_and_read_by_the_solver(tmp_path) -> None:
    schema = tmp_path / "music.yaml"
    schema.write_text(MUSIC_SCHEMA, encoding="utf-8")
    location = tmp_path / "index"
    settings = recorded(tmp_path, kag_schema=schema)
    index_documents(location, DOCS[:2], settings)
    stored = stored_schema(location)
    assert stored is not None and stored.read_text(encoding="utf-8") == MUSIC_SCHEMA
    assert read_manifest(location)["config"]["kag_schema"] == str(schema)
    # a later build without --schema, and a deletion, keep the index's schema even
    # when the original file is gone
    schema.unlink()
    index_documents(location, DOCS[2:], replace(settings, kag_schema=None))
    delete_documents(location, [list_documents(location).documents[0].doc_id])
    stored = stored_schema(location)
    assert stored is not None and stored.read_text(encoding="utf-8") == MUSIC_SCHEMA

    async def solver() -> object:
        async with Engine.open(location, llm=ScriptedChatModel({}), embedder="hash") as engine:
            return engine.pipeline("kag")

    pipeline = asyncio.run(solver())
    assert isinstance(pipeline, KAG)
    assert pipeline.schema.namespace == "Music"
    assert pipeline.schema.entity_types == ["Composer", "City", "Others"]


def test_a_bad_schema_fails_before_anything_is_written(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("namespace: X\ntypes:\n  Person:\n    relations: {knows: Robot}\n")
    settings = IndexSettings(embedder="hash", methods=("kag",), kag_schema=bad)
    with pytest.raises(SchemaError, match="Robot"):
        index_documents(tmp_path / "index", [Document("Ada wrote notes.", "Ada")], settings)
    assert not (tmp_path / "index").exists()


@pytest.mark.model
def test_llm_concepts_are_stored_and_reused_by_a_rebuild_with_no_model(tmp_path) -> None:
    location = tmp_path / "index"
    settings = recorded(tmp_path, kag_concepts="llm")
    with pytest.raises(ConfigError, match="needs a chat model"):
        index_documents(location, DOCS, settings)
    chains = {"venice": ["port city", "city"], "italy": ["country", "state"]}

    def concepts(messages) -> str:
        asked = last_user(messages)
        return json.dumps({t: c for t, c in chains.items() if f"{t} (class" in asked.lower()})

    model = ScriptedChatModel({"kag.concepts": concepts})
    index_documents(location, DOCS, settings, runner=TaskRunner(model, default_registry()))
    asked = len(model.calls)
    assert asked >= 1

    def concept_names(graph: TypedGraph, name: str) -> set[str]:
        node = graph.by_name(name)[0]
        return {
            graph.nodes[graph.edges[e].object].name
            for e in graph.one_hop(node, with_source=False)
            if graph.edges[e].predicate == "belongTo"
        }

    graph = TypedGraph.load(location / GRAPH_FILE)
    assert concept_names(graph, "Venice") == {"port city"}
    # the model's chains, not WordNet's: "port city" isA "city"
    port = graph.node("port city", CONCEPT)
    assert port is not None
    # a deletion rebuilds with no model: the stored chains give the same concepts
    seasons = next(
        d.doc_id for d in list_documents(location).documents if d.title == "The Four Seasons"
    )
    delete_documents(location, [seasons])
    rebuilt = TypedGraph.load(location / GRAPH_FILE)
    assert concept_names(rebuilt, "Venice") == {"port city"}
    assert len(model.calls) == asked
    assert not [i for i in rebuilt.issues if "concept completion" in i.message]


def test_schema_and_concepts_need_kag(tmp_path, capsys) -> None:
    argv = ["index", "--out", str(tmp_path / "i"), "--sample", "--embedder", "hash"]
    assert main([*argv, "--concepts", "llm"]) == 2
    assert "--for kag" in capsys.readouterr().err
    assert main([*argv, "--for", "kag", "--similar", "1.5"]) == 2
    assert "must be in (0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


def test_an_update_keeps_the_methods_and_options_the_index_was_built_with(tmp_path) -> None:
    location = tmp_path / "index"
    first = recorded(tmp_path, kag_typing="none", kag_similar=0.95)
    index_documents(location, DOCS[:2], first)
    # a plain update: no --for, no KAG options
    index_documents(
        location, DOCS[2:], replace(first, methods=(), kag_typing=None, kag_similar=None)
    )
    config = read_manifest(location)["config"]
    assert config["methods"] == ["kag"]
    assert (config["kag_typing"], config["kag_similar"]) == ("none", 0.95)
    graph = TypedGraph.load(location / GRAPH_FILE)
    assert graph.counts()["kag_chunks"] == 3  # the KAG graph covers the new document
    assert graph.node("Venice", "Others") is not None  # still untyped, as asked first


def scripted_extraction(messages) -> str:  # type: ignore[no-untyped-def]
    """NER by passage: Vivaldi's names two entities, Venice's reply is not JSON."""
    passage = last_user(messages)
    if "Antonio Vivaldi was a composer" in passage:
        return json.dumps(
            [
                {"name": "Antonio Vivaldi", "category": "Person"},
                {"name": "Venice", "category": "GeographicLocation"},
            ]
        )
    if "Four Seasons is a group" in passage:
        return json.dumps([{"name": "The Four Seasons", "category": "Works"}])
    return "Venice, I think"


def test_extraction_issues_are_kept_with_the_index(tmp_path) -> None:
    """A triple naming no entity of its chunk's list and a NER reply that stays
    unusable are recorded, written with the KAG graph, counted in the manifest, and
    still there after a later build that reads the stored extractions back."""
    model = ScriptedChatModel(
        {
            "kag.ner": scripted_extraction,
            "kag.triples": json.dumps(
                {
                    "triples": [
                        ["Antonio Vivaldi", "born in", "Venice"],
                        ["Ghost", "haunts", "Nobody"],
                    ]
                }
            ),
            "kag.std": "[]",
        }
    )
    runner = TaskRunner(model, default_registry())
    settings = IndexSettings(
        extractor="kag-llm", embedder="hash", methods=("kag",), kag_typing="none"
    )
    location = tmp_path / "index"
    index_documents(location, DOCS[:2], settings, runner=runner)

    def issues() -> list[tuple[str, str, str]]:
        return [(i.task, i.kind, i.raw) for i in extraction_issues(location)]

    assert sorted(issues()) == [
        ("ner", "failed", "Venice, I think"),
        ("triples", "rejected", '["Ghost", "Nobody"]'),
    ]
    (rejected,) = [i for i in extraction_issues(location) if i.kind == "rejected"]
    assert "(Ghost, haunts, Nobody) names no entity of the entity list" in rejected.message
    vivaldi_chunk = rejected.chunk_id
    counts = read_manifest(location)["counts"]
    assert counts["extraction_issues"] == 2 and counts["extraction_failures"] == 1
    # a later build extracts only the new document and keeps the others' issues
    calls = len(model.calls)
    index_documents(location, DOCS[2:], settings, runner=runner)
    assert all("Four Seasons" in last_user(c.messages) for c in model.calls[calls:])
    kept = extraction_issues(location)
    assert vivaldi_chunk in {i.chunk_id for i in kept}
    assert len(kept) == 4  # the new chunk lists neither Vivaldi nor Venice: two more
    # a deleted document's issues go with it
    vivaldi = next(
        d.doc_id for d in list_documents(location).documents if d.title == "Antonio Vivaldi"
    )
    delete_documents(location, [vivaldi])
    assert vivaldi_chunk not in {i.chunk_id for i in extraction_issues(location)}
    assert read_manifest(location)["counts"]["extraction_issues"] == 3
