"""KAG through the engine with no LLM at build time: the index from recorded OpenIE
extractions (HippoRAG's JSONL) with KAG's build stage, the typed graph with its mutual
index and WordNet alignment, the ``kag`` chunk retriever, and the ``kag-lfs`` method
answering from the graph."""

from __future__ import annotations

import asyncio
import json

from quillian.components.kag.graph import SOURCE, TypedGraph
from quillian.components.kag.schema import CHUNK, CONCEPT
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.engine import Engine, IndexSettings, index_documents
from quillian.index import read_manifest
from quillian.methods.kag.stages import GRAPH_FILE
from quillian.methods.steps import KAGStep
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


def build(tmp_path):
    extractions = tmp_path / "openie.jsonl"
    extractions.write_text("\n".join(json.dumps(r) for r in OPENIE), encoding="utf-8")
    location = tmp_path / "index"
    settings = IndexSettings(
        extractor="precomputed", extractions=extractions, embedder="hash", methods=("kag",)
    )
    index_documents(location, [Document(t, title) for title, t in CORPUS.items()], settings)
    return location


def test_index_with_kag_builds_the_typed_aligned_graph(tmp_path) -> None:
    location = build(tmp_path)
    counts = read_manifest(location)["counts"]
    assert counts["kag_chunks"] == 3 and counts["kag_source_edges"] > 0
    graph = TypedGraph.load(location / GRAPH_FILE)
    venice = graph.node("Venice", "Others")
    assert venice is not None
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
    # "1678" is typed Date by its form (the recorded extractions carry no types)
    assert graph.node("1678", "Date") is not None


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
    model = ScriptedChatModel({"kag.plan": plan})

    async def ask():
        async with Engine.open(location, llm=model, embedder="hash") as engine:
            return await engine.answer("Where was Antonio Vivaldi born?", "kag-lfs")

    answer = asyncio.run(ask())
    assert answer.error == "" and answer.answer == "Venice"
    steps = [s for s in answer.steps if isinstance(s, KAGStep)]
    assert steps[0].layer == "graph-exact"  # o1 untyped by the OpenIE route: Others, free
