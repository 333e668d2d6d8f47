"""Synonym links between entities whose name vectors lie close together.

HippoRAG 2 (Gutiérrez et al., 2025, section 3; its ``synonymy_edge_sim_threshold``
0.8) joins every phrase node to its nearest phrase nodes by name embedding when their
cosine reaches 0.8, so "Antonio Vivaldi" and "Vivaldi" share their passages in the
walk; KAG's post-processor links each entity to its nearest same-class entity the same
way (:func:`~quillian.components.kag.alignment.link_similar`). Both are
:func:`nearest_pairs`; :func:`synonym_edges` gives the undirected edge list a walk uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["SYNONYM_THRESHOLD", "nearest_pairs", "synonym_edges"]

#: HippoRAG 2's synonymy threshold; with MiniLM, name variants score above it
#: ("Antonio Vivaldi" / "Vivaldi" 0.84, "USA" / "United States" 0.89) and distinct
#: names below ("Harvard University" / "Yale University" 0.74).
SYNONYM_THRESHOLD = 0.8

#: Rows of name vectors compared at once.
BLOCK = 1024

Pairs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]


def nearest_pairs(
    vectors: npt.ArrayLike,
    threshold: float = SYNONYM_THRESHOLD,
    k: int = 1,
    groups: Sequence[object] | None = None,
) -> Pairs:
    """Each row's ``k`` most similar other rows whose cosine is at least ``threshold``.

    ``vectors`` are unit rows; with ``groups`` (one label per row) a row is compared
    only with rows of its own group. Returns parallel arrays ``(row, neighbour,
    cosine)``, by row and then by falling cosine. A tie at the ``k``-th place is broken
    arbitrarily, except that with ``k`` 1 the lowest neighbour wins (``argmax``).
    """
    if k <= 0:
        raise ValueError(f"k must be greater than 0, got {k}")
    matrix = np.asarray(vectors, dtype=np.float32)
    labels = [0] * len(matrix) if groups is None else list(groups)
    if len(labels) != len(matrix):
        raise ValueError(f"{len(labels)} group labels for {len(matrix)} vectors")
    members: dict[object, list[int]] = {}
    for row, label in enumerate(labels):
        members.setdefault(label, []).append(row)
    found: list[Pairs] = []
    for rows in members.values():
        if len(rows) > 1:
            found.append(_within(matrix, np.asarray(rows, dtype=np.int64), threshold, k))
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    src, dst, sim = (np.concatenate(parts) for parts in zip(*found, strict=True))
    order = np.lexsort((dst, -sim, src))
    return src[order], dst[order], sim[order].astype(np.float32)


def _within(
    matrix: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], threshold: float, k: int
) -> Pairs:
    group = matrix[rows]
    take = min(k, len(rows) - 1)
    src, dst, sim = [], [], []
    for start in range(0, len(rows), BLOCK):
        sims = group[start : start + BLOCK] @ group.T
        block = np.arange(sims.shape[0])
        sims[block, start + block] = -np.inf
        best = _top(sims, take)
        values = np.take_along_axis(sims, best, axis=1)
        keep = values >= threshold
        src.append(rows[start + np.nonzero(keep)[0]])
        dst.append(rows[best[keep]])
        sim.append(values[keep])
    return np.concatenate(src), np.concatenate(dst), np.concatenate(sim).astype(np.float32)


def _top(sims: npt.NDArray[np.float32], take: int) -> npt.NDArray[np.int64]:
    """Columns of each row's ``take`` largest values, best first (the first maximum for
    one, as ``argmax`` picks it)."""
    if take == 1:
        return np.argmax(sims, axis=1)[:, None]
    part = np.argpartition(-sims, take - 1, axis=1)[:, :take]
    order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def synonym_edges(
    vectors: npt.ArrayLike, threshold: float = SYNONYM_THRESHOLD, k: int = 1
) -> Pairs:
    """Undirected synonym edges for a walk: every pair :func:`nearest_pairs` finds, in
    both directions, weighted by its cosine (a pair found from both ends once)."""
    src, dst, sim = nearest_pairs(vectors, threshold, k)
    a, b = np.minimum(src, dst), np.maximum(src, dst)
    n = max(len(np.asarray(vectors)), 1)
    _, first = np.unique(a * n + b, return_index=True)
    a, b, w = a[first], b[first], sim[first]
    return np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([w, w])
