"""Relation aliases: Wikidata5M's relation file lists several names per relation; all are
kept, stored beside the graph, and a triple's predicate that is an alias (not the label)
maps to its relation with ``how == "alias"``, before the folded key or the embedding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.kg.mentions import RelationIndex
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.sources import triples_from_imported_graph
from quillian.components.kge.storage import model_directory, save_model
from quillian.engine.kge import open_knowledge
from quillian.errors import ConfigError

# Pid<TAB>label<TAB>alias1<TAB>alias2..., as wikidata5m_relation.txt
RELATIONS = (
    "P69\teducated at\talma mater\tstudied at\n"
    "P551\tresidence\tlives in\n"
    "P131\tlocated in the administrative territorial entity\tlocated in\n"
    "P36\tcapital\n"
)
ENTITIES = "Q1\tDouglas Adams\tDNA\nQ2\tLondon\nQ3\tEngland\nQ4\tCambridge\n"
TRIPLES = "Q1\tP69\tQ4\nQ1\tP551\tQ2\nQ2\tP131\tQ3\nQ3\tP36\tQ2\nQ4\tP131\tQ3\n"
DESCRIPTIONS = (
    "Q1\tEnglish writer and humorist\nQ2\tcapital city of England\n"
    "Q3\tcountry in Europe\nQ4\tuniversity town in England\n"
)


def release(root: Path) -> Path:
    root.mkdir(parents=True)
    for name, text in (
        ("wikidata5m_entity.txt", ENTITIES),
        ("wikidata5m_relation.txt", RELATIONS),
        ("wikidata5m_all_triplet.txt", TRIPLES),
        ("wikidata5m_text.txt", DESCRIPTIONS),
    ):
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def kg(tmp_path: Path) -> Path:
    out = tmp_path / "kg"
    options = ImportOptions(embedder_name="keyword")
    import_wikidata5m(release(tmp_path / "w5m"), out, KeywordEmbedder(), options=options)
    return out


def test_every_relation_alias_is_kept_and_stored(kg: Path) -> None:
    with ImportedGraph.open(kg, KeywordEmbedder()) as graph:
        aliases = dict(zip(graph.relation_names, graph.relation_aliases, strict=True))
    assert aliases == {
        "educated at": ("alma mater", "studied at"),
        "residence": ("lives in",),
        "located in the administrative territorial entity": ("located in",),
        "capital": (),
    }


def test_a_graph_stored_without_relation_aliases_still_opens(kg: Path) -> None:
    """Graphs imported before aliases were stored have no ``relation_aliases`` table."""
    for part in ("blob", "offsets"):
        (kg / f"relation_aliases_{part}.npy").unlink()
    with ImportedGraph.open(kg, KeywordEmbedder()) as graph:
        assert graph.relation_aliases == [()] * len(graph.relation_names)
        assert "educated at" in graph.relation_names


def test_an_alias_that_is_not_the_label_maps_to_its_relation(kg: Path) -> None:
    with ImportedGraph.open(kg, KeywordEmbedder()) as graph:
        names, aliases = graph.relation_names, graph.relation_aliases
    index = RelationIndex(names, KeywordEmbedder(), aliases=aliases)
    educated = names.index("educated at")
    match = index.match("Douglas Adams", "Alma  Mater", "Cambridge")
    assert (match.relation, match.how) == (educated, "alias")
    assert index.match("Douglas Adams", "studied at", "Cambridge").how == "alias"
    exact = index.match("Douglas Adams", "educated at", "Cambridge")
    assert (exact.relation, exact.how) == (educated, "exact")
    lives = index.match("Douglas Adams", "lives in", "London")
    assert (lives.relation, lives.how) == (names.index("residence"), "alias")
    # without the aliases the same predicate falls to the embedding
    assert RelationIndex(names, KeywordEmbedder()).match("DNA", "alma mater", "X").how == (
        "embedding"
    )


def test_a_label_wins_over_another_relations_alias() -> None:
    index = RelationIndex(
        ["located in", "residence"], KeywordEmbedder(), aliases=[(), ("located in", "home")]
    )
    label = index.match("a", "located in", "b")
    assert (label.relation, label.how) == (0, "exact")
    alias = index.match("a", "home", "b")
    assert (alias.relation, alias.how) == (1, "alias")
    with pytest.raises(ConfigError, match="1 relation alias lists for 2 relations"):
        RelationIndex(["a", "b"], KeywordEmbedder(), aliases=[()])


def test_the_engine_hands_the_aliases_to_know3(kg: Path) -> None:
    """``--kg DIR``: the relation index a KG-embedding method reads matches by alias."""
    with ImportedGraph.open(kg) as graph:
        triples = triples_from_imported_graph(graph)
    rng = np.random.default_rng(0)
    model = ComplEx(
        rng.normal(size=(triples.n_entities, 4)).astype(np.float32),
        rng.normal(size=(2 * triples.n_relations, 4)).astype(np.float32),
    )
    save_model(
        model_directory(kg),
        model,
        fingerprint=triples.fingerprint,
        n_triples=len(triples),
        epochs=1,
        config={},
    )

    def no_index() -> None:
        raise AssertionError("an imported graph needs no index")

    knowledge = open_knowledge(str(kg), no_index, None, KeywordEmbedder())  # type: ignore[arg-type]
    match = knowledge.relations.match("Douglas Adams", "alma mater", "Cambridge")
    assert match.how == "alias"
    assert knowledge.relations.names[match.relation] == "educated at"
