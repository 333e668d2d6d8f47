"""How far a triple sits from what the KG says about its head (Know3-RAG eq. 2).

For a linked triple ``(h, r, t)`` the relative score is

    S(h, r, t) = | f(h, r, t) - mean_{(h, r', t') in KG} f(h, r', t') |

with ``f`` the ComplEx score and the mean over every KG triple whose head is ``h``
(the triple itself included when the KG holds it; spec section 3). Lower means more
consistent with the KG. The mean is computed once per head and cached; a head with no
KG triple has no reference, so its triples cannot be scored (None).

A text's score aggregates its triples' scores by ``mean`` (the authors' code) or
``sum`` (the paper's eq. 1). A text with no scorable triple has none: an answer then
counts as unreliable, and a reference ranks after every scored one, with
:data:`MAX_SCORE` minus its number of linked entities, as in the authors' code.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.triples import TripleSet
from quillian.errors import ConfigError, ModelLoadError

__all__ = ["AGGREGATIONS", "MAX_SCORE", "Aggregation", "TripleConfidence", "aggregate"]

#: The score of a text none of whose triples could be scored (the authors' code).
MAX_SCORE = 10000.0

Aggregation = Literal["mean", "sum"]
AGGREGATIONS: tuple[Aggregation, ...] = ("mean", "sum")

#: Reference triples of one head scored per batch (bounds memory for hub entities).
_BATCH = 1 << 16


def aggregate(scores: Sequence[float], how: Aggregation = "mean") -> float | None:
    """A text's score from its triples' relative scores; None when there is none."""
    if how not in AGGREGATIONS:
        raise ConfigError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {how!r}")
    if not scores:
        return None
    total = float(sum(scores))
    return total / len(scores) if how == "mean" else total


class TripleConfidence:
    """Relative triple scores from a ComplEx model and the triples it was trained on.

    ``triples`` must be the graph the model was trained on (same numbering); the
    per-head reference means are computed on first use and cached (thread-safe)."""

    def __init__(self, model: ComplEx, triples: TripleSet) -> None:
        if model.n_entities != triples.n_entities or model.n_relations != triples.n_relations:
            raise ModelLoadError(
                f"the KG-embedding model has {model.n_entities} entities and "
                f"{model.n_relations} relations, the graph {triples.n_entities} and "
                f"{triples.n_relations}: it was trained on another graph; train it again "
                "(quillian kg train-kge)"
            )
        self.model = model
        self.triples = triples
        self._means: dict[int, float | None] = {}
        self._lock = threading.Lock()

    @cached_property
    def _by_head(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(indptr, order)``: head ``h``'s triples are ``order[indptr[h]:indptr[h+1]]``."""
        heads = np.asarray(self.triples.heads, dtype=np.int64)
        order = np.argsort(heads, kind="stable").astype(np.int64)
        indptr = np.zeros(self.triples.n_entities + 1, dtype=np.int64)
        np.cumsum(np.bincount(heads, minlength=self.triples.n_entities), out=indptr[1:])
        return indptr, order

    def out_edges(self, head: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """``(relations, tails)`` of the KG triples whose head is ``head``."""
        indptr, order = self._by_head
        rows = order[indptr[head] : indptr[head + 1]]
        relations = np.asarray(self.triples.relations, dtype=np.int32)[rows]
        tails = np.asarray(self.triples.tails, dtype=np.int32)[rows]
        return relations, tails

    def reference_mean(self, head: int) -> float | None:
        """The mean ComplEx score of ``head``'s KG triples; None when it has none."""
        head = int(head)
        with self._lock:
            if head in self._means:
                return self._means[head]
        relations, tails = self.out_edges(head)
        mean: float | None = None
        if len(relations):
            total = 0.0
            for start in range(0, len(relations), _BATCH):
                r = relations[start : start + _BATCH]
                t = tails[start : start + _BATCH]
                total += float(self.model.score_spo_batch(np.full(len(r), head), r, t).sum())
            mean = total / len(relations)
        with self._lock:
            self._means[head] = mean
        return mean

    def relative(self, head: int, relation: int, tail: int) -> float | None:
        """S(head, relation, tail) (eq. 2); None when ``head`` has no KG triple."""
        mean = self.reference_mean(head)
        if mean is None:
            return None
        return abs(self.model.score_spo(head, relation, tail) - mean)

    def top_tails(
        self, head: int, relation: int, k: int, among: npt.ArrayLike | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best tails of ``(head, relation, ?)`` by ComplEx score, best first:
        among ``among`` when given (the KG's own tails: only those are scored), else over
        every entity except ``head`` itself (:meth:`ComplEx.top_tails`)."""
        if among is None:
            return self.model.top_tails(head, relation, k)
        candidates = np.unique(np.asarray(among, dtype=np.int64))
        if not len(candidates) or k <= 0:
            return []
        values = self.model.score_spo_batch(
            np.full(len(candidates), head), np.full(len(candidates), relation), candidates
        )
        best = np.argsort(-values, kind="stable")[:k]
        return [(int(candidates[i]), float(values[i])) for i in best]
