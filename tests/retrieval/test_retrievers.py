"""Retrievers on a four-entity graph whose answers are worked out by hand.

World: chunk c0 is about A and mentions B and D; c1 is about B and mentions C; c2 is
about C; c3 is about D. Relations: A-B (text s0), A-D (s2), B-C (s1). The query vector
is e0; every other vector is [cos, sqrt(1 - cos^2), 0], so its cosine to the query is
chosen by hand:

    descriptions  A 0.9   B 0.2   C 0.3   D 0.0
    relations     s0 1.0  s1 0.7  s2 0.1
    chunks        c0 0.8  c1 0.5  c2 0.6  c3 0.9
"""

import math
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.factories import make_retriever
from quillian.components.graph.builder import GraphBuilder
from quillian.components.retrieval.base import (
    RetrievalResult,
    RetrievalTrace,
    ScoredPassage,
    best_k,
    top_k_passages,
)
from quillian.components.retrieval.context import RecentSearches, RetrievalContext, endpoint_text
from quillian.components.retrieval.dense import DenseRetriever
from quillian.components.retrieval.fusion import FusedConfig, FusedRetriever
from quillian.components.retrieval.kag import KAGChunkRetriever
from quillian.components.retrieval.ppr import PPRConfig, PPRRetriever
from quillian.components.retrieval.sa import SAConfig, SARetriever
from quillian.errors import ConfigError
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.types import Provenance, Triple

Q = np.array([1.0, 0.0, 0.0], dtype=np.float32)


def unit(cos: float) -> list[float]:
    return [cos, math.sqrt(1 - cos * cos), 0.0]


def triple(s: str, o: str, text: str, chunk: str) -> Triple:
    return Triple(s, "related_to", o, text, Provenance("d", chunk, 0, len(text), text))


def topic(name: str) -> ExtractedEntity:
    return ExtractedEntity(name, "PERSON", description=f"about {name}", is_topic=True)


def mention(name: str) -> ExtractedEntity:
    return ExtractedEntity(name, "PERSON")


@pytest.fixture
def context(tmp_path) -> RetrievalContext:
    builder = GraphBuilder()
    builder.add(
        Extraction(
            "c0",
            "d0",
            (topic("A"), mention("B"), mention("D")),
            (triple("A", "B", "s0", "c0"), triple("A", "D", "s2", "c0")),
        )
    )
    builder.add(Extraction("c1", "d1", (topic("B"), mention("C")), (triple("B", "C", "s1", "c1"),)))
    builder.add(Extraction("c2", "d2", (topic("C"),)))
    builder.add(Extraction("c3", "d3", (topic("D"),)))
    kg = builder.build(["c0", "c1", "c2", "c3"])
    assert [e.name for e in kg.entities] == ["A", "B", "D", "C"]
    assert [d.text for d in kg.descriptions] == ["about A", "about B", "about C", "about D"]
    texts = ExactVectorIndex(tmp_path / "texts", 3)
    # rows 0-3: descriptions A, B, C, D; rows 4-6: s0, s1, s2
    texts.add(np.arange(7), [unit(c) for c in (0.9, 0.2, 0.3, 0.0, 1.0, 0.7, 0.1)])
    chunks = ExactVectorIndex(tmp_path / "chunks", 3)
    chunks.add(np.arange(4), [unit(c) for c in (0.8, 0.5, 0.6, 0.9)])
    return RetrievalContext(
        kg=kg,
        embedder=HashEmbedder(3),
        chunk_vectors=chunks,
        text_vectors=texts,
        description_rows=np.arange(4),
        relation_rows=np.array([4, 6, 5]),  # relations in order: A-B, A-D, B-C
        chunk_titles=["A", "B", "C", "D"],
        chunk_texts=["a text", "b text", "c text", "d text"],
    )


def titles(result) -> list[str]:
    return [p.title for p in result.passages]


def test_paper_sa_worked_by_hand(context):
    # seed A (best description); w' = (w - .4)/.6: A-B 1.0, B-C 0.5, A-D -0.5.
    # BFS from A: B = 1, D = -0.5; from B: C = 0.5. Activated (> 0.5): A, B.
    # Documents describing A or B: c0, c1; both pass tau_d = 0.45; ranked by cosine,
    # then the dense ranking fills the list.
    sa = SARetriever(context, SAConfig.paper(seed_k=1, hops=2))
    result = sa.retrieve("q", 4, Q)
    assert [s.name for s in result.trace.seeds] == ["A"]
    act = {a.name: round(a.activation, 6) for a in result.trace.activated}
    assert act == {"A": 1.0, "B": 1.0}
    assert titles(result) == ["A", "B", "D", "C"]
    assert [round(p.score, 3) for p in result.passages[:2]] == [0.8, 0.5]
    assert [(r.subject, r.object) for r in result.trace.relations] == [("A", "B")]
    assert result.trace.relations[0].sentence == "s0"


def test_paper_sa_prunes_documents_below_tau_d(context):
    sa = SARetriever(context, SAConfig.paper(seed_k=1, hops=2, document_threshold=0.6))
    # c1 (0.5) is pruned: only c0 comes from the graph, the rest is the dense fallback
    assert titles(sa.retrieve("q", 2, Q)) == ["A", "D"]


def test_fused_sa_worked_by_hand(context):
    # activations A 1, B 1, C 0.5, D -0.5 (as above); document score = best of
    # activation x (1 if about, 0.5 if mentions) + 1.0 x cosine:
    # c0 = 1 + .8, c1 = 1 + .5, c2 = .5 + .6; c3 only through the dense fallback.
    sa = SARetriever(
        context, SAConfig(seed_k=1, hops=2, c=0.4, seeding="description", graded_seeds=False)
    )
    result = sa.retrieve("q", 4, Q)
    assert titles(result) == ["A", "B", "C", "D"]
    np.testing.assert_allclose([p.score for p in result.passages[:3]], [1.8, 1.5, 1.1], atol=1e-5)


def test_fused_sa_shows_the_path_that_reached_each_passage(context):
    # relation s1 (B-C, cosine 0.7) is under tau_r = 0.8, so step 4 keeps only A-B; C's
    # passage (rank 3) was reached over A -> B -> C, and its path says so, with hops
    sa = SARetriever(
        context,
        SAConfig(
            seed_k=1, hops=2, c=0.4, seeding="description", graded_seeds=False,
            relation_threshold=0.8,
        ),
    )  # fmt: skip
    trace = sa.retrieve("q", 3, Q).trace
    assert [(r.subject, r.object) for r in trace.relations] == [("A", "B")]
    paths = {p.entity: p for p in trace.paths}
    assert [(r.subject, r.object, r.hop) for r in paths["C"].relations] == [
        ("A", "B", 1),
        ("B", "C", 2),
    ]
    assert paths["C"].passage == "C" and paths["C"].relations[1].sentence == "s1"
    assert paths["B"].passage == "B" and len(paths["B"].relations) == 1
    paper = SARetriever(context, SAConfig.paper(seed_k=1, hops=2, relation_threshold=0.8))
    assert paper.retrieve("q", 3, Q).trace.paths == []  # the paper's algorithm: step 4 only
    # fused over sa keeps sa's paths to the passages it returns (the evidence shows them)
    fused = FusedRetriever([sa, DenseRetriever(context)], FusedConfig(depth=4, second_hops=0))
    result = fused.retrieve("q", 3, Q)  # RRF: A (sa 1st, dense 2nd), D, B; C 4th
    assert titles(result) == ["A", "D", "B"]
    assert {p.passage for p in result.trace.paths} == {"B"}  # C's path is not kept


def test_graded_seed_starts_at_its_cosine(context):
    # A starts at 0.9: B = 0.9, D = -0.45; from B, C = 0.5 x 0.9 = 0.45 and A back to 1;
    # C then lifts B to min(1, 0.9 + 0.5 x 0.45) = 1. c2 = 0.45 + 0.6.
    sa = SARetriever(context, SAConfig(seed_k=1, hops=2, c=0.4, seeding="description"))
    result = sa.retrieve("q", 3, Q)
    np.testing.assert_allclose([p.score for p in result.passages], [1.8, 1.5, 1.05], atol=1e-5)


def test_hybrid_candidates_bring_in_unreached_chunks(context):
    # D's chunk is not reached by the graph (D is inhibited) but is the dense top 1
    sa = SARetriever(
        context, SAConfig(seed_k=1, hops=2, c=0.4, seeding="description", candidates=1)
    )
    result = sa.retrieve("q", 4, Q)
    assert dict((p.title, round(p.score, 3)) for p in result.passages)["D"] == 0.9


def test_hops_limit_the_subgraph(context):
    sa = SARetriever(context, SAConfig(seed_k=1, hops=1, c=0.4, seeding="description"))
    result = sa.retrieve("q", 3, Q)
    assert result.trace.subgraph_nodes == 3  # A, B, D: C is two hops away
    assert "C" not in {a.name for a in result.trace.activated}


def test_lexical_seeding_finds_named_entities(context):
    sa = SARetriever(context, SAConfig(seeding="lexical"))
    # single letters are below the lexicon's minimum key length: nothing matches
    assert sa.seeds("what about A and B", Q) == []
    auto = SARetriever(context, SAConfig(seeding="auto", seed_k=2))
    assert [s.source for s in auto.seeds("what about A", Q)] == ["description"] * 2


def test_ppr_ranks_seed_passage_first(context):
    ppr = PPRRetriever(context, PPRConfig(seeding="description", seed_k=1, passage_weight=0.0))
    result = ppr.retrieve("q", 4, Q)
    assert titles(result)[0] == "A"
    assert len(result.passages) == 4
    scores = [p.score for p in result.passages]
    assert scores == sorted(scores, reverse=True)


def test_dense_orders_by_cosine(context):
    assert titles(DenseRetriever(context).retrieve("q", 3, Q)) == ["D", "A", "C"]


def test_top_k_passages_is_exact_and_deterministic():
    assert top_k_passages({3: 0.5, 1: 0.5, 2: 0.9}, 2) == [(2, 0.9), (1, 0.5)]
    filled = top_k_passages({5: 1.0}, 3, fallback=[5, 7, 8, 9])
    assert [c for c, _ in filled] == [5, 7, 8]
    assert [s for _, s in filled] == sorted((s for _, s in filled), reverse=True)
    with pytest.raises(ValueError, match="k must be greater than 0, got 0"):
        top_k_passages({}, 0)


def test_best_k_is_a_stable_argsort_prefix():
    rng = np.random.default_rng(3)
    for scores in (rng.random(500), rng.integers(0, 4, 500).astype(float), np.zeros(7)):
        for k in (0, 1, 5, 7, 50, 600):
            want = np.argsort(-scores, kind="stable")[:k]
            np.testing.assert_array_equal(best_k(scores, k), want)


def test_recent_searches_run_a_search_once_and_forget_failures():
    import threading
    import time

    recent, calls = RecentSearches(size=2), []

    def slow():
        calls.append(1)
        time.sleep(0.05)
        return [(1, 0.5)]

    answers = []
    threads = [threading.Thread(target=lambda: answers.append(recent.get(("a",), slow)))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [[(1, 0.5)]] * 4 and calls == [1]  # the others waited for it
    answers[0].append((2, 0.1))  # a caller's copy, not the kept list
    assert recent.get(("a",), slow) == [(1, 0.5)] and calls == [1]
    recent.get(("b",), slow), recent.get(("c",), slow)  # "a" is the oldest: dropped
    assert recent.get(("a",), slow) == [(1, 0.5)] and len(calls) == 4

    def broken():
        raise OSError("disk gone")

    with pytest.raises(OSError):
        recent.get(("d",), broken)
    assert recent.get(("d",), slow) == [(1, 0.5)]  # the failure was not kept


def test_config_validation():
    with pytest.raises(ConfigError, match="seed_k must be greater than 0, got 0"):
        SAConfig(seed_k=0)
    with pytest.raises(ConfigError, match="c must be in"):
        SAConfig(c=1.0)
    with pytest.raises(ConfigError, match="damping"):
        PPRConfig(damping=1.5)
    with pytest.raises(ConfigError, match=r"tolerance must be in \(0, 1\), got 0"):
        PPRConfig(tolerance=0)


def test_bm25_returns_k_passages_when_fewer_match(context):
    from quillian.components.retrieval.bm25 import BM25Retriever
    from quillian.components.retrieval.bm25_index import BM25Index

    index = BM25Index.build(["apple pie", "banana split", "cherry tart", "date loaf"])
    result = BM25Retriever(context, index).retrieve("cherry", 3)
    # only c2 has the word; the others follow in index order with their score, 0
    assert titles(result) == ["C", "A", "B"]
    assert result.passages[0].score > 0 and [p.score for p in result.passages[1:]] == [0, 0]
    assert len(BM25Retriever(context, index).retrieve("cherry", 10).passages) == 4
    assert titles(BM25Retriever(context, index).retrieve("zebra", 2)) == ["A", "B"]


# --- seeding from the question's nearest triples ----------------------------------------


def test_the_nearest_relations_are_ranked_by_their_sentences(context) -> None:
    # s0 (A-B) 1.0, s1 (B-C) 0.7, s2 (A-D) 0.1; relations are numbered A-B, A-D, B-C
    assert [(r, round(s, 3)) for r, s in context.top_relations(Q, 2)] == [(0, 1.0), (2, 0.7)]


def test_triple_seeds_add_the_ends_of_the_nearest_relations(context) -> None:
    plain = context.seeds("q", Q, "lexical", 0)
    assert plain == []  # the query names no entity
    seeds = context.seeds("q", Q, "lexical", 0, triples=2)
    # A-B (1.0), then B-C (0.7): A and B at 1.0, C at 0.7, each once
    assert [(s.name, round(s.score, 3), s.source) for s in seeds] == [
        ("A", 1.0, "triple"),
        ("B", 1.0, "triple"),
        ("C", 0.7, "triple"),
    ]
    config = PPRConfig(seeding="lexical", triple_seeds=1, triple_text="sentence", passage_weight=0)
    ppr = PPRRetriever(context, config)
    assert [s.name for s in ppr.retrieve("q", 2, Q).trace.seeds] == ["A", "B"]
    with pytest.raises(ConfigError, match="triple_seeds"):
        SAConfig(triple_seeds=-1)


# --- reciprocal rank fusion --------------------------------------------------------------


def test_rank_fusion_sums_reciprocal_ranks(context) -> None:
    sa = SARetriever(context, SAConfig())
    dense = DenseRetriever(context)
    fused = FusedRetriever([sa, dense], FusedConfig(rrf_k=60, depth=4, second_hops=0))
    result = fused.retrieve("A", 4, Q)
    a = [p.chunk for p in sa.retrieve("A", 4, Q).passages]
    b = [p.chunk for p in dense.retrieve("A", 4, Q).passages]
    expected = {c: sum(1 / (60 + r.index(c) + 1) for r in (a, b) if c in r) for c in {*a, *b}}
    assert [p.chunk for p in result.passages] == sorted(expected, key=lambda c: (-expected[c], c))
    assert result.passages[0].score == pytest.approx(max(expected.values()))
    assert result.method == "fused:sa+dense"
    assert set(result.trace.timings_ms) == {sa.name, dense.name}
    with pytest.raises(ConfigError, match="one or more"):
        FusedConfig(members=" , ")
    # one member alone is its own ranking (what a tuning grid sets the fusion against)
    alone_sa = make_retriever(context, "fused", members="sa", second_hops=0)
    assert [p.chunk for p in alone_sa.retrieve("A", 4, Q).passages] == a
    assert FusedConfig(members="sa+ppr").names == FusedConfig(members="sa, ppr").names
    default = make_retriever(context, "fused")
    assert default.retrieve("A", 2, Q).method == "fused:sa+ppr"
    assert isinstance(default, FusedRetriever)
    with_kag = make_retriever(context, "fused", members="sa,ppr,kag")
    assert isinstance(with_kag, FusedRetriever)
    kag = with_kag.members[2]
    assert isinstance(kag, KAGChunkRetriever)
    assert kag.config.bm25_swap is False  # a member's swap would only move its 50th passage
    alone = make_retriever(context, "kag")
    assert isinstance(alone, KAGChunkRetriever)
    assert alone.config.bm25_swap is True  # alone, the authors'
    with pytest.raises(ConfigError, match="cannot fuse itself"):
        make_retriever(context, "fused", members="sa,fused")


class FixedRanking:
    """A retriever that returns the same chunks in the same order for every query."""

    def __init__(self, name: str, chunks: list[int], scores: list[float] | None = None) -> None:
        self.name, self.chunks = name, chunks
        self.scores = scores or [1.0 / (r + 1) for r in range(len(chunks))]

    def retrieve(self, query, k, query_vector=None):
        passages = [
            ScoredPassage(c, f"c{c}", s, f"c{c}", "")
            for c, s in zip(self.chunks, self.scores, strict=True)
        ]
        return RetrievalResult(self.name, query, passages[:k], RetrievalTrace())


def test_a_small_rank_constant_keeps_each_members_first_passage() -> None:
    # one member ranks c0 first, the other c1; both rank c2 fourth. At 60, agreement
    # wins: c2 scores 2/64 = 0.031 against 1/61 = 0.016 for c0 or c1. At 1, each
    # member's first passage comes first: 1/2 against 2/5 for c2.
    first = FixedRanking("x", [0, 4, 5, 2])
    second = FixedRanking("y", [1, 6, 7, 2])

    def top2(rrf_k: int) -> set[str]:
        fused = FusedRetriever([first, second], FusedConfig(rrf_k=rrf_k, depth=4, second_hops=0))
        return set(titles(fused.retrieve("q", 2, Q)))

    assert top2(60) == {"c2", "c0"}
    assert top2(1) == {"c0", "c1"}
    assert FusedConfig().rrf_k == 1


def test_equal_fused_scores_go_to_the_members_evidence() -> None:
    # c3 and c2 are each one member's second passage: equal reciprocal ranks. c3 scored
    # 0.9 of its member's best, c2 0.1 of its own, so c3 goes first, whatever the
    # chunk order says
    first = FixedRanking("x", [0, 3], [1.0, 0.9])
    second = FixedRanking("y", [1, 2], [2.0, 0.2])
    fused = FusedRetriever([first, second], FusedConfig(rrf_k=1, depth=2, second_hops=0))
    assert titles(fused.retrieve("q", 4, Q)) == ["c0", "c1", "c3", "c2"]


# --- synonym links, node specificity and endpoint relation texts -------------------------


class TableEmbedder:
    """Embeds each text by a table given by hand (unknown texts: the zero vector)."""

    model_id = "table"
    dim = 3

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts):
        return np.array([self.table.get(t, [0.0] * 3) for t in texts], dtype=np.float32)


def test_entity_chunks_count_the_chunks_about_or_mentioning_each_entity(context):
    # entities A, B, D, C: A in c0; B in c0, c1; D in c0, c3; C in c1, c2
    assert context.entity_chunks.tolist() == [1, 2, 2, 2]


def test_synonym_links_join_entities_whose_names_embed_close(context):
    # names A, B, D, C: D and C nearly the same (cos 0.995), the rest orthogonal
    names = {"A": [1, 0, 0], "B": [0, 1, 0], "D": [0, 0, 1], "C": [0, 0.1, 0.995]}
    ctx = replace(context, embedder=TableEmbedder(names))
    src, dst, w = ctx.synonym_edges(0.8, 5)
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == [(2, 3), (3, 2)]
    assert w.tolist() == pytest.approx([0.995, 0.995], abs=1e-3)
    # seeded at A: D's passage c3 is one hop further than c0, C's passage c2 two; the
    # D-C link gives c2 a shorter way in and so more mass
    config = PPRConfig(seeding="description", seed_k=1, triple_seeds=0, passage_weight=0.0)

    def c2_score(cfg: PPRConfig) -> float:
        scores = {p.title: p.score for p in PPRRetriever(ctx, cfg).retrieve("q", 4, Q).passages}
        return scores["C"]

    assert c2_score(replace(config, synonyms=True)) > c2_score(config)
    assert c2_score(replace(config, synonyms=True, synonym_threshold=0.999)) == pytest.approx(
        c2_score(config)
    )
    with pytest.raises(ConfigError, match="synonym_k"):
        PPRConfig(synonym_k=0)


def test_specificity_divides_a_seed_by_its_chunk_count(context):
    # seeds A (cos 0.9, one chunk) and C (0.3, two chunks): specificity halves C's
    # reset mass against A's, so C's passage c2 loses ground to A's c0
    config = PPRConfig(seeding="description", seed_k=3, triple_seeds=0, passage_weight=0.0)

    def ratio(cfg: PPRConfig) -> float:
        scores = {p.title: p.score for p in PPRRetriever(context, cfg).retrieve("q", 4, Q).passages}
        return scores["C"] / scores["A"]

    assert ratio(replace(config, specificity=True)) < ratio(config)


def test_endpoint_text_puts_the_names_before_the_sentence():
    prov = Provenance("d", "c", 0, 10, "Simon was born in Milwaukee.")
    born = Triple("Milwaukee", "birthplace of", "Herbert Simon", "x", prov)
    assert endpoint_text(born) == (
        "Milwaukee — birthplace of — Herbert Simon: Simon was born in Milwaukee."
    )
    # a co-occurrence's predicate says nothing; a text that repeats the triple is dropped
    assert endpoint_text(Triple("A", "related_to", "B", "A met B.")) == "A — B: A met B."
    assert endpoint_text(Triple("A", "met", "B", "A met B")) == "A — met — B"


def test_triple_seeds_can_match_the_endpoint_texts(context, tmp_path):
    # endpoint texts of A-B, A-D, B-C at cosines 0.1, 0.9, 0.5: the order flips
    endpoints = ExactVectorIndex(tmp_path / "endpoints", 3)
    endpoints.add(np.arange(3), [unit(0.1), unit(0.9), unit(0.5)])
    ctx = replace(context, endpoint_vectors=endpoints)
    ranked = ctx.top_relations(Q, 2, "endpoints")
    assert [(r, round(s, 3)) for r, s in ranked] == [(1, 0.9), (2, 0.5)]
    assert [r for r, _ in ctx.top_relations(Q, 2)] == [0, 2]  # the sentences: unchanged
    seeds = ctx.seeds("q", Q, "lexical", 0, triples=1, triple_text="endpoints")
    assert [s.name for s in seeds] == ["A", "D"]
    # an index without them finds no relation on them, and asking it for triple seeds
    # on them is refused with the way out, for ppr as for any retriever
    assert context.top_relations(Q, 2, "endpoints") == []
    with pytest.raises(ConfigError, match="--endpoint-texts"):
        context.seeds("q", Q, "lexical", 0, triples=1, triple_text="endpoints")
    with pytest.raises(ConfigError, match="--endpoint-texts"):
        PPRRetriever(context, PPRConfig(triple_seeds=5)).retrieve("q", 2, Q)
    assert context.seeds("q", Q, "lexical", 0, triples=1, triple_text="sentence")


def test_ppr_solvers_rank_alike(context):
    ranked = {
        solver: PPRRetriever(context, PPRConfig(solver=solver)).retrieve("q", 4, Q).passages
        for solver in ("chebyshev", "power")
    }
    assert [p.title for p in ranked["chebyshev"]] == [p.title for p in ranked["power"]]
    for a, b in zip(ranked["chebyshev"], ranked["power"], strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-6)
    with pytest.raises(ConfigError, match="solver"):
        PPRConfig(solver="jacobi")


def test_tied_endpoint_texts_are_broken_by_text_not_by_storage_order(context, tmp_path):
    # A-B 0.1, A-D and B-C tied at 0.5: of the tie, "A — D: s2" sorts before "B — C: s1"
    endpoints = ExactVectorIndex(tmp_path / "endpoints", 3)
    endpoints.add(np.arange(3), [unit(0.1), unit(0.5), unit(0.5)])
    ctx = replace(context, endpoint_vectors=endpoints)
    assert [r for r, _ in ctx.top_relations(Q, 1, "endpoints")] == [1]
    assert [r for r, _ in ctx.top_relations(Q, 3, "endpoints")] == [1, 2, 0]


# --- dates and numbers as seeds ----------------------------------------------------------


def test_dates_seed_nothing_in_ppr_by_default(tmp_path) -> None:
    # c0 is about Anna and mentions the date; c1 is about Bert and says what the date
    # was; c2 is about Carl. The query is nearest the date's description (0.95), then
    # Anna's (0.6).
    date = "14 January 1729"
    builder = GraphBuilder()
    builder.add(Extraction("c0", "d0", (topic("Anna"), mention(date)), ()))
    described = ExtractedEntity(date, "DATE", description="the day it happened")
    builder.add(Extraction("c1", "d1", (topic("Bert"), described), ()))
    builder.add(Extraction("c2", "d2", (topic("Carl"),)))
    kg = builder.build(["c0", "c1", "c2"])
    cosine = {"about Anna": 0.6, "about Bert": 0.0, "about Carl": 0.0, "the day it happened": 0.95}
    texts = ExactVectorIndex(tmp_path / "texts", 3)
    texts.add(np.arange(len(kg.descriptions)), [unit(cosine[d.text]) for d in kg.descriptions])
    chunks = ExactVectorIndex(tmp_path / "chunks", 3)
    chunks.add(np.arange(3), [unit(c) for c in (0.5, 0.5, 0.5)])
    ctx = RetrievalContext(
        kg=kg,
        embedder=HashEmbedder(3),
        chunk_vectors=chunks,
        text_vectors=texts,
        description_rows=np.arange(len(kg.descriptions)),
        relation_rows=np.zeros(0, dtype=np.int64),
        chunk_titles=["A", "B", "C"],
        chunk_texts=["a", "b", "c"],
    )
    assert [e.name for e, lit in zip(kg.entities, ctx.literal_entities, strict=True) if lit] == [
        date
    ]

    def names(seeds) -> list[str]:
        return [s.name for s in seeds]

    # found by its description or named in the question, the date seeds unless told not to
    assert names(ctx.seeds("q", Q, "description", 2)) == [date, "Anna"]
    assert names(ctx.seeds("q", Q, "description", 2, literals=False)) == ["Anna"]
    question = f"What did Anna do on {date}?"
    assert names(ctx.seeds(question, Q, "lexical", 0)) == ["Anna", date]
    assert names(ctx.seeds(question, Q, "lexical", 0, literals=False)) == ["Anna"]
    # PPR leaves it out by default; with it, Bert's passage (titled B), reached only
    # through the date, gets more mass
    config = PPRConfig(seed_k=2, passage_weight=0.0)
    plain = PPRRetriever(ctx, config).retrieve("q", 3, Q)
    assert names(plain.trace.seeds) == ["Anna"]
    assert titles(plain)[0] == "A"
    with_dates = PPRRetriever(ctx, replace(config, literal_seeds=True)).retrieve("q", 3, Q)
    assert names(with_dates.trace.seeds) == [date, "Anna"]
    scores = {p.title: p.score for p in with_dates.passages}
    assert scores["B"] > {p.title: p.score for p in plain.passages}.get("B", 0.0)


# --- the walk from an entity to its page ---------------------------------------------------


def test_an_entity_with_a_page_walks_to_it_alone(context) -> None:
    from quillian.components.retrieval.ppr import pages_only
    from quillian.stores.snapshot import EdgeKind

    # c0 is about A and mentions B and D; c1 is about B and mentions C. B, C and D have
    # pages (c1, c2, c3), so their links to the chunks that only mention them go; A's
    # link to its page stays, and so does every link of an entity without a page (E,
    # mentioned by c0 in a graph of its own below).
    kg = context.kg
    snap = pages_only(kg.snapshot, kg.chunk_offset)

    def links(s) -> set[tuple[str, str]]:
        out = set()
        for e, entity in enumerate(kg.entities):
            for j in range(s.indptr[e], s.indptr[e + 1]):
                target = int(s.indices[j]) - kg.chunk_offset
                kind = s.edge_kinds[j] == EdgeKind.DESCRIBED_BY
                if kind and target >= 0 and s.weights[j] > 0:
                    out.add((entity.name, kg.chunk_ids[target]))
        return out

    assert links(kg.snapshot) == {
        ("A", "c0"),
        ("B", "c0"),
        ("B", "c1"),
        ("D", "c0"),
        ("D", "c3"),
        ("C", "c1"),
        ("C", "c2"),
    }
    assert links(snap) == {("A", "c0"), ("B", "c1"), ("D", "c3"), ("C", "c2")}
    builder = GraphBuilder()
    builder.add(Extraction("c0", "d0", (topic("A"), mention("E")), ()))
    lone = builder.build(["c0"])
    assert pages_only(lone.snapshot, lone.chunk_offset) is lone.snapshot
    # seeded at A, B's page c1 gains on c0 (about A) once B stops sending mass back to c0
    config = PPRConfig(seeding="description", seed_k=1, passage_weight=0.0)

    def ratio(cfg: PPRConfig) -> float:
        scores = {p.title: p.score for p in PPRRetriever(context, cfg).retrieve("q", 4, Q).passages}
        return scores["B"] / scores["A"]

    assert ratio(config) > ratio(replace(config, mention_links=True))


class SlowRanking(FixedRanking):
    """A FixedRanking that takes a while and names the thread it ran on."""

    def __init__(self, name: str, chunks: list[int], seconds: float) -> None:
        super().__init__(name, chunks)
        self.seconds, self.threads = seconds, set()

    def retrieve(self, query, k, query_vector=None):
        time.sleep(self.seconds)
        self.threads.add(threading.current_thread().name)
        return super().retrieve(query, k, query_vector)


class Failing(FixedRanking):
    def retrieve(self, query, k, query_vector=None):
        raise ConfigError("this member failed")


def test_members_on_two_threads_fuse_exactly_as_in_turn() -> None:
    members = [
        SlowRanking("x", [0, 4, 5, 2], 0.02),
        SlowRanking("y", [1, 6, 7, 2], 0.05),
        SlowRanking("z", [2, 0, 9], 0.01),
    ]
    one = FusedRetriever(members, FusedConfig(workers=1, second_hops=0)).retrieve("q", 5, Q)
    threads = {m.name: set(m.threads) for m in members}
    assert all(t == {threading.current_thread().name} for t in threads.values())
    two = FusedRetriever(members, FusedConfig(workers=2, second_hops=0)).retrieve("q", 5, Q)
    assert [(p.chunk, p.score) for p in two.passages] == [(p.chunk, p.score) for p in one.passages]
    assert two.method == "fused:x+y+z"  # the members' order, whoever ran them
    assert set(two.trace.timings_ms) == {"x", "y", "z"}
    helpers = {t for m in members for t in m.threads} - {threading.current_thread().name}
    assert helpers and all(t.startswith("fused") for t in helpers)  # a helper took some
    assert FusedConfig().workers == 2
    with pytest.raises(ConfigError, match="workers"):
        FusedConfig(workers=0)
    with pytest.raises(ConfigError, match="this member failed"):
        failing = FusedRetriever([members[0], Failing("f", [])], FusedConfig(second_hops=0))
        failing.retrieve("q", 5, Q)
