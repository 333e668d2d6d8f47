"""Triples from an imported knowledge graph and from an index's document graph."""

from __future__ import annotations

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph.builder import GraphBuilder
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.components.kge.sources import (
    predicate_key,
    triples_from_imported_graph,
    triples_from_knowledge_graph,
)
from quillian.types import Triple

RELEASE = {
    "wikidata5m_entity.txt": "Q1\tThe Beatles\nQ2\tParis\nQ3\tLiverpool\nQ4\tFrance\n",
    "wikidata5m_relation.txt": "P1\tfrom\nP2\tcapital of\n",
    "wikidata5m_all_triplet.txt": "Q1\tP1\tQ3\nQ2\tP2\tQ4\nQ3\tP1\tQ4\n",
    "wikidata5m_text.txt": "Q1\tband\nQ2\tcity\nQ3\tcity\nQ4\tcountry\n",
}


def test_triples_of_an_imported_graph(tmp_path):
    (tmp_path / "w5m").mkdir()
    for name, text in RELEASE.items():
        (tmp_path / "w5m" / name).write_text(text, encoding="utf-8")
    options = ImportOptions(preprocess=False, embedder_name="keyword")
    import_wikidata5m(tmp_path / "w5m", tmp_path / "kg", KeywordEmbedder(), options=options)
    with ImportedGraph.open(tmp_path / "kg") as graph:
        triples = triples_from_imported_graph(graph)
        assert (triples.n_entities, triples.n_relations, len(triples)) == (4, 2, 3)
        names = graph.relation_names
        found = {
            (graph.entity_id(h), names[r], graph.entity_id(t))
            for h, r, t in triples.as_array().tolist()
        }
        key = triples.source_key
    assert found == {("Q1", "from", "Q3"), ("Q2", "capital of", "Q4"), ("Q3", "from", "Q4")}
    assert triples.relation_names == tuple(names) and key
    with ImportedGraph.open(tmp_path / "kg") as graph:  # the same graph: the same fingerprint
        assert triples_from_imported_graph(graph).fingerprint == triples.fingerprint


def chunk(chunk_id, names, triples):
    return Extraction(
        chunk_id,
        "doc",
        tuple(ExtractedEntity(n) for n in names),
        tuple(Triple(s, p, o) for s, p, o in triples),
    )


def test_triples_of_a_document_graph():
    builder = GraphBuilder()
    builder.add(chunk("c1", ["Ada", "London", "Babbage"], [("Ada", "Born in", "London")]))
    builder.add(
        chunk(
            "c2",
            ["Ada", "London", "Babbage"],
            [("Ada", "born  in", "London"), ("Babbage", "worked with", "Ada")],
        )
    )
    kg = builder.build()
    triples = triples_from_knowledge_graph(kg)
    names = [e.name for e in kg.entities]
    found = [
        (names[h], triples.relation_names[r], names[t]) for h, r, t in triples.as_array().tolist()
    ]
    # "Born in" stated twice (two chunks, two spellings) is one triple of one relation
    assert found == [("Ada", "born in", "London"), ("Babbage", "worked with", "Ada")]
    assert triples.n_entities == kg.n_entities == 3 and triples.n_relations == 2
    assert predicate_key("  ") == "related to"


def test_spellings_of_a_relation_fold_together_on_request():
    builder = GraphBuilder()
    builder.add(chunk("c1", ["Ada", "London"], [("Ada", "was born in", "London")]))
    builder.add(chunk("c2", ["Ada", "London"], [("Ada", "born in", "London")]))
    builder.add(chunk("c3", ["Ada", "London"], [("Ada", "is born in", "London")]))
    builder.add(chunk("c4", ["Babbage", "London"], [("Babbage", "born in", "London")]))
    kg = builder.build()
    assert triples_from_knowledge_graph(kg).n_relations == 3
    folded = triples_from_knowledge_graph(kg, fold=True)
    # one relation, named by its most frequent spelling; Ada's three triples are one
    assert folded.relation_names == ("born in",) and len(folded) == 2
    assert folded.source_key != triples_from_knowledge_graph(kg).source_key
