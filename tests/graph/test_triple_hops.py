"""KAGS h-hop traversal on hand-made graphs with known hop sets."""

from __future__ import annotations

import numpy as np
import pytest

from quillian.components.graph.triple_hops import TripleGraph, hop_traversal
from quillian.errors import ConfigError

# Rows:  0 A->B   1 C->A   2 B->D   3 E->D   4 D->F   5 X->Y (a separate component)
GRAPH = TripleGraph.from_ends(
    [("A", "B"), ("C", "A"), ("B", "D"), ("E", "D"), ("D", "F"), ("X", "Y")]
)


def node(name: str) -> int:
    return GRAPH.names.index(name)


def named(ids: dict[int, int]) -> dict[str, int]:
    return {GRAPH.names[n]: h for n, h in ids.items()}


def test_the_graph_merges_spellings_and_keeps_the_row_on_each_edge() -> None:
    graph = TripleGraph.from_ends([("The Beatles", "Liverpool"), ("the beatles", "EMI")])
    assert graph.names == ("The Beatles", "Liverpool", "EMI")
    assert graph.out_edges(0).tolist() == [0, 1]
    assert graph.in_edges(1).tolist() == [0]


def test_two_hops_follow_both_directions_and_record_hop_numbers() -> None:
    result = hop_traversal(GRAPH, [node("A")], hops=2)
    assert named(result.node_hops) == {"A": 0, "B": 1, "C": 1, "D": 2}
    # hop 1 explores A: out-edge 0 (A->B), in-edge 1 (C->A)
    # hop 2 explores B then C: B's out-edge 2 (B->D) and in-edge 0 again; C's out-edge 1
    assert [(e.row, e.hop, e.direction) for e in result.edges] == [
        (0, 1, "outgoing"),
        (1, 1, "incoming"),
        (2, 2, "outgoing"),
        (0, 2, "incoming"),
        (1, 2, "outgoing"),
    ]
    assert [[GRAPH.names[n] for n in hop] for hop in result.explored] == [["A"], ["B", "C"]]


def test_three_hops_reach_in_edges_of_later_nodes() -> None:
    result = hop_traversal(GRAPH, [node("A")], hops=3)
    assert named(result.node_hops) == {"A": 0, "B": 1, "C": 1, "D": 2, "E": 3, "F": 3}
    assert {e.row for e in result.edges if e.hop == 3} == {2, 3, 4}
    assert 5 not in {e.row for e in result.edges}  # the other component is never reached


def test_zero_hops_and_an_empty_frontier_stop_early() -> None:
    assert hop_traversal(GRAPH, [node("A")], hops=0).edges == []
    result = hop_traversal(GRAPH, [node("X")], hops=5)
    assert named(result.node_hops) == {"X": 0, "Y": 1}
    assert len(result.explored) == 2  # X, then Y; then nothing new to explore


def test_the_per_hop_cap_explores_only_the_best_ranked_nodes() -> None:
    # a star: hub H -> N0..N14, each Ni -> Mi
    ends = [("H", f"N{i}") for i in range(15)] + [(f"N{i}", f"M{i}") for i in range(15)]
    graph = TripleGraph.from_ends(ends)
    scores = np.array([i / 100 for i in range(15)] + [0.0] * 15, dtype=np.float32)

    def score(rows: np.ndarray) -> np.ndarray:
        return scores[rows]

    result = hop_traversal(graph, [0], hops=2, max_nodes_per_hop=10, edge_score=score)
    explored = [[graph.names[n] for n in hop] for hop in result.explored]
    assert explored[0] == ["H"]
    assert explored[1] == [f"N{i}" for i in range(14, 4, -1)]  # the 10 best, best first
    reached = {graph.names[n] for n, h in result.node_hops.items() if h == 2}
    assert reached == {f"M{i}" for i in range(5, 15)}
    # without scores: the first ten in discovery order
    plain = hop_traversal(graph, [0], hops=2, max_nodes_per_hop=10)
    assert [graph.names[n] for n in plain.explored[1]] == [f"N{i}" for i in range(10)]


def test_the_edge_cap_keeps_a_hubs_best_edges() -> None:
    ends = [("H", f"N{i}") for i in range(6)]
    graph = TripleGraph.from_ends(ends)
    scores = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7], dtype=np.float32)
    result = hop_traversal(
        graph, [0], hops=1, edge_score=lambda rows: scores[rows], max_edges_per_node=3
    )
    assert [e.row for e in result.edges] == [1, 3, 5]  # the best three, in row order


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError):
        hop_traversal(GRAPH, [0], hops=-1)
    with pytest.raises(ConfigError):
        hop_traversal(GRAPH, [0], hops=1, max_nodes_per_hop=0)
