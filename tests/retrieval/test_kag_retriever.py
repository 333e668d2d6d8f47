"""KAG's chunk retriever: the choice between dense, PageRank and their fusion, the
min-max fusion worked by hand, and the BM25 swap-in.

World (as in test_retrievers): c0 is about A and mentions B and D; c1 is about B and
mentions C; c2 is about C; c3 is about D. Chunk cosines to the query: c0 0.8, c1 0.5,
c2 0.6, c3 0.9.
"""

import math

import numpy as np
import pytest

from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph.builder import GraphBuilder
from quillian.components.retrieval.base import Seed
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.kag import KAGChunkConfig, KAGChunkRetriever, minmax_fuse
from quillian.errors import ConfigError
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.types import Provenance, Triple

Q = np.array([1.0, 0.0, 0.0], dtype=np.float32)


def unit(cos: float) -> list[float]:
    return [cos, math.sqrt(1 - cos * cos), 0.0]


def _triple(s: str, o: str, chunk: str) -> Triple:
    return Triple(s, "related_to", o, f"{s}-{o}", Provenance("d", chunk, 0, 3, f"{s}-{o}"))


def _ent(name: str, topic: bool = False) -> ExtractedEntity:
    return ExtractedEntity(name, "PERSON", description=f"about {name}", is_topic=topic)


@pytest.fixture
def context(tmp_path) -> RetrievalContext:
    builder = GraphBuilder()
    builder.add(
        Extraction(
            "c0",
            "d0",
            (_ent("A", True), _ent("B"), _ent("D")),
            (_triple("A", "B", "c0"), _triple("A", "D", "c0")),
        )
    )
    builder.add(Extraction("c1", "d1", (_ent("B", True), _ent("C")), (_triple("B", "C", "c1"),)))
    builder.add(Extraction("c2", "d2", (_ent("C", True),)))
    builder.add(Extraction("c3", "d3", (_ent("D", True),)))
    kg = builder.build(["c0", "c1", "c2", "c3"])
    texts = ExactVectorIndex(tmp_path / "texts", 3)
    texts.add(np.arange(len(kg.descriptions) + 3), [unit(0.1)] * (len(kg.descriptions) + 3))
    chunks = ExactVectorIndex(tmp_path / "chunks", 3)
    chunks.add(np.arange(4), [unit(c) for c in (0.8, 0.5, 0.6, 0.9)])
    chunk_texts = ["alpha text", "beta text", "gamma zebra", "delta text"]
    return RetrievalContext(
        kg=kg,
        embedder=HashEmbedder(3),
        chunk_vectors=chunks,
        text_vectors=texts,
        description_rows=np.arange(len(kg.descriptions)),
        relation_rows=np.arange(3) + len(kg.descriptions),
        chunk_titles=["A", "B", "C", "D"],
        chunk_texts=chunk_texts,
        bm25=BM25Index.build(chunk_texts),
    )


def titles(result) -> list[str]:
    return [p.title for p in result.passages]


def test_minmax_fuse_by_hand() -> None:
    # first: 1 -> 1.0, 2 -> 0.0; second: 2 -> 1.0, 3 -> 0.0 (min-max each)
    fused = minmax_fuse({1: 0.4, 2: 0.2}, {2: 0.9, 3: 0.5}, 0.5)
    assert fused == pytest.approx({1: 0.5, 2: 0.5, 3: 0.0})
    assert minmax_fuse({1: 0.3}, {}, 0.5) == {1: 0.5}  # a constant list normalises to 1


def test_no_seeds_ranks_by_dense(context) -> None:
    kag = KAGChunkRetriever(context, KAGChunkConfig(bm25_swap=False))
    result = kag.retrieve_seeded("q", 4, [], Q)
    assert result.method == "kag:dense"
    assert titles(result) == ["D", "A", "C", "B"]


def test_confident_seeds_rank_by_pagerank_alone(context) -> None:
    kag = KAGChunkRetriever(context, KAGChunkConfig(bm25_swap=False))
    seeds = kag.seeds_for([("C", 1.0)])
    assert [s.name for s in seeds] == ["C"]
    result = kag.retrieve_seeded("q", 2, seeds, Q)
    assert result.method == "kag:ppr"
    # C's own chunk first, then c1 (about B, mentions C); c3 (dense best) is not reached
    assert titles(result) == ["C", "B"]


def test_weak_seeds_fuse_pagerank_with_dense(context) -> None:
    kag = KAGChunkRetriever(context, KAGChunkConfig(bm25_swap=False))
    entity = next(i for i, e in enumerate(context.kg.entities) if e.name == "C")
    result = kag.retrieve_seeded("q", 4, [Seed(entity, "C", 0.5, "bound")], Q)
    assert result.method == "kag:fused"
    # c2 tops PageRank (1.0) and has dense 0.25 after min-max: 0.625; c3 has dense 1.0
    # and little PageRank mass: about 0.5
    assert titles(result)[0] == "C"
    assert set(titles(result)) == {"A", "B", "C", "D"}


def test_bm25_top_one_replaces_the_last_chunk(context) -> None:
    kag = KAGChunkRetriever(context)
    result = kag.retrieve_seeded("zebra", 2, [], Q)
    # dense top 2 would be D, A; BM25's top-1 for "zebra" is C, swapped in last
    assert titles(result) == ["D", "C"]


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError):
        KAGChunkConfig(damping=1.0)
    with pytest.raises(ConfigError):
        KAGChunkConfig(pagerank_weight=2.0)


def test_the_dense_half_takes_each_chunks_best_cosine_over_the_queries(context) -> None:
    kag = KAGChunkRetriever(context, KAGChunkConfig(bm25_swap=False))
    # a second query vector (the solver's original question beside a sub-question):
    # c1, 0.5 to Q, lies along it and ranks first; the others keep their cosine to Q
    other = np.array(unit(0.5), dtype=np.float32)
    assert titles(kag.retrieve_seeded("q", 4, [], Q)) == ["D", "A", "C", "B"]
    both = kag.retrieve_seeded("q", 4, [], Q, also=[other])
    scores = {p.title: p.score for p in both.passages}
    assert scores["B"] == pytest.approx(1.0, abs=1e-5)  # c1 is `other` itself
    assert scores["D"] == pytest.approx(0.9, abs=1e-5)  # its cosine to Q is the best
    assert titles(both)[0] == "B"
