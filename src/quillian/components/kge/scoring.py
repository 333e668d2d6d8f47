"""ComplEx scoring with numpy (Trouillon et al. 2016), over trained or memory-mapped arrays.

Each embedding holds ``dim`` reals: the real parts of its ``dim/2`` complex coordinates,
then the imaginary parts. The score of a triple is

    f(h, r, t) = Re(<h, r, conj(t)>)
               = sum_k h_re r_re t_re + h_im r_re t_im + h_re r_im t_im - h_im r_im t_re

Writing q = h * r (complex product per coordinate: q_re = h_re r_re - h_im r_im,
q_im = h_re r_im + h_im r_re), f = q_re . t_re + q_im . t_im: the dot product of the
query ``[q_re | q_im]`` with the tail's row, so scoring every tail is one product with
the entity matrix.

Relations are reciprocal (Lacroix et al. 2018): the relation table holds ``2 R`` rows,
``r`` and then its inverse ``r + R``; heads of ``(?, r, t)`` are ranked as the tails
of ``(t, r + R, ?)`` (:meth:`ComplEx.score_po`). Nothing here computes gradients.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import numpy.typing as npt

from quillian.components.kge.quantized import Int8Rows
from quillian.components.kge.scan import scan_rows
from quillian.errors import InputError

__all__ = ["ComplEx", "complex_query", "shortlist"]

Floats = npt.NDArray[np.float32]

logger = logging.getLogger(__name__)


def complex_query(heads: Floats, relations: Floats) -> Floats:
    """Rows ``[q_re | q_im]`` of the complex products ``h * r`` of paired rows."""
    half = heads.shape[-1] // 2
    h_re, h_im = heads[..., :half], heads[..., half:]
    r_re, r_im = relations[..., :half], relations[..., half:]
    return np.concatenate([h_re * r_re - h_im * r_im, h_re * r_im + h_im * r_re], axis=-1)


class ComplEx:
    """A trained ComplEx model: entity rows ``(n_entities, dim)`` and relation rows
    ``(2 n_relations, dim)`` (each relation, then its reciprocal), float32.

    Ids are the graph's numbers; relation ids run ``0..n_relations-1`` (the reciprocal
    rows are reached through :meth:`score_po`). Inputs are ints or int arrays, outputs
    numpy arrays (float32).
    """

    #: From this many entities on, :meth:`top_tails` scans int8 rows (the float32 scan
    #: is memory-bound there: 2.2 GB per query over Wikidata5M at dim 128).
    INT8_SCAN_FROM = 1_000_000
    #: Candidates of the int8 scan rescored in float32 (at least 4 k).
    SHORTLIST = 64
    #: From this many entities on, scoring every tail of up to :attr:`SCAN_QUERIES`
    #: queries runs :func:`~quillian.components.kge.scan.scan_rows` (each row read once,
    #: one block per core) instead of BLAS; more queries reuse what they read, where
    #: BLAS's blocked product is the faster.
    SCAN_FROM = 1 << 16
    SCAN_QUERIES = 16

    def __init__(
        self,
        entities: npt.ArrayLike,
        relations: npt.ArrayLike,
        *,
        int8_scan_from: int | None = None,
        int8: Int8Rows | None = None,
        scan_from: int | None = None,
    ) -> None:
        self.int8_scan_from = self.INT8_SCAN_FROM if int8_scan_from is None else int8_scan_from
        self.scan_from = self.SCAN_FROM if scan_from is None else scan_from
        self._int8: Int8Rows | None = int8
        self._int8_lock = threading.Lock()
        self.entities: Floats = np.asanyarray(entities, dtype=np.float32)
        self.relations: Floats = np.asanyarray(relations, dtype=np.float32)
        if self.entities.ndim != 2 or self.relations.ndim != 2:
            raise InputError("entity and relation embeddings must be 2-d arrays")
        if self.entities.shape[1] != self.relations.shape[1] or self.entities.shape[1] % 2:
            raise InputError(
                f"embedding widths differ or are odd: entities {self.entities.shape}, "
                f"relations {self.relations.shape}"
            )
        if len(self.relations) % 2:
            raise InputError(
                f"{len(self.relations)} relation rows: expected each relation and its inverse"
            )
        if int8 is not None and (len(int8.values) != self.n_entities or int8.width < self.dim):
            raise InputError(
                f"int8 rows {int8.values.shape} do not fit {self.n_entities} entities of "
                f"width {self.dim}"
            )

    @property
    def dim(self) -> int:
        return int(self.entities.shape[1])

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def n_relations(self) -> int:
        """Relations of the graph (the table holds twice as many rows)."""
        return len(self.relations) // 2

    def __repr__(self) -> str:
        return f"ComplEx(entities={self.n_entities}, relations={self.n_relations}, dim={self.dim})"

    def score_spo(self, head: int, relation: int, tail: int) -> float:
        """f(head, relation, tail)."""
        return float(self.score_spo_batch([head], [relation], [tail])[0])

    def score_sp(self, head: int, relation: int) -> Floats:
        """f(head, relation, t) for every entity t: shape ``(n_entities,)``."""
        return self.score_sp_batch([head], [relation])[0]

    def score_po(self, relation: int, tail: int) -> Floats:
        """Scores of every entity as the head of ``(?, relation, tail)``, through the
        reciprocal relation: f(tail, relation^-1, h) for every h."""
        return self.score_po_batch([relation], [tail])[0]

    def score_spo_batch(
        self, heads: npt.ArrayLike, relations: npt.ArrayLike, tails: npt.ArrayLike
    ) -> Floats:
        """f(h_i, r_i, t_i) for paired arrays: shape ``(n,)``."""
        h, r, t = self._ids(heads, "heads"), self._rels(relations), self._ids(tails, "tails")
        if not len(h) == len(r) == len(t):
            raise InputError("heads, relations and tails differ in length")
        query = complex_query(self.entities[h], self.relations[r])
        return np.einsum("ij,ij->i", query, self.entities[t]).astype(np.float32, copy=False)

    def score_sp_batch(self, heads: npt.ArrayLike, relations: npt.ArrayLike) -> Floats:
        """f(h_i, r_i, t) for every entity t: shape ``(n, n_entities)``."""
        return self._score_all(self._ids(heads, "heads"), self._rels(relations))

    def score_po_batch(self, relations: npt.ArrayLike, tails: npt.ArrayLike) -> Floats:
        """Every entity scored as the head of each ``(?, r_i, t_i)``: ``(n, n_entities)``."""
        inverse = self._rels(relations) + self.n_relations
        return self._score_all(self._ids(tails, "tails"), inverse)

    def top_tails(self, head: int, relation: int, k: int) -> list[tuple[int, float]]:
        """The ``k`` best tails of ``(head, relation, ?)`` over every entity but ``head``,
        best first, with their exact scores. On a graph of :attr:`int8_scan_from`
        entities or more the scan reads int8 rows (:class:`~quillian.components.kge.
        quantized.Int8Rows`, a quarter of the bytes) and its best :attr:`SHORTLIST` (at
        least 4 k) are rescored in float32, so only a tail whose int8 score falls that
        far behind its exact one could be missed."""
        if k <= 0:
            return []
        h, r = self._ids([head], "heads"), self._rels([relation])
        query = complex_query(self.entities[h], self.relations[r])
        rows = self.int8_rows()
        if rows is None:
            every = self._every_tail(query)[0]
            every[h[0]] = -np.inf
            # the k best by partition (sorting every score cost more than scoring them)
            candidates = np.sort(shortlist(every, k))
            scores = every[candidates]
        else:
            rough = rows.scores(query)[0]
            rough[h[0]] = -np.inf
            candidates = np.sort(shortlist(rough, max(self.SHORTLIST, 4 * k)))
            scores = np.asarray(self.entities[candidates] @ query[0], dtype=np.float32)
        keep = candidates != h[0]
        candidates, scores = candidates[keep], scores[keep]
        best = np.argsort(-scores, kind="stable")[:k]
        return [(int(candidates[i]), float(scores[i])) for i in best]

    def int8_rows(self) -> Int8Rows | None:
        """The int8 copy of the entity rows (given, or made on first use); None below
        the size at which it pays, or where torch's kernel is missing (the scan stays
        float32)."""
        if self._int8 is not None:
            return self._int8
        if self.n_entities < self.int8_scan_from:
            return None
        with self._int8_lock:
            if self._int8 is None:
                try:
                    self._int8 = Int8Rows.quantize(self.entities)
                except (ImportError, RuntimeError) as exc:
                    logger.warning("int8 entity scan unavailable (%s); scanning float32", exc)
                    self.int8_scan_from = self.n_entities + 1
                    return None
            return self._int8

    def _score_all(self, heads: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> Floats:
        if len(heads) != len(rows):
            raise InputError("the entity and relation arrays differ in length")
        return self._every_tail(complex_query(self.entities[heads], self.relations[rows]))

    def _every_tail(self, query: Floats) -> Floats:
        if self.n_entities >= self.scan_from and len(query) <= self.SCAN_QUERIES:
            return scan_rows(self.entities, query)
        return np.asarray(query @ self.entities.T, dtype=np.float32)

    def _ids(self, values: npt.ArrayLike, name: str) -> npt.NDArray[np.int64]:
        return _checked(values, self.n_entities, name)

    def _rels(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        return _checked(values, self.n_relations, "relations")


def shortlist(scores: Floats, size: int) -> npt.NDArray[np.int64]:
    """Indices of the ``size`` highest ``scores`` (in no order). A full partition of
    millions of scores costs more than the int8 scan itself, so the scores above a
    threshold estimated from an evenly spaced sample (one expected to pass about 8
    ``size``) are kept first and only they are partitioned; when fewer than ``size``
    pass, the full partition runs."""
    n = len(scores)
    if size >= n:
        return np.arange(n, dtype=np.int64)
    if n > 64 * size:
        sample = scores[:: max(1, n // 8192)]
        threshold = np.quantile(sample, 1.0 - 8.0 * size / n)
        passed = np.flatnonzero(scores >= threshold)
        if len(passed) >= size:
            best = np.argpartition(-scores[passed], size - 1)[:size]
            return passed[best].astype(np.int64, copy=False)
    return np.argpartition(-scores, size - 1)[:size].astype(np.int64, copy=False)


def _checked(values: npt.ArrayLike, bound: int, name: str) -> npt.NDArray[np.int64]:
    array = np.asarray(values)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise InputError(f"{name} must be integers, got {array.dtype}", field=name)
    ids = array.astype(np.int64, copy=False).ravel()
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= bound):
        bad = ids[(ids < 0) | (ids >= bound)][0]
        raise InputError(f"{name}: {int(bad)} outside 0..{bound - 1}", field=name)
    return ids
