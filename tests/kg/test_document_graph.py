"""An index's document graph behind the ExternalGraph protocol, on a four-document index
built with the title-link extractor (topic -related_to-> each title its chunk mentions)."""

import pytest

from quillian.components.kg.base import ExternalGraph, KGTriple
from quillian.components.kg.document_graph import DocumentGraph
from quillian.errors import InputError
from quillian.testing.corpus import LOVELACE, tiny_index
from quillian.testing.kg import MemoryGraph

CORPUS = LOVELACE


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return tiny_index(tmp_path_factory.mktemp("idx"))


@pytest.fixture
def kg(context):
    return DocumentGraph(context)


def ids(kg):
    return {kg.entity_name(e): e for e in range(len(kg))}


def test_it_is_an_external_graph_of_the_index_entities(kg):
    assert isinstance(kg, ExternalGraph) and isinstance(MemoryGraph({}, []), ExternalGraph)
    assert sorted(ids(kg)) == sorted(CORPUS)
    ada = ids(kg)["Ada Lovelace"]
    assert kg.description(ada) == CORPUS["Ada Lovelace"]
    assert kg.lookup("  ada   LOVELACE ") == [ada] and kg.lookup("Ada") == []
    assert kg.aliases(ada) == []
    with pytest.raises(InputError, match="outside"):
        kg.entity_name(len(kg))


def test_seeds_are_entities_of_the_most_similar_descriptions(kg):
    seeds = kg.seed_entities("Where was Charles Babbage born?", 2)
    names = [kg.entity_name(e) for e, _ in seeds]
    assert names[0] == "Charles Babbage" and len(names) == 2 == len(set(names))
    assert seeds[0][1] >= seeds[1][1]
    assert len(kg.seed_entities("Babbage", 10)) == len(kg)  # every entity has a description
    with pytest.raises(InputError, match="k must be greater than 0"):
        kg.seed_entities("x", 0)


def test_triples_are_outgoing_relations_with_their_sentences(kg):
    e = ids(kg)
    babbage = e["Charles Babbage"]
    found = kg.triples([babbage, babbage], 10)
    assert list(found) == [babbage]
    assert found[babbage] == [
        KGTriple(
            babbage,
            "related_to",
            e["London"],
            "Charles Babbage",
            "London",
            "Charles Babbage was born in London.",
        ),
        KGTriple(
            babbage,
            "related_to",
            e["Analytical Engine"],
            "Charles Babbage",
            "Analytical Engine",
            "He designed the Analytical Engine.",
        ),
    ]
    assert len(kg.triples([babbage], 1)[babbage]) == 1
    assert kg.triples([babbage], 0) == {babbage: []}
    assert kg.triples([e["London"]], 5) == {e["London"]: []}  # London mentions no title


def test_inverse_triples_let_activation_spread_both_ways(context):
    kg = DocumentGraph(context, inverse=True)
    e = ids(kg)
    found = kg.triples([e["London"]], 5)[e["London"]]
    # read from London's side, the fact keeps its own order and leads to Babbage
    assert [t.text() for t in found] == ["<Charles Babbage | related_to | London>"]
    assert found[0].inverse and found[0].tail == e["Charles Babbage"]
    assert found[0].fact == (e["Charles Babbage"], "related_to", e["London"])
    assert found[0].sentence == "Charles Babbage was born in London."
