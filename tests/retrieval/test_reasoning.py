"""The one mapping from a trace's activation paths to the reasoning paths the API,
MCP and the CLI show: walked from the seed, each relation's ends put in the direction
activation crossed it, ids derived from the names and sentences."""

from __future__ import annotations

from dataclasses import asdict

from quillian.components.retrieval.base import ActivationPath, UsedRelation
from quillian.components.retrieval.reasoning import PathEntity, reasoning_paths
from quillian.types import entity_id, relation_id

ADVISOR = UsedRelation(
    3, "M. Ross Quillian", "doctoral advisor", "Herbert A. Simon", "", 0.9,
    "His doctoral advisor was Herbert A. Simon.", hop=1,
)  # fmt: skip
#: read as "Milwaukee birthplace of Simon": activation crossed it object to subject
BIRTHPLACE = UsedRelation(
    7, "Milwaukee", "birthplace of", "Herbert A. Simon", "", 0.6,
    "Simon was born in Milwaukee.", hop=2,
)  # fmt: skip


def test_a_two_hop_path_is_walked_from_its_seed_to_the_passage():
    path = ActivationPath("Milwaukee", (ADVISOR, BIRTHPLACE), "Milwaukee", "chunk-1")
    (walked,) = reasoning_paths([path])
    assert walked.seed == PathEntity(entity_id("M. Ross Quillian"), "M. Ross Quillian")
    assert walked.entity == PathEntity(entity_id("Milwaukee"), "Milwaukee")
    assert (walked.chunk_id, walked.title) == ("chunk-1", "Milwaukee")
    first, second = walked.steps
    assert (first.hop, first.source.name, first.target.name) == (
        1, "M. Ross Quillian", "Herbert A. Simon",
    )  # fmt: skip
    assert (second.hop, second.source.name, second.target.name) == (
        2, "Herbert A. Simon", "Milwaukee",
    )  # fmt: skip
    # the relation stays as it was read, with its id and sentence
    assert (second.subject, second.predicate, second.object) == (
        "Milwaukee", "birthplace of", "Herbert A. Simon",
    )  # fmt: skip
    assert second.relation == relation_id(
        "Milwaukee", "birthplace of", "Herbert A. Simon", "Simon was born in Milwaukee."
    )
    assert second.sentence == "Simon was born in Milwaukee."
    assert walked.as_dict()["steps"][1]["target"] == {
        "entity": entity_id("Milwaukee"),
        "name": "Milwaukee",
    }
    # written out field by field for speed, it stays what dataclasses.asdict gives
    plain = asdict(walked)
    assert walked.as_dict() == {**plain, "steps": list(plain["steps"])}


def test_names_match_as_entities_do_and_hops_default_to_the_position():
    unhopped = UsedRelation(1, "the Beatles", "formed in", "Liverpool", "", 1.0, "")
    described = UsedRelation(2, "Liverpool", "port on", "Mersey", "a port on the Mersey", 1.0)
    path = ActivationPath("mersey", (unhopped, described))
    (walked,) = reasoning_paths([path])
    assert walked.seed.name == "the Beatles" and walked.seed.entity == entity_id("Beatles")
    assert [s.hop for s in walked.steps] == [1, 2]
    assert walked.steps[1].sentence == "a port on the Mersey"  # the description, lacking one
    assert (walked.chunk_id, walked.title) == ("", "")


def test_a_path_without_relations_is_left_out():
    assert reasoning_paths([ActivationPath("Ada Lovelace", ())]) == []
