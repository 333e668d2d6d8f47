"""KAG's chunk retriever on an index built with KAG's stage walks the typed graph when
asked (``kag-typed``, ``typed_graph=True``): with alignment a chunk reachable only
through a concept gets PageRank mass, without (``kag-mi``, or the solver's
``alignment=False``) it gets none; ``kag`` and an index without the stage rank exactly
as before the typed walk.

World: Vivaldi's page names Antonio Vivaldi, Bach's page Johann Sebastian Bach, both
``Person/composer``; with the chain ``composer -> musician`` they share the concept node
``composer``. Venice's page names Venice. Nothing else joins the pages.
"""

import numpy as np
import pytest

from quillian.components.factories import make_retriever
from quillian.components.graph.ppr import Walk, personalized_pagerank
from quillian.components.kag.graph import GRAPH_FILE
from quillian.components.kag.walk import typed_chunk_walk
from quillian.components.retrieval.base import best_k
from quillian.components.retrieval.kag import KAGChunkConfig, KAGChunkRetriever
from quillian.stores.snapshot import EdgeKind, NodeKind
from quillian.testing.kag import build_world, solver

CORPUS = {
    "Vivaldi": "Antonio Vivaldi wrote concertos.",
    "Bach": "Johann Sebastian Bach wrote fugues.",
    "Venice": "Venice is a city.",
}
WORLD: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str, str]]]] = {
    "Vivaldi": ([("Antonio Vivaldi", "Person/composer")], []),
    "Bach": ([("Johann Sebastian Bach", "Person/composer")], []),
    "Venice": ([("Venice", "GeographicLocation/city")], []),
}
CHAINS = {"composer": ["composer", "musician"], "city": ["city"]}


@pytest.fixture
def context(tmp_path):
    return build_world(tmp_path, CORPUS, WORLD, CHAINS)


def ppr_titles(retriever: KAGChunkRetriever, name: str) -> list[str]:
    seeds = retriever.seeds_for([(name, 1.0)])
    result = retriever.retrieve_seeded(name, 3, seeds)
    assert result.method == "kag:ppr"  # an exact seed: PageRank alone ranks
    return [p.title for p in result.passages]


def test_alignment_reaches_a_chunk_through_a_shared_concept(context) -> None:
    aligned = make_retriever(context, "kag-typed", bm25_swap=False)
    assert isinstance(aligned, KAGChunkRetriever)
    assert aligned.walk.graph == "kag-aligned"
    assert ppr_titles(aligned, "Antonio Vivaldi") == ["Vivaldi", "Bach"]


def test_without_alignment_the_concept_carries_nothing(context) -> None:
    for retriever in (
        make_retriever(context, "kag-mi", bm25_swap=False),
        make_retriever(context, "kag", bm25_swap=False, typed_graph=True, alignment=False),
    ):
        assert isinstance(retriever, KAGChunkRetriever)
        assert retriever.walk.graph == "kag"
        assert ppr_titles(retriever, "Antonio Vivaldi") == ["Vivaldi"]


def test_kag_walks_the_index_graph_unless_told(context) -> None:
    for retriever in (
        make_retriever(context, "kag"),
        make_retriever(context, "kag-typed", typed_graph=False),
    ):
        assert isinstance(retriever, KAGChunkRetriever)
        assert retriever.walk.graph == "index"


def test_the_solver_walks_the_same_graph_with_its_alignment(context) -> None:
    for preset in ("LFSH", "CR"):
        for alignment, graph in ((True, "kag-aligned"), (False, "kag")):
            pipeline, _ = solver(context, {}, preset=preset, alignment=alignment, typed_graph=True)
            assert pipeline.chunks.config.alignment is alignment
            assert pipeline.chunks.walk.graph == graph
        pipeline, _ = solver(context, {}, preset=preset)
        assert pipeline.chunks.walk.graph == "index"  # the default walk
    pipeline, _ = solver(context, {})
    for name in ("kag", "kag-typed"):
        given = make_retriever(context, name)
        kept = type(pipeline)(pipeline.runner, given, pipeline.config, schema=pipeline.schema)
        assert kept.chunks is given  # the engine's retriever, already right, is reused


def _before(retriever: KAGChunkRetriever, seeds, n: int) -> dict[int, float]:
    """The PageRank half as it was before the typed walk (the commit before it), in
    float32 and to the retriever's tolerance as it now runs."""
    kg = retriever.context.kg
    kinds = (EdgeKind.RELATED_TO, EdgeKind.DESCRIBES, EdgeKind.DESCRIBED_BY)
    walk = Walk.over(
        kg.snapshot, kinds, fold=(NodeKind.DESCRIPTION,), dtype=np.float32, reorder=True
    )
    reset = np.zeros(kg.snapshot.n_nodes, dtype=np.float64)
    for seed in seeds:
        reset[seed.entity] += max(seed.score, 1e-6)
    rank = personalized_pagerank(
        walk, reset, retriever.config.damping, tol=retriever.config.tolerance
    )
    chunk_scores = rank[kg.chunk_offset :]
    top = best_k(chunk_scores, n)
    return {int(c): float(chunk_scores[c]) for c in top if chunk_scores[c] > 0}


def test_an_index_without_the_kag_stage_ranks_as_before(tmp_path) -> None:
    context = build_world(tmp_path, CORPUS, WORLD)
    assert context.directory is not None
    (context.directory / GRAPH_FILE).unlink()  # as if built without the stage
    assert typed_chunk_walk(context, True) is None
    retriever = make_retriever(context, "kag", bm25_swap=False)
    assert isinstance(retriever, KAGChunkRetriever)
    assert retriever.walk.graph == "index"
    for name, score in (("Antonio Vivaldi", 1.0), ("Venice", 0.5)):
        seeds = retriever.seeds_for([(name, score)])
        assert retriever._pagerank(seeds, 50) == _before(retriever, seeds, 50)
        plain = KAGChunkRetriever(context, KAGChunkConfig(bm25_swap=False))
        q = context.embed_query(name)
        ours, theirs = retriever.retrieve(name, 3, q), plain.retrieve(name, 3, q)
        assert [(p.chunk, p.score) for p in ours.passages] == [
            (p.chunk, p.score) for p in theirs.passages
        ]
