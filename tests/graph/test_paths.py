"""Best activation paths on a five-node graph worked out by hand.

Seed 0 (hop 0). Arcs, with the activation each node ends with:

    0 -> 1  w 0.5      a = [1.0, 0.5, 0.9, 0.45, 0.0]
    0 -> 2  w 0.9      node 3 hears from 1 (0.5 * 0.5 = 0.25) and from 2 (0.9 * 0.5 = 0.45):
    1 -> 3  w 0.5      its best path is 0 -> 2 -> 3
    2 -> 3  w 0.5      node 4 hears only an inhibiting arc: no path
    2 -> 4  w -0.3     arc 3 -> 1 goes back a hop and never counts
    3 -> 1  w 0.9
"""

from quillian.components.graph.paths import best_paths

INDPTR = [0, 2, 3, 5, 6, 6]
INDICES = [1, 2, 3, 3, 4, 1]
WEIGHTS = [0.5, 0.9, 0.5, 0.5, -0.3, 0.9]
HOPS = [0, 1, 1, 2, 2]
ACTIVATION = [1.0, 0.5, 0.9, 0.45, 0.0]


def test_best_paths_follow_the_arc_that_delivered_most():
    paths = best_paths(INDPTR, INDICES, WEIGHTS, HOPS, ACTIVATION, [3, 1, 0, 4])
    assert paths == [[1, 3], [0], [], []]  # arcs 0->2, 2->3; 0->1; a seed; unreached
