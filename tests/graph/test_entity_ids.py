"""An entity's id (its snapshot node id, derived from its normalised name) finds the
same entity in any build of the graph, whatever position it takes there, and finds
nothing once no entity carries the name; worked out by hand on three-chunk graphs."""

from __future__ import annotations

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph.builder import GraphBuilder, KnowledgeGraph
from quillian.types import Entity


def _graph(*chunks: tuple[str, tuple[ExtractedEntity, ...]]) -> KnowledgeGraph:
    builder = GraphBuilder()
    builder.add_all(Extraction(chunk, f"doc-{chunk}", entities) for chunk, entities in chunks)
    return builder.build()


QUILLIAN = ("c2", (ExtractedEntity("Ross Quillian"), ExtractedEntity("Semantic memory")))
COLLINS = (
    "c3",
    (
        ExtractedEntity("Allan M. Collins", description="a psychologist"),
        ExtractedEntity("semantic  memory."),
    ),
)
NAMED_IN_FULL = ("c1", (ExtractedEntity("M. Ross Quillian", aliases=("Ross Quillian",)),))


def _name(kg: KnowledgeGraph, entity_id: str) -> str | None:
    found = kg.find_entity(entity_id)
    return None if found is None else kg.entities[found].name


def test_an_id_finds_its_entity_wherever_a_rebuild_puts_it():
    before = _graph(QUILLIAN, COLLINS)
    ids = {e.name: before.entity_id(i) for i, e in enumerate(before.entities)}
    assert [e.name for e in before.entities] == [
        "Ross Quillian",
        "Semantic memory",
        "Allan M. Collins",
    ]
    assert ids["Semantic memory"] == Entity("the Semantic Memory").id  # the domain's id
    after = _graph(COLLINS, QUILLIAN)  # the same facts, read in another order
    assert after.entities[0].name == "Allan M. Collins"
    for name, entity_id in ids.items():
        assert _name(after, entity_id) == (
            name if name != "Semantic memory" else "semantic  memory."
        )


def test_an_id_follows_its_name_into_an_alias_and_is_gone_with_it():
    before = _graph(QUILLIAN, COLLINS)
    ross = before.entity_id(0)
    grown = _graph(NAMED_IN_FULL, QUILLIAN, COLLINS)  # now named in full first
    assert grown.entities[0].name == "M. Ross Quillian" and grown.entity_id(0) != ross
    assert grown.find_entity(ross) == 0  # through its alias "Ross Quillian"
    without = _graph(COLLINS)  # Quillian's chunk deleted
    assert without.find_entity(ross) is None
    assert without.find_entity(before.entity_id(2)) == 0  # Collins, moved from 2 to 0


def test_ids_of_other_nodes_and_unknown_ids_find_no_entity():
    kg = _graph(QUILLIAN, COLLINS)
    assert kg.find_entity("c2") is None  # a chunk node's id
    assert kg.find_entity(kg.snapshot.ids.id_of(kg.description_offset)) is None
    assert kg.find_entity("ent-0000000000000000") is None and kg.find_entity("") is None
