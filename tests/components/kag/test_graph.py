"""KAG's typed graph: assembly from extractions (classes, official names, triples
constrained by the entity list, the mutual index), saving, and alignment."""

from __future__ import annotations

import numpy as np
import pytest

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.kag.alignment import (
    Aligner,
    LLMConcepts,
    MappedConcepts,
    link_similar,
    without_alignment,
)
from quillian.components.kag.graph import (
    SOURCE,
    KagNode,
    TypedGraph,
    TypedGraphBuilder,
    camel_case,
)
from quillian.components.kag.schema import CHUNK, CONCEPT, OTHERS, default_schema
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.stores.embedded.sqlite import SqliteKeyValueStore
from quillian.types import Triple


def extraction() -> Extraction:
    return Extraction(
        "c1",
        "d1",
        (
            ExtractedEntity("Ada Lovelace", "PERSON", aliases=("Augusta Ada King",)),
            ExtractedEntity("Analytical Engine", "machine"),
            ExtractedEntity("1843", ""),
        ),
        (
            Triple("Ada Lovelace", "wrote notes on", "Analytical Engine"),
            Triple("Ada Lovelace", "worked with", "Charles Babbage"),
            Triple("Lord Byron", "was father of", "Someone Else"),
        ),
    )


def build() -> TypedGraph:
    builder = TypedGraphBuilder(default_schema())
    builder.add_extraction(extraction())
    return builder.build()


def test_camel_case() -> None:
    assert camel_case("wrote notes on") == "wroteNotesOn"
    assert camel_case("Born-in") == "bornIn"
    assert camel_case("!!") == "relatedTo"


def test_typed_nodes_official_names_and_triples() -> None:
    graph = build()
    ada = graph.node("Ada Lovelace", "Person")  # spaCy's PERSON mapped to the schema
    engine = graph.node("analytical engine", OTHERS)  # a semantic type, no class
    assert ada is not None and engine is not None
    assert graph.nodes[engine].semantic_type == "machine"
    assert graph.node("1843", "Date") is not None  # a year, by its form
    official = graph.node("Augusta Ada King", "Person")
    relations = {graph.spo_text(e) for e in graph.one_hop(ada)}
    assert relations == {
        "Ada Lovelace officialName Augusta Ada King",
        "Ada Lovelace wroteNotesOn Analytical Engine",
        "Ada Lovelace workedWith Charles Babbage",
    }
    assert official is not None
    # an endpoint outside the entity list is added as Others and recorded; a triple
    # naming no listed entity is rejected and recorded
    assert graph.node("Charles Babbage", OTHERS) is not None
    assert graph.node("Lord Byron", OTHERS) is None
    actions = sorted((i.action, i.message.split(" ")[0]) for i in graph.issues)
    assert actions == [("rejected", "triple"), ("repaired", "triple")]
    assert "Lord Byron" in next(i.message for i in graph.issues if i.action == "rejected")


def test_every_extracted_node_has_a_source_edge_to_its_chunk() -> None:
    graph = build()
    chunk = graph.chunk_node("c1")
    assert chunk is not None and graph.nodes[chunk].label == CHUNK
    sources = {graph.edges[e].subject for e in graph.one_hop(chunk, with_source=True)}
    assert sources == set(graph.entity_nodes())
    assert all(graph.edges[e].predicate == SOURCE for e in graph.one_hop(chunk, with_source=True))
    assert graph.one_hop(chunk) == []  # source edges only on request


def test_save_and_load_round_trip(tmp_path) -> None:
    graph = build()
    graph.save(tmp_path / "g.json")
    loaded = TypedGraph.load(tmp_path / "g.json")
    assert loaded.nodes == graph.nodes and loaded.edges == graph.edges
    assert loaded.issues == graph.issues


def test_alignment_adds_concept_chains_and_can_be_removed() -> None:
    chains = MappedConcepts(
        {
            "machine": ["machine", "device"],
            "Ada Lovelace": ["Ada Lovelace", "mathematician", "scientist"],
        }
    )
    aligned = Aligner(default_schema(), chains).align(build())
    engine = aligned.node("Analytical Engine", OTHERS)
    ada = aligned.node("Ada Lovelace", "Person")
    assert engine is not None and ada is not None

    def names(node: int, predicate: str) -> set[str]:
        return {
            aligned.nodes[aligned.edges[e].object].name
            for e in aligned.one_hop(node)
            if aligned.edges[e].predicate == predicate and aligned.edges[e].subject == node
        }

    assert names(engine, "belongTo") == {"machine"}
    machine = aligned.node("machine", CONCEPT)
    assert machine is not None and names(machine, "isA") == {"device"}
    # an entity without a semantic type belongs to its name's hypernym; the chain's top
    # joins the class concept
    assert names(ada, "belongTo") == {"mathematician"}
    scientist = aligned.node("scientist", CONCEPT)
    assert scientist is not None and names(scientist, "isA") == {"Person"}
    plain = without_alignment(aligned)
    assert not any(e.predicate in ("isA", "belongTo", "synonym") for e in plain.edges)


def test_llm_concept_completion_in_batches() -> None:
    model = ScriptedChatModel({"kag.concepts": '{"machine": ["machine", "device", "artifact"]}'})
    source = LLMConcepts(TaskRunner(model, default_registry()), batch=1)
    aligned = Aligner(default_schema(), source).align(build())
    engine = aligned.node("Analytical Engine", OTHERS)
    device = aligned.node("device", CONCEPT)
    assert engine is not None and device is not None
    assert any(
        e.subject == aligned.node("machine", CONCEPT)
        and e.predicate == "isA"
        and e.object == device
        for e in aligned.edges
    )
    # one batch per typed term (batch=1): "machine" and the names of untyped entities
    asked = [c.messages[-1].content for c in model.calls]
    assert any("machine (class Others)" in a for a in asked)
    assert source.failures == []


def test_llm_concepts_kept_in_a_store_are_read_back_and_new_types_need_a_model(
    tmp_path,
) -> None:
    model = ScriptedChatModel({"kag.concepts": '{"machine": ["machine", "device"]}'})
    kv = SqliteKeyValueStore(tmp_path / "kv.sqlite")
    first = LLMConcepts(TaskRunner(model, default_registry()), store=kv)
    first.prepare([("machine", "Others"), ("gadget", "Others")])
    assert first.chain("Machine") == ["machine", "device"] and len(model.calls) == 1
    # no model: stored chains (and the stored "no chain" of gadget) are read back
    again = LLMConcepts(None, store=kv)
    again.prepare([("machine", "Others"), ("gadget", "Others")])
    assert again.chain("machine") == ["machine", "device"] and again.chain("gadget") == []
    assert again.failures == []
    # a type never asked about cannot be completed without a model: recorded
    again.prepare([("widget", "Others")])
    assert again.chain("widget") == []
    assert len(again.failures) == 1 and "'widget'" in again.failures[0]
    kv.close()


def test_similar_edges_link_each_entity_to_its_nearest_namesake_of_its_class() -> None:
    builder = TypedGraphBuilder(default_schema())
    for name, label in [
        ("Antonio Vivaldi", "Person"),
        ("Vivaldi", "Person"),
        ("Vivaldi", "Others"),  # another class: never linked across
        ("Harvard University", "Organization"),
        ("Yale University", "Organization"),
    ]:
        builder.add_node(KagNode(name, label))
    graph = builder.build()

    def unit(*xs: float) -> list[float]:
        v = np.array(xs, dtype=np.float32)
        return list(v / np.linalg.norm(v))

    names = np.array(
        [unit(1, 0.1, 0), unit(1, 0, 0), unit(1, 0, 0), unit(0, 1, 0.6), unit(0, 1, -0.6)],
        dtype=np.float32,
    )
    linked = link_similar(graph, names, threshold=0.8)
    similar = [(linked.nodes[e.subject].key, linked.nodes[e.object].key) for e in linked.edges]
    # the two Vivaldis of class Person (cosine 0.995), once; the universities (0.47) not
    assert similar == [(("antonio vivaldi", "Person"), ("vivaldi", "Person"))]
    assert linked.counts()["kag_similar_edges"] == 1
    assert not without_alignment(linked).edges  # part of K_Alignment
    assert link_similar(graph, names, threshold=0.999).edges == []
    with pytest.raises(ValueError, match="5 name vectors for 4"):
        link_similar(TypedGraph(graph.nodes[:4], []), names)
