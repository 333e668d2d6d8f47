"""Entity linking with the type re-rank, typed look-up through concepts, and the
exact layer's predicate test."""

from __future__ import annotations

from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.kag.graph import KagNode, TypedGraphBuilder
from quillian.components.kag.knowledge import KagKnowledge
from quillian.components.kag.schema import CONCEPT, default_schema


def knowledge() -> tuple[KagKnowledge, dict[str, int]]:
    b = TypedGraphBuilder(default_schema())
    ids = {
        "paris-city": b.add_node(KagNode("Paris", "GeographicLocation", semantic_type="city")),
        "paris-person": b.add_node(KagNode("Paris", "Person", semantic_type="trojan prince")),
        "troy": b.add_node(KagNode("Troy", "GeographicLocation", semantic_type="ancient city")),
    }
    city = b.add_node(KagNode("city", CONCEPT))
    ancient = b.add_node(KagNode("ancient city", CONCEPT))
    b.add_edge(ids["troy"], "belongTo", ancient)
    b.add_edge(ancient, "isA", city)
    b.add_edge(ids["paris-city"], "belongTo", city)
    return KagKnowledge(b.build(), default_schema(), HashEmbedder(32)), ids


def test_exact_names_link_at_one_and_the_type_orders_them() -> None:
    kn, ids = knowledge()
    as_person = kn.link("Paris", ["Person"], threshold=0.9)
    assert [x.node for x in as_person] == [ids["paris-person"], ids["paris-city"]]
    assert all(x.score == 1.0 for x in as_person)  # the score is the link's own
    as_place = kn.link("paris", ["GeographicLocation"], threshold=0.9)
    assert as_place[0].node == ids["paris-city"]
    assert kn.link("Lutetia", threshold=0.9) == []


def test_types_resolve_through_classes_and_concepts() -> None:
    kn, ids = knowledge()
    assert set(kn.nodes_of_type(["GeographicLocation"])) == {ids["paris-city"], ids["troy"]}
    # "city" is a concept: Paris belongs to it, Troy through ancient city isA city
    assert set(kn.nodes_of_type(["City"])) == {ids["paris-city"], ids["troy"]}
    assert kn.nodes_of_type(["AncientCity"]) == [ids["troy"]]
    # one isA level up from "ancient city" is "city"
    assert set(kn.nodes_of_type(["AncientCity"], broaden=1)) == {ids["paris-city"], ids["troy"]}
    assert kn.nodes_of_type(["Spaceship"]) == []


def test_predicate_match_ignores_case_and_word_joining() -> None:
    assert KagKnowledge.predicate_matches("bornIn", "born in")
    assert KagKnowledge.predicate_matches("bornIn", "BornIn")
    assert not KagKnowledge.predicate_matches("bornIn", "brithPlace")
