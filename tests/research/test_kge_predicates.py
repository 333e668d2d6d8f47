"""The spelled-against-folded predicates benchmark of ComplEx on a document graph."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kge_predicates import compare, trace_matches
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph.builder import GraphBuilder
from quillian.errors import InputError
from quillian.types import Triple

#: Each relation spelled three ways, as an open-IE extractor writes it.
SPELLINGS = [
    ["located in", "is located in", "was located in"],
    ["born in", "was born in", "is born in"],
    ["stars", "starring", "starred"],
]


def graph(n_triples: int, n_entities: int = 1500):
    """People born in and living in places, films starring people: each relation ties
    an entity to one of a few, so the graph holds something to learn."""
    rng = np.random.default_rng(0)
    builder = GraphBuilder()
    for i in range(n_triples):
        kind = i % 3
        head = int(rng.integers(0, n_entities))
        tail = n_entities + (head % 7) * 3 + kind if kind < 2 else int(rng.integers(0, 40))
        predicate = SPELLINGS[kind][int(rng.integers(0, 3))]
        names = [f"entity {head}", f"entity {tail}"]
        builder.add(
            Extraction(
                f"c{i}",
                "doc",
                tuple(ExtractedEntity(n) for n in names),
                (Triple(names[0], predicate, names[1]),),
            )
        )
    return builder.build()


def test_both_arms_are_trained_and_compared_on_the_same_held_out_pairs():
    result = compare(graph(9000), [0], epochs=5)
    assert result["arms"]["spelled"]["relations"] == 9
    assert result["arms"]["folded"]["relations"] == 3
    seed = result["seeds"][0]
    assert seed["test_pairs"] > 0
    for arm in ("spelled", "folded"):
        assert 0.0 <= seed[arm]["auc"] <= 1.0 and 0.0 < seed[arm]["mrr"] <= 1.0
        assert seed[arm]["epochs"] == 5
    for key in ("rr", "auc"):
        compared = result["paired"][key]
        assert compared["wins"] + compared["losses"] + compared["ties"] == seed["test_pairs"]
        low, high = compared["ci"]
        assert low <= compared["diff"] <= high


def test_a_graph_too_small_to_hold_out_is_refused():
    with pytest.raises(InputError, match="too few"):
        compare(graph(300), [0], epochs=1)


def test_recorded_predicates_are_matched_by_name_under_both_vocabularies(tmp_path):
    record = {
        "verification": {
            "triples": [
                {"triple": ["a", "is located in", "b"], "relation_match": "exact"},
                {"triple": ["a", "was starring", "b"], "relation_match": "embedding"},
                {"triple": ["a", "met", "b"], "relation_match": "embedding"},
                {"triple": ["x", "born in", "y"], "relation_match": ""},  # never linked
            ]
        }
    }
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert trace_matches(graph(30), [path]) == {
        "predicates": 3,
        "by_name_spelled": 1,
        "by_name_folded": 2,
    }
