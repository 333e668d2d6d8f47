"""The walk KAG's chunk retriever takes over a typed graph (components/kag/walk.py),
on a graph written by hand.

Chunks c0..c3. A (Person) is in c0, S in c1, K in c2, D in c3. With alignment, S is a
``synonym`` of A, and A and K ``belongTo`` the concept ``composer``, which ``isA`` the
class concept ``Person``. A relation joins nothing: c1 and c2 are reachable from A only
through the alignment, and c3 not at all.
"""

import numpy as np
import pytest

from quillian.components.graph.builder import MENTION_WEIGHT, TOPIC_WEIGHT
from quillian.components.graph.ppr import personalized_pagerank
from quillian.components.kag.graph import SOURCE, KagEdge, KagNode, TypedGraph
from quillian.components.kag.schema import CHUNK, CONCEPT
from quillian.components.kag.walk import chunk_walk, walk_edges
from quillian.components.retrieval.base import Seed

CHUNKS = ["c0", "c1", "c2", "c3"]
# node positions
C0, C1, C2, C3, A, S, K, D, COMPOSER, PERSON = range(10)


def graph() -> TypedGraph:
    nodes = [
        *(KagNode(c, CHUNK) for c in CHUNKS),
        KagNode("A", "Person", semantic_type="composer"),
        KagNode("S", "Person"),
        KagNode("K", "Person", semantic_type="composer"),
        KagNode("D", "Person"),
        KagNode("composer", CONCEPT),
        KagNode("Person", CONCEPT),
    ]
    edges = [
        KagEdge(A, SOURCE, C0, "c0"),
        KagEdge(S, SOURCE, C1, "c1"),
        KagEdge(K, SOURCE, C2, "c2"),
        KagEdge(D, SOURCE, C3, "c3"),
        KagEdge(A, "synonym", S),
        KagEdge(A, "belongTo", COMPOSER),
        KagEdge(K, "belongTo", COMPOSER),
        KagEdge(COMPOSER, "isA", PERSON),
    ]
    return TypedGraph(nodes, edges)


def edge_weights(subjects, objects, weights) -> dict[tuple[int, int], float]:
    ends = zip(subjects.tolist(), objects.tolist(), strict=True)
    return dict(zip(ends, weights.tolist(), strict=True))


def chunk_mass(alignment: bool, seed_names=("A",)) -> np.ndarray:
    # the index's entities, in the index's order: A, S, K, D
    walk = chunk_walk(graph(), CHUNKS, [["A"], ["S"], ["K"], ["D"]], alignment=alignment)
    seeds = [Seed(["A", "S", "K", "D"].index(n), n, 1.0, "test") for n in seed_names]
    rank = personalized_pagerank(walk.walk, walk.reset(seeds), 0.5)
    out = np.zeros(len(CHUNKS))
    out[walk.chunk_rows] = rank[walk.chunk_nodes]
    return out


def test_alignment_links_carry_mass_to_chunks_reachable_only_through_them() -> None:
    mass = chunk_mass(alignment=True)
    assert mass[0] > 0
    assert mass[1] > 0  # through the synonym A - S
    assert mass[2] > 0  # through the concept A - composer - K
    assert mass[3] == 0
    # the synonym (weight 1) carries more than the concept's half edge
    assert mass[1] > mass[2]


def test_without_alignment_only_the_mutual_index_and_relations_are_walked() -> None:
    mass = chunk_mass(alignment=False)
    assert mass[0] > 0
    assert mass[1] == mass[2] == mass[3] == 0


def test_concept_edges_are_divided_by_the_concept_degree() -> None:
    subjects, objects, weights = walk_edges(graph(), alignment=True)
    by_edge = edge_weights(subjects, objects, weights)
    assert by_edge[(A, C0)] == 1.0
    assert by_edge[(A, S)] == 1.0
    # composer has three edges (A, K, Person): each a third; Person has one
    assert by_edge[(A, COMPOSER)] == pytest.approx(1 / 3)
    assert by_edge[(K, COMPOSER)] == pytest.approx(1 / 3)
    assert by_edge[(COMPOSER, PERSON)] == pytest.approx(1 / 3)
    subjects, _, _ = walk_edges(graph(), alignment=False)
    assert len(subjects) == 4  # the four source edges


def test_a_hub_concept_hands_each_member_less() -> None:
    base = graph()
    # ten more composers, each in no chunk: composer now has 13 edges
    extra = [KagNode(f"X{i}", "Person") for i in range(10)]
    nodes = [*base.nodes, *extra]
    edges = [
        *base.edges,
        *(KagEdge(len(base.nodes) + i, "belongTo", COMPOSER) for i in range(10)),
    ]
    hub = TypedGraph(nodes, edges)
    names = [["A"], ["S"], ["K"], ["D"]]
    seeds = [Seed(0, "A", 1.0, "test")]
    masses = []
    for g in (base, hub):
        walk = chunk_walk(g, CHUNKS, names, alignment=True)
        rank = personalized_pagerank(walk.walk, walk.reset(seeds), 0.5)
        masses.append(rank[walk.chunk_nodes][list(walk.chunk_rows).index(2)])
    assert 0 < masses[1] < masses[0] / 3


def test_source_edges_weigh_the_chunks_own_entity_more() -> None:
    topics = {"c0": frozenset({"a"})}
    subjects, objects, weights = walk_edges(graph(), alignment=False, topics=topics)
    by_edge = edge_weights(subjects, objects, weights)
    assert by_edge[(A, C0)] == TOPIC_WEIGHT
    assert by_edge[(S, C1)] == MENTION_WEIGHT


def test_an_entity_of_two_classes_splits_its_seed_mass() -> None:
    base = graph()
    nodes = [*base.nodes, KagNode("A", "GeographicLocation")]
    g = TypedGraph(nodes, base.edges)
    walk = chunk_walk(g, CHUNKS, [["A"], ["S"], ["K"], ["D"]], alignment=True)
    reset = walk.reset([Seed(0, "A", 1.0, "test")])
    assert reset[A] == reset[len(base.nodes)] == 0.5
    assert walk.reset([Seed(3, "D", 0.0, "test")])[D] == 1e-6


def test_one_name_in_two_classes_is_joined_with_alignment_only() -> None:
    # D typed Others in c2 as well as Person in c3: the bridge from K's chunk to D's page
    base = graph()
    d_other = len(base.nodes)
    nodes = [*base.nodes, KagNode("d", "Others")]  # the same name by its normalised key
    edges = [*base.edges, KagEdge(d_other, SOURCE, C2, "c2")]
    g = TypedGraph(nodes, edges)
    aligned = edge_weights(*walk_edges(g, alignment=True))
    assert aligned[(D, d_other)] == 1.0
    assert (D, d_other) not in edge_weights(*walk_edges(g, alignment=False))
    for alignment, reached in ((True, True), (False, False)):
        walk = chunk_walk(g, CHUNKS, [["A"], ["S"], ["K"], ["D"]], alignment=alignment)
        rank = personalized_pagerank(walk.walk, walk.reset([Seed(2, "K", 1.0, "test")]), 0.5)
        mass = np.zeros(len(CHUNKS))
        mass[walk.chunk_rows] = rank[walk.chunk_nodes]
        assert bool(mass[3] > 0) is reached  # c3, D's page, only through the same-name link
