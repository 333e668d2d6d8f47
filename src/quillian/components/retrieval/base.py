"""Retrieval results, their traces, and the retriever protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = [
    "ActivatedEntity",
    "RetrievalResult",
    "RetrievalTrace",
    "Retriever",
    "ScoredPassage",
    "Seed",
    "UsedRelation",
    "best_k",
    "check_k",
    "top_k_passages",
]


@dataclass(frozen=True, slots=True)
class ScoredPassage:
    """One retrieved chunk: its position in the index's chunk table and its score."""

    chunk: int
    chunk_id: str
    score: float
    title: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Seed:
    """An initially activated entity and why: ``"description"`` or ``"lexical"`` match,
    or a ``"mention"`` a model found, or ``"bound"`` by a solver step."""

    entity: int
    name: str
    score: float
    source: str


@dataclass(frozen=True, slots=True)
class ActivatedEntity:
    entity: int
    name: str
    activation: float
    hop: int


@dataclass(frozen=True, slots=True)
class UsedRelation:
    """A relation between activated entities that passed the relation threshold."""

    relation: int
    subject: str
    predicate: str
    object: str
    description: str
    weight: float
    sentence: str = ""
    hop: int = 0
    """The hop at which a traversal reached the relation (0: matched directly)."""


@dataclass(frozen=True)
class ActivationPath:
    """How spreading activation reached an entity of a returned passage: the relations
    from a seed to ``entity``, seed first (see :mod:`quillian.components.graph.paths`).
    ``passage`` is the title of the returned passage ``entity`` is about, if any, and
    ``chunk_id`` that passage's chunk id."""

    entity: str
    relations: tuple[UsedRelation, ...]
    passage: str = ""
    chunk_id: str = ""


@dataclass(frozen=True)
class RetrievalTrace:
    """What led to the passages: seeds, activations, relations, and timing parts."""

    seeds: list[Seed] = field(default_factory=list)
    activated: list[ActivatedEntity] = field(default_factory=list)
    relations: list[UsedRelation] = field(default_factory=list)
    paths: list[ActivationPath] = field(default_factory=list)
    """Why each returned passage came up (SA's fused ranking); not part of the context."""
    subgraph_nodes: int = 0
    subgraph_edges: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalResult:
    method: str
    query: str
    passages: list[ScoredPassage]
    trace: RetrievalTrace = field(default_factory=RetrievalTrace)


@runtime_checkable
class Retriever(Protocol):
    """Ranks chunks for a query. ``query_vector`` may be passed when already embedded."""

    name: str

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult: ...


def check_k(k: int) -> None:
    """Reject a non-positive number of passages to retrieve."""
    if k <= 0:
        raise ValueError(f"k must be greater than 0, got {k}")


def best_k(scores: npt.NDArray[np.floating[Any]], k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` highest scores, best first, ties by index: what
    ``np.argsort(-scores, kind="stable")[:k]`` gives, without sorting every score (a
    partition finds the ``k``-th score, and only the scores at or above it are
    sorted)."""
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    candidates = np.flatnonzero(scores >= kth)
    return candidates[np.argsort(-scores[candidates], kind="stable")[:k]]


def top_k_passages(
    scores: Mapping[int, float],
    k: int,
    fallback: Sequence[int] = (),
) -> list[tuple[int, float]]:
    """Exactly ``min(k, available)`` chunks: best scores first, then ``fallback`` order.

    Ties break by chunk index so results are deterministic. Fallback chunks (e.g. the
    dense ranking) fill the list when the scored set is smaller than ``k``; they get a
    score just below the lowest scored chunk so the list stays sorted.
    """
    check_k(k)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
    chosen = {c for c, _ in ranked}
    floor = ranked[-1][1] if ranked else 0.0
    for chunk in fallback:
        if len(ranked) >= k:
            break
        if chunk not in chosen:
            chosen.add(chunk)
            floor = min(floor, 0.0) - 1e-6
            ranked.append((chunk, floor))
    return ranked
