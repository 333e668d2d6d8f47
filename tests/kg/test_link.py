"""One graph across sources: aligning an index's document graph to an imported graph,
then crossing from one to the other in SA retrieval and KG-Infused RAG.

The index holds four documents whose texts name no other title, so the document graph
has a single relation (Ada Lovelace - Analytical Engine). The imported graph knows that
Lord Byron is Ada Lovelace's father; only a crossing can bring his passage in.
"""

import asyncio
import json
import shutil

import numpy as np
import pytest

from quillian.cli.main import main
from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.components.kg.document_graph import DocumentGraph
from quillian.components.kg.link import (
    Alignment,
    LinkOptions,
    index_fingerprint,
    link_graphs,
)
from quillian.components.kg.linked import LinkBridges, LinkedGraph
from quillian.components.kg.spec import GraphSpec, make_bridges, make_graph
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.components.retrieval.sa import SARetriever
from quillian.errors import ConfigError, IndexMissingError
from quillian.index import build_index, open_index
from quillian.methods.kg_infused.pipeline import KGInfusedConfig, KGInfusedRAG
from quillian.methods.steps import KGRound
from quillian.testing.corpus import tiny_index
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document

CORPUS = {
    "Ada Lovelace": "Ada Lovelace wrote the first computer program for the Analytical Engine.",
    "Lord Byron": "Lord Byron was a Romantic poet.",
    "Analytical Engine": "The Analytical Engine was a proposed mechanical calculator.",
    "London": "London is the capital of England.",
}
RELEASE = {
    "wikidata5m_entity.txt": "Q1\tAda Lovelace\tAugusta Ada King\n"
    "Q2\tLord Byron\tGeorge Gordon Byron\nQ3\tLondon\nQ4\tmathematics\nQ5\tLondon\n",
    "wikidata5m_relation.txt": "P1\tfather\nP2\tplace of birth\nP3\tfield of work\n",
    "wikidata5m_all_triplet.txt": "Q1\tP1\tQ2\nQ1\tP2\tQ3\nQ1\tP3\tQ4\nQ2\tP2\tQ3\n",
    "wikidata5m_text.txt": "Q1\tAda Lovelace English mathematician, wrote the first "
    "computer program\nQ2\tLord Byron English Romantic poet\nQ3\tcapital of England\n"
    "Q4\tfield of study\nQ5\tcity in Ontario, Canada\n",
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("link")
    build_index(
        [Document(text, title) for title, text in CORPUS.items()],
        root / "index",
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
        config={"embedder_name": "keyword"},
    )
    context = open_index(root / "index", KeywordEmbedder()).context
    for name, text in RELEASE.items():
        (root / "w5m").mkdir(exist_ok=True)
        (root / "w5m" / name).write_text(text, encoding="utf-8")
    import_wikidata5m(
        root / "w5m",
        root / "kg",
        KeywordEmbedder(),
        options=ImportOptions(preprocess=False, embedder_name="keyword"),
    )
    graph = ImportedGraph.open(root / "kg", KeywordEmbedder())
    documents = DocumentGraph(context, name="index")
    alignment = link_graphs(documents, graph)
    alignment.save(root / "kg", root / "index")
    yield root, context, graph, documents, alignment
    graph.close()


def doc(documents, name):
    return documents.lookup(name)[0]


def test_entities_align_by_name_and_description(setup):
    _, _, graph, documents, alignment = setup
    linked = {
        documents.entity_name(int(s)): graph.entity_id(int(t))
        for s, t in zip(alignment.source, alignment.target, strict=True)
    }
    # London is ambiguous by name (Q3, Q5): its description decides
    assert linked == {"Ada Lovelace": "Q1", "Lord Byron": "Q2", "London": "Q3"}
    rows = {documents.entity_name(r["source"]): r for r in alignment.rows()}
    assert rows["Ada Lovelace"]["kind"] == "name" and rows["Ada Lovelace"]["name_score"] == 1.0
    assert rows["London"]["description_score"] > 0.2
    assert all(0.6 <= r["score"] <= 1.0 for r in rows.values())
    ada = doc(documents, "Ada Lovelace")
    assert alignment.target_of(ada) == (
        int(graph.lookup("Ada Lovelace")[0]),
        pytest.approx(rows["Ada Lovelace"]["score"]),
    )
    assert alignment.target_of(doc(documents, "Analytical Engine")) is None
    assert alignment.sources_of(graph.index_of("Q4")) == []
    assert alignment.meta["by_kind"] == {"name": 3, "alias": 0, "description": 0}
    # the index's own description vectors were used (same model): embedding the
    # descriptions instead links the same entities
    assert documents.description_embeddings([ada], "another-model") is None
    own = documents.description_embeddings([ada], graph.embedder_id)
    assert own.shape == (1, KeywordEmbedder().dim) and abs(np.linalg.norm(own) - 1) < 1e-5
    texts = _Renamed({documents.entity_name(e): documents.description(e) for e in range(4)})
    assert link_graphs(texts, graph).rows() == alignment.rows()


def test_an_alias_match_scores_below_a_name_match(setup):
    graph = setup[2]
    renamed = {
        "Augusta Ada King": CORPUS["Ada Lovelace"].replace("Ada Lovelace", "Augusta Ada King")
    }
    alignment = link_graphs(_Renamed(renamed), graph)
    row = next(r for r in alignment.rows() if r["target"] == graph.index_of("Q1"))
    assert row["kind"] == "alias" and row["name_score"] == 0.9


class _Renamed:
    """A one-entity source named by an alias of the imported entity."""

    name = "renamed"

    def __init__(self, texts):
        self.texts = list(texts.items())

    def __len__(self):
        return len(self.texts)

    def entity_name(self, entity):
        return self.texts[entity][0]

    def aliases(self, entity):
        return []

    def description(self, entity):
        return self.texts[entity][1]


def test_the_name_decides_before_the_description_and_namesakes_stay_apart(tmp_path):
    """An extracted entity's description is the passage that mentions it: here it reads
    like the university's gloss, but the state has the name."""
    release = {
        "wikidata5m_entity.txt": "Q1\tPennsylvania\nQ2\tUniversity of Pennsylvania\t"
        "Pennsylvania\nQ3\tLeland Stanford\n",
        "wikidata5m_relation.txt": "P1\tlocated in\n",
        "wikidata5m_all_triplet.txt": "Q2\tP1\tQ1\n",
        "wikidata5m_text.txt": "Q1\ta Mid-Atlantic state\nQ2\ta university in "
        "Pittsburgh Pennsylvania\nQ3\trailroad executive, founder of Stanford University\n",
    }
    (tmp_path / "w5m").mkdir()
    for name, text in release.items():
        (tmp_path / "w5m" / name).write_text(text, encoding="utf-8")
    options = ImportOptions(preprocess=False)
    import_wikidata5m(tmp_path / "w5m", tmp_path / "kg", KeywordEmbedder(), options=options)
    source = _Renamed(
        {
            "Pennsylvania": "Carnegie Mellon is a university in Pittsburgh, Pennsylvania.",
            "Jane Stanford": "railroad executive, founder of Stanford University",
        }
    )
    with ImportedGraph.open(tmp_path / "kg", KeywordEmbedder()) as graph:
        alignment = link_graphs(source, graph)
        state, university = graph.index_of("Q1"), graph.index_of("Q2")
        similarity = (
            graph.description_vectors([state, university])
            @ graph.embed_texts([source.description(0)])[0]
        )
        assert similarity[1] > similarity[0] + 0.3  # the description prefers the university
        assert alignment.target_of(0) == (state, pytest.approx(0.6 + 0.4 * similarity[0]))
        assert alignment.target_of(1) is None  # same description, another Stanford


def test_a_high_threshold_keeps_fewer_links_and_options_are_checked(setup):
    _, _, graph, documents, alignment = setup
    strict = link_graphs(documents, graph, LinkOptions(min_score=0.95))
    assert len(strict) < len(alignment)
    with pytest.raises(ConfigError, match="min_score"):
        LinkOptions(min_score=1.5)
    with pytest.raises(ConfigError, match="description_candidates"):
        LinkOptions(description_candidates=-1)


def test_alignment_is_saved_per_index_and_refused_once_its_entities_change(setup, tmp_path):
    root, _, _, _, alignment = setup
    kg_dir, index = tmp_path / "kg", tmp_path / "index"
    kg_dir.mkdir()
    shutil.copytree(root / "index", index)
    fingerprint = index_fingerprint(index)
    assert len(fingerprint) == 16 and fingerprint == index_fingerprint(root / "index")
    saved = alignment.save(kg_dir, index)
    again = Alignment.load(kg_dir, index)
    assert np.array_equal(again.target, alignment.target) and again.meta["links"] == 3
    assert again.meta["index_name"] == "index" and saved.name == fingerprint
    alignment.save(kg_dir, index)  # replacing an alignment is atomic and leaves no debris
    assert [p.name for p in (kg_dir / "links").iterdir()] == [fingerprint]
    rebuild = dict(
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
        config={"embedder_name": "keyword"},
    )
    build_index([Document(t, title) for title, t in CORPUS.items()], index, **rebuild)
    assert Alignment.load(kg_dir, index).meta["links"] == 3  # same documents, same entities
    build_index([Document("Paris is in France.", "Paris")], index, **rebuild)
    assert index_fingerprint(index) != fingerprint
    with pytest.raises(IndexMissingError, match="its entities have changed since"):
        Alignment.load(kg_dir, index)
    with pytest.raises(IndexMissingError, match="quillian kg link"):
        Alignment.load(tmp_path / "elsewhere", index)


def test_linked_graph_merges_twins_and_crosses_in_both_directions(setup):
    _, _, graph, documents, alignment = setup
    union = LinkedGraph(graph, documents, alignment)
    ada_kg, byron_kg = graph.index_of("Q1"), graph.index_of("Q2")
    engine = union.canonical(doc(documents, "Analytical Engine"))
    assert union.canonical(doc(documents, "Ada Lovelace")) == ada_kg
    assert engine >= len(graph) and len(union) == len(graph) + len(documents)
    assert union.entity_name(engine) == "Analytical Engine"
    assert union.lookup("ada lovelace") == [ada_kg]
    assert "Augusta Ada King" in union.aliases(ada_kg)
    triples = union.triples([ada_kg], 10)[ada_kg]
    assert {(t.relation, t.tail) for t in triples} >= {("father", byron_kg), ("related_to", engine)}
    from_docs = next(t for t in triples if t.tail == engine)
    assert from_docs.sentence == CORPUS["Ada Lovelace"] and from_docs.head_name == "Ada Lovelace"
    assert len(union.triples([ada_kg], 2)[ada_kg]) == 2
    assert [t.relation for t in union.triples([ada_kg], 2)[ada_kg]] == ["father", "related_to"]
    seeds = union.seed_entities("Lord Byron poet", 2)
    assert seeds[0][0] == byron_kg and len({e for e, _ in seeds}) == 2


def test_sa_retrieval_crosses_through_the_imported_graph(setup):
    _, context, graph, documents, alignment = setup
    question = "father of Ada Lovelace?"
    plain = SARetriever(context).retrieve(question, 2)
    bridges = LinkBridges(graph, alignment)
    crossed = SARetriever(context, bridges=bridges).retrieve(question, 2)
    activated = {a.name for a in crossed.trace.activated}
    assert "Lord Byron" in activated and "Lord Byron" not in {a.name for a in plain.trace.activated}
    assert crossed.passages[1].title == "Lord Byron" != plain.passages[1].title
    bridge = next(r for r in crossed.trace.relations if r.relation == -1)
    assert (bridge.subject, bridge.predicate, bridge.object) == (
        "Ada Lovelace",
        "father",
        "Lord Byron",
    )
    assert bridge.description == f"from {graph.name}" and crossed.method == f"sa+{graph.name}"
    found = bridges.bridges([doc(documents, "Ada Lovelace")])
    assert {(documents.entity_name(b.source), b.predicate) for b in found} >= {
        ("Ada Lovelace", "father"),
        ("Lord Byron", "father"),  # walkable both ways
    }


def test_kg_infused_activation_continues_from_the_kg_into_the_documents(setup):
    root, context, *_ = setup
    model = ScriptedChatModel(
        {
            "kg-infused.triple-select": "<Ada Lovelace | related_to | Analytical Engine>",
            "kg-infused.triple-update": "<Ada Lovelace | related_to | Analytical Engine>",
            "kg-infused.subgraph-summary": "Ada Lovelace programmed the Analytical Engine.",
            "kg-infused.kg-query-expansion": "Analytical Engine",
            "kg-infused.passage-note": "A mechanical calculator.",
            "kg-infused.knowledge-augment": "The Analytical Engine, a mechanical calculator.",
            "kg-infused.answer": "a mechanical calculator",
        }
    )
    union = make_graph(f"{root / 'kg'}+index", context, root / "index")
    assert isinstance(union, LinkedGraph)
    pipeline = KGInfusedRAG(
        TaskRunner(model, default_registry()),
        make_retriever(context, "dense"),
        union,
        KGInfusedConfig(k_e=1, k_p=2),
    )
    result = asyncio.run(pipeline.answer("What did Ada Lovelace program?"))
    rounds = [s for s in result.steps if isinstance(s, KGRound)]
    assert rounds[0].entities == ("Ada Lovelace",)
    candidates = model.calls[0].messages[-1].content
    assert "<Ada Lovelace | father | Lord Byron>" in candidates  # from the imported graph
    assert rounds[0].next_entities == ("Analytical Engine",)  # a document-only entity


def test_graph_specs_parse_and_fail_clearly(setup, tmp_path):
    root, context, *_ = setup
    assert GraphSpec.parse("index+inverse") == GraphSpec(None, True, True)
    assert GraphSpec.parse("kg/a+b+index") == GraphSpec(root.__class__("kg/a+b"), True, False)
    assert GraphSpec.parse("kg/x") == GraphSpec(root.__class__("kg/x"), False, False)
    with pytest.raises(ConfigError, match="inverse"):
        GraphSpec.parse("kg/x+inverse")
    with pytest.raises(ConfigError, match="needs an index"):
        make_graph(f"{root / 'kg'}+index")
    assert make_bridges(None, None) is None and make_bridges("index", root / "index") is None
    other = tiny_index(tmp_path / "other", {"London": CORPUS["London"]})
    with pytest.raises(IndexMissingError, match="kg link"):
        make_graph(f"{root / 'kg'}+index", other, tmp_path / "other")
    with pytest.raises(ConfigError, match="only SA retrieval"):
        make_retriever(
            context, "dense", bridges=make_bridges(f"{root / 'kg'}+index", root / "index")
        )


def test_cli_links_then_retrieves_across(setup, tmp_path, capsys):
    root, *_ = setup
    kg_dir = tmp_path / "kg"
    shutil.copytree(root / "kg", kg_dir)
    assert main(["kg", "link", str(kg_dir), "--documents", str(root / "index"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["links"] == 3 and summary["examples"][0]["target"].endswith("]")
    question = "father of Ada Lovelace"
    args = ["retrieve", str(root / "index"), question, "-k", "2", "--kg", f"{kg_dir}+index"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2. [" in out and "Lord Byron" in out and f"from {kg_dir.name}" in out
