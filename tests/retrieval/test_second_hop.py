"""Second hops on a six-chunk world whose answers are worked out by hand.

c0 is about the film "In Love and War" and says it stars Woods (sentence cosine to
the question 0.3), is based on Stockdale's story (0.9) and came out in 1987 (0.95);
Stockdale's article has two paragraphs, c1 (chunk cosine 0.4) and c2 (0.7); c3 is
about Woods, c4 about 1987 (a date), and c5, about Gross, says Gross acted in the
film (0.5). The question names the film.
"""

import math

import numpy as np
import pytest

from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.factories import make_retriever
from quillian.components.graph.builder import GraphBuilder
from quillian.components.retrieval.base import RetrievalResult, RetrievalTrace, ScoredPassage
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.fusion import FusedConfig, FusedRetriever
from quillian.components.retrieval.second_hop import chain, second_hop, words
from quillian.errors import ConfigError
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.types import Provenance, Triple

Q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
FILM, STOCKDALE, WOODS, YEAR, GROSS = "In Love and War", "Stockdale", "Woods", "1987", "Gross"
SENTENCES = {
    "It stars Woods.": 0.3,
    "It is based on the story of Stockdale.": 0.9,
    "It came out in 1987.": 0.95,
    "Gross acted in In Love and War.": 0.5,
}
CHUNKS = (0.8, 0.4, 0.7, 0.2, 0.1, 0.3)


def unit(cos: float) -> list[float]:
    return [cos, math.sqrt(1 - cos * cos), 0.0]


def fact(s: str, o: str, sentence: str, chunk: str) -> Triple:
    return Triple(s, "related_to", o, sentence, Provenance("d", chunk, 0, len(sentence), sentence))


def about(name: str, kind: str = "PERSON") -> ExtractedEntity:
    return ExtractedEntity(name, kind, description=f"about {name}", is_topic=True)


def named(name: str, kind: str = "PERSON") -> ExtractedEntity:
    return ExtractedEntity(name, kind)


@pytest.fixture
def ctx(tmp_path) -> RetrievalContext:
    builder = GraphBuilder()
    film_facts = (
        fact(FILM, WOODS, "It stars Woods.", "c0"),
        fact(FILM, STOCKDALE, "It is based on the story of Stockdale.", "c0"),
        fact(FILM, YEAR, "It came out in 1987.", "c0"),
    )
    entities = (about(FILM, "WORK"), named(WOODS), named(STOCKDALE), named(YEAR, "DATE"))
    builder.add(Extraction("c0", "d0", entities, film_facts))
    builder.add(Extraction("c1", "d1", (about(STOCKDALE),)))
    builder.add(Extraction("c2", "d1", (about(STOCKDALE),)))
    builder.add(Extraction("c3", "d3", (about(WOODS),)))
    builder.add(Extraction("c4", "d4", (about(YEAR, "DATE"),)))
    gross = (fact(GROSS, FILM, "Gross acted in In Love and War.", "c5"),)
    builder.add(Extraction("c5", "d5", (about(GROSS), named(FILM, "WORK")), gross))
    kg = builder.build([f"c{i}" for i in range(6)])
    n_desc = len(kg.descriptions)
    texts = ExactVectorIndex(tmp_path / "texts", 3)
    rows = [unit(0.0)] * n_desc + [unit(SENTENCES[r.description]) for r in kg.relations]
    texts.add(np.arange(len(rows)), rows)
    chunks = ExactVectorIndex(tmp_path / "chunks", 3)
    chunks.add(np.arange(6), [unit(c) for c in CHUNKS])
    return RetrievalContext(
        kg=kg,
        embedder=HashEmbedder(3),
        chunk_vectors=chunks,
        text_vectors=texts,
        description_rows=np.arange(n_desc),
        relation_rows=n_desc + np.arange(len(kg.relations)),
        chunk_titles=[FILM, STOCKDALE, STOCKDALE, WOODS, YEAR, f"{GROSS} (actor)"],
        chunk_texts=[f"text {i}" for i in range(6)],
    )


def entity(ctx: RetrievalContext, name: str) -> int:
    return next(i for i, e in enumerate(ctx.kg.entities) if e.name == name)


def test_the_nearest_sentence_leads_to_the_nearest_paragraph_of_its_page(ctx) -> None:
    # from the film's passage: the date's sentence is nearest (0.95) but a date names no
    # topic; then Stockdale's (0.9), whose two paragraphs go by their cosine: c2 (0.7)
    hop = second_hop(ctx, Q, 0, frozenset({entity(ctx, FILM)}))
    assert hop is not None
    assert (hop.chunk, ctx.kg.entities[hop.entity].name) == (2, STOCKDALE)
    assert hop.similarity == pytest.approx(0.9, abs=1e-6)
    assert ctx.hop_links.pages(entity(ctx, STOCKDALE)).tolist() == [1, 2]


def test_a_passage_also_leads_back_to_one_that_names_its_entity(ctx) -> None:
    # the film's own entity is not named by this question: Gross's passage says Gross
    # acted in it (0.5), which beats Woods (0.3) but not Stockdale (0.9)
    hop = second_hop(ctx, Q, 0, frozenset())
    assert hop is not None and hop.chunk == 2
    # with Stockdale named in the question, the backward link is the best left
    hop = second_hop(ctx, Q, 0, frozenset({entity(ctx, STOCKDALE)}))
    assert hop is not None and (hop.chunk, hop.similarity) == (5, pytest.approx(0.5, abs=1e-6))
    # named, the film's entity leads nowhere back: Woods's page is what is left
    hop = second_hop(ctx, Q, 0, frozenset({entity(ctx, STOCKDALE), entity(ctx, FILM)}))
    assert hop is not None and hop.chunk == 3
    # a passage with no relation and no passage naming its entity leads nowhere
    assert second_hop(ctx, Q, 3, frozenset({entity(ctx, FILM)})) is not None  # back to c0
    assert second_hop(ctx, Q, 4, frozenset()) is None  # a date's page


def test_a_page_the_question_names_by_title_is_not_a_second_hop(ctx) -> None:
    stockdale = frozenset({entity(ctx, STOCKDALE)})
    assert second_hop(ctx, Q, 0, stockdale).chunk == 5  # back to Gross's passage, 0.5
    # the question names "Gross (actor)" by its title without the qualifier, though its
    # entity was not matched: Woods's page (0.3) is the second hop
    hop = second_hop(ctx, Q, 0, stockdale, words("Did Gross star in it?"))
    assert hop is not None and hop.chunk == 3
    assert second_hop(ctx, Q, 0, stockdale, words("Gross or Woods, who starred?")) is None
    assert words('Due South\'s "Benton  Fraser"') == " due south s benton fraser "
    assert words("Grosse Pointe") != words("Gross") and " gross " not in words("Grosse")


def test_chain_places_each_second_hop_right_after_its_passage(ctx) -> None:
    ranked = [ctx.passage(c, s) for c, s in ((3, 0.9), (0, 0.8), (5, 0.7), (1, 0.6))]
    film = frozenset({entity(ctx, FILM)})
    out, hops = chain(ctx, Q, ranked, 2, film)
    # Woods's page leads back to the film (c0, ranked next anyway); the film leads to
    # Stockdale's c2, placed after the film with the film's score; the list keeps its length
    assert [p.chunk for p in out] == [3, 0, 2, 5]
    assert [p.score for p in out] == [0.9, 0.9, 0.8, 0.7]
    assert [(h.source, h.chunk) for h in hops] == [(3, 0), (0, 2)]
    out, hops = chain(ctx, Q, ranked, 0, film)
    assert out == ranked and hops == []


class FixedRanking:
    def __init__(self, name: str, chunks: list[int]) -> None:
        self.name, self.chunks = name, chunks

    def retrieve(self, query, k, query_vector=None):
        passages = [
            ScoredPassage(c, f"c{c}", 1.0 / (r + 1), "", "") for r, c in enumerate(self.chunks)
        ]
        return RetrievalResult(self.name, query, passages[:k], RetrievalTrace())


def test_fused_places_second_hops_and_shows_the_link(ctx) -> None:
    members = [FixedRanking("x", [0, 3, 4]), FixedRanking("y", [0, 4, 3])]
    plain = FusedRetriever(members, FusedConfig(depth=3, second_hops=0), ctx)
    assert [p.chunk for p in plain.retrieve(FILM, 3, Q).passages] == [0, 3, 4]
    hopped = FusedRetriever(members, FusedConfig(depth=3, second_hops=1), ctx)
    result = hopped.retrieve(f"Who is {FILM} about?", 3, Q)
    assert [p.chunk for p in result.passages] == [0, 2, 3]
    (path,) = result.trace.paths
    assert (path.entity, path.passage) == (STOCKDALE, STOCKDALE)
    assert path.relations[0].sentence == "It is based on the story of Stockdale."
    assert path.relations[0].hop == 2
    assert set(result.trace.timings_ms) == {"x", "y", "second_hops"}
    assert "second_hops" not in plain.retrieve(FILM, 3, Q).trace.timings_ms
    with pytest.raises(ConfigError, match="retrieval context"):
        FusedRetriever(members, FusedConfig(second_hops=1))
    with pytest.raises(ConfigError, match="second_hops"):
        FusedConfig(second_hops=-1)
    built = make_retriever(ctx, "fused")
    assert isinstance(built, FusedRetriever) and built.context is ctx
    assert built.config.second_hops == 2
