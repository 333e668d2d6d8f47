"""Filtered link-prediction metrics: MRR and Hits@k, tail and head prediction.

Each test triple ``(h, r, t)`` asks two questions: ``(h, r, ?)`` answered by ``t`` and
``(?, r, t)`` answered by ``h`` (scored as ``(t, r^-1, ?)`` through the reciprocal
relation). The answer's filtered rank counts the entities scored above it among those
that are not known answers of the same question (Bordes et al. 2013's "filtered"
setting: the other true triples of train, valid and test are not mistakes). Ties count
half (the expected rank when ties are broken at random), so a model that scores every
entity alike ranks an answer in the middle, not first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.triples import TripleSet
from quillian.errors import InputError

__all__ = [
    "HITS_AT",
    "SCORES_PER_BATCH",
    "KnownAnswers",
    "evaluate",
    "filtered_ranks",
    "ranking_metrics",
]

Longs = npt.NDArray[np.int64]

HITS_AT = (1, 3, 10)


class KnownAnswers:
    """For each question ``(entity, relation or its inverse)``, the entities known to
    answer it, in CSR form (sorted question keys, offsets, answers)."""

    def __init__(self, parts: Sequence[TripleSet]) -> None:
        if not parts:
            raise InputError("no triples to filter with")
        self.n_entities = parts[0].n_entities
        self.n_relations = parts[0].n_relations
        if any((p.n_entities, p.n_relations) != (self.n_entities, self.n_relations) for p in parts):
            raise InputError("the triple sets to filter with have different vocabularies")
        heads = np.concatenate([p.heads for p in parts]).astype(np.int64)
        rels = np.concatenate([p.relations for p in parts]).astype(np.int64)
        tails = np.concatenate([p.tails for p in parts]).astype(np.int64)
        keys = np.concatenate([self.key(heads, rels), self.key(tails, rels + self.n_relations)])
        answers = np.concatenate([tails, heads])
        pairs = np.unique(np.stack([keys, answers], axis=1), axis=0)
        self._keys, starts = np.unique(pairs[:, 0], return_index=True)
        self._indptr = np.append(starts, len(pairs)).astype(np.int64)
        self._answers = pairs[:, 1].astype(np.int32)

    @classmethod
    def for_questions(cls, graph: TripleSet, questions: TripleSet) -> KnownAnswers:
        """The known answers that filtered ranking of ``questions`` reads: only the
        triples of ``graph`` that share a head and relation, or a tail and relation,
        with one of them (a whole 21M-triple graph would cost gigabytes to index)."""
        n_rel = graph.n_relations
        tail_q = questions.heads.astype(np.int64) * n_rel + questions.relations
        head_q = questions.tails.astype(np.int64) * n_rel + questions.relations
        rels = graph.relations.astype(np.int64)
        needed = np.isin(graph.heads.astype(np.int64) * n_rel + rels, tail_q) | np.isin(
            graph.tails.astype(np.int64) * n_rel + rels, head_q
        )
        return cls([graph.subset(np.flatnonzero(needed)), questions])

    def key(self, entities: Longs, rows: Longs) -> Longs:
        """The question key of ``(entity, relation row)``; rows ``r + n_relations`` are
        inverses."""
        return entities.astype(np.int64) * (2 * self.n_relations) + rows

    def answers(self, entity: int, row: int) -> list[int]:
        """The known answers of ``(entity, relation row)``, ascending."""
        _, cols = self.mask(self.key(np.array([entity]), np.array([row])))
        return [int(c) for c in cols]

    def mask(self, keys: Longs) -> tuple[Longs, Longs]:
        """``(rows, cols)``: for question ``keys[i]``, one ``(i, answer)`` per known answer."""
        where = np.searchsorted(self._keys, keys)
        found = where < len(self._keys)
        found[found] = self._keys[where[found]] == keys[found]
        starts = np.where(found, self._indptr[np.minimum(where, len(self._keys) - 1)], 0)
        ends = np.where(found, self._indptr[np.minimum(where, len(self._keys) - 1) + 1], 0)
        counts = ends - starts
        total = int(counts.sum())
        first = np.repeat(np.cumsum(counts) - counts, counts)
        positions = np.repeat(starts, counts) + (np.arange(total) - first)
        rows = np.repeat(np.arange(len(keys)), counts)
        return rows, self._answers[positions].astype(np.int64)


#: Scores one batch of :func:`filtered_ranks` may hold (128 MB of float32).
SCORES_PER_BATCH = 1 << 25


def filtered_ranks(
    model: ComplEx, triples: TripleSet, known: KnownAnswers, batch_size: int = 256
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``(tail_ranks, head_ranks)``: the filtered rank of each triple's tail among the
    answers of ``(h, r, ?)`` and of its head among those of ``(?, r, t)``. A batch
    holds at most :data:`SCORES_PER_BATCH` scores (on 4.3M entities, 7 questions)."""
    batch_size = max(1, min(batch_size, SCORES_PER_BATCH // max(triples.n_entities, 1)))
    heads = triples.heads.astype(np.int64)
    rels = triples.relations.astype(np.int64)
    tails = triples.tails.astype(np.int64)
    tail_ranks = np.empty(len(triples), np.float64)
    head_ranks = np.empty(len(triples), np.float64)
    for start in range(0, len(triples), batch_size):
        part = slice(start, start + batch_size)
        h, r, t = heads[part], rels[part], tails[part]
        scores = model.score_sp_batch(h, r)
        tail_ranks[part] = _ranks(scores, t, known.mask(known.key(h, r)))
        scores = model.score_po_batch(r, t)
        head_ranks[part] = _ranks(scores, h, known.mask(known.key(t, r + known.n_relations)))
    return tail_ranks, head_ranks


def _ranks(
    scores: npt.NDArray[np.float32],
    targets: npt.NDArray[np.int64],
    known: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
) -> npt.NDArray[np.float64]:
    rows = np.arange(len(targets))
    target = scores[rows, targets].copy()
    scores[known] = -np.inf
    scores[rows, targets] = -np.inf  # the answer itself, known or not
    column = target[:, None]
    above = (scores > column).sum(axis=1)
    ties = (scores == column).sum(axis=1)
    ranks: npt.NDArray[np.float64] = 1.0 + above + ties / 2.0
    ranks[np.isnan(target)] = scores.shape[1]  # a diverged model ranks last, not first
    return ranks


def ranking_metrics(ranks: npt.ArrayLike) -> dict[str, float]:
    """``mrr`` and ``hits@k`` (k in :data:`HITS_AT`) of filtered ranks."""
    values = np.asarray(ranks, dtype=np.float64).ravel()
    if not len(values):
        raise InputError("no ranks to summarise")
    metrics = {"mrr": float(np.mean(1.0 / values))}
    for k in HITS_AT:
        metrics[f"hits@{k}"] = float(np.mean(values <= k))
    return metrics


def evaluate(
    model: ComplEx, triples: TripleSet, known: KnownAnswers, batch_size: int = 256
) -> dict[str, float]:
    """Filtered MRR and Hits@k over both directions (tail and head prediction), with each
    direction's MRR as ``tail_mrr`` and ``head_mrr``."""
    tail_ranks, head_ranks = filtered_ranks(model, triples, known, batch_size)
    metrics = ranking_metrics(np.concatenate([tail_ranks, head_ranks]))
    metrics["tail_mrr"] = ranking_metrics(tail_ranks)["mrr"]
    metrics["head_mrr"] = ranking_metrics(head_ranks)["mrr"]
    return metrics
