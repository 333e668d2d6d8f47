"""The graph's distinct texts carried from the last build's by the rows that came and
went, where they were made again from every row's text id.

The embedding stage keys each distinct description and relation text once, in the
order the texts are first met (descriptions, then relations, by position:
:meth:`~quillian.index.tables.StoredTables.distinct_texts`); each row refers to its
text by that rank. Made again, that is a sort of every row's text id and one of the
distinct ids, and the texts' keys are looked up by id and sorted to be checked.
Carried (:func:`carried`), it costs passes over the rows' ranks: the rows kept keep
their order, so a text whose first row is kept keeps its place among the others; only
the texts first met in a row that came or went are placed again, by binary search. The
texts' vector keys are carried with them (:class:`Carried`), so only the new texts are
read, keyed and checked, and the vector collection changes by the texts that came and
went.

A build keeps its distinct texts in the process (:data:`KEPT`, by the digest of the
tables they are the texts of and the embedding model) for the next build to carry.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quillian.index.artifacts import KeptInProcess

__all__ = [
    "KEPT",
    "Carried",
    "KeptTexts",
    "TextMoves",
    "carried",
    "kept_order",
]

Ids = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TextMoves:
    """Where a graph's descriptions and relations went in the next one (each old
    position's new one, -1: gone), and the digest of the tables they came from."""

    descriptions: Ids
    relations: Ids
    follows: str


class KeptTexts:
    """A build's distinct texts: their ids in the order first met (``ids``), each
    row's rank among them (``rows``: the ``n_desc`` descriptions', then the
    relations'), each text's vector key (``keys``); and, found when first asked for
    where not given (a build that made its texts from every row need not pay for them
    unless a next build carries them), each text's first row (``first``) and number of
    rows (``counts``), and the ranks in the order of their ids (``by_id``) and of their
    keys (``by_key``)."""

    def __init__(
        self,
        ids: Ids,
        rows: Ids,
        n_desc: int,
        keys: Ids,
        *,
        first: Ids | None = None,
        counts: Ids | None = None,
        by_id: Ids | None = None,
        by_key: Ids | None = None,
    ) -> None:
        self.ids, self.rows, self.n_desc, self.keys = ids, rows, n_desc, keys
        self._first, self._counts, self._by_id, self._by_key = first, counts, by_id, by_key

    @classmethod
    def of(cls, ids: Ids, description_rows: Ids, relation_rows: Ids, keys: Ids) -> KeptTexts:
        """The texts a build made from every row (ranks in the order first met)."""
        rows = np.concatenate([description_rows, relation_rows]).astype(np.int64, copy=False)
        return cls(ids, rows, len(description_rows), keys)

    @functools.cached_property
    def first(self) -> Ids:
        return self._first if self._first is not None else _firsts(self.rows)

    @functools.cached_property
    def counts(self) -> Ids:
        found = self._counts
        return found if found is not None else np.bincount(self.rows, minlength=len(self.ids))

    @functools.cached_property
    def by_id(self) -> Ids:
        return self._by_id if self._by_id is not None else np.argsort(self.ids, kind="stable")

    @functools.cached_property
    def by_key(self) -> Ids:
        return self._by_key if self._by_key is not None else np.argsort(self.keys, kind="stable")


def _firsts(rows: Ids) -> Ids:
    """Each rank's first row, where ranks are in the order first met (each first
    appears where the running maximum of the rows rises)."""
    if not len(rows):
        return np.zeros(0, np.int64)
    running = np.maximum.accumulate(rows)
    return np.flatnonzero(np.concatenate(([True], running[1:] > running[:-1])))


@dataclass(frozen=True)
class Carried:
    """Distinct texts carried (see :func:`carried`) and what came and went: the texts'
    ids in the order first met, each row's rank (``description_rows``,
    ``relation_rows``), each old text's new rank (``moved``, -1: gone) and the ranks of
    the texts new to them (``added``, in order), with :class:`KeptTexts`' ``first``,
    ``counts`` and ``by_id`` of the new ranks."""

    ids: Ids
    description_rows: Ids
    relation_rows: Ids
    moved: Ids
    added: Ids
    first: Ids
    counts: Ids
    by_id: Ids

    def kept(self, keys: Ids, by_key: Ids) -> KeptTexts:
        """What the next build carries these texts from, given their ``keys`` and the
        ranks in the order of the keys."""
        rows = np.concatenate([self.description_rows, self.relation_rows])
        return KeptTexts(
            self.ids,
            rows,
            len(self.description_rows),
            keys,
            first=self.first,
            counts=self.counts,
            by_id=self.by_id,
            by_key=by_key,
        )


def carried(kept: KeptTexts, descriptions: Ids, relations: Ids, moves: TextMoves) -> Carried | None:
    """The distinct texts of the rows whose text ids are ``descriptions`` and
    ``relations`` (by position), carried from ``kept`` (the texts of the rows before
    ``moves``): what making them from every row gives. None where the moves do not
    fit the kept rows, or a kept row's text id is not the one it had."""
    n_old, n_desc = len(kept.rows), len(descriptions)
    if len(moves.descriptions) != kept.n_desc or len(moves.relations) != n_old - kept.n_desc:
        return None
    row_ids = np.concatenate([descriptions, relations]).astype(np.int64, copy=False)
    n_new = len(row_ids)
    # each old row's new row (-1: gone), descriptions then relations
    to = np.concatenate(
        [moves.descriptions, np.where(moves.relations >= 0, moves.relations + n_desc, -1)]
    )
    live = to >= 0
    to_live, rows_live = to[live], kept.rows[live]  # each kept row's new row, its old rank
    if not np.array_equal(row_ids[to_live], kept.ids[rows_live]):
        return None
    came = np.ones(n_new, np.bool_)
    came[to_live] = False
    came_rows = np.flatnonzero(came)
    came_ids = row_ids[came_rows]
    # the texts of the rows that came: those kept found by id, the others new
    sorted_ids = kept.ids[kept.by_id]
    at = np.searchsorted(sorted_ids, came_ids)
    inside = at < len(sorted_ids)
    known = np.zeros(len(came_ids), np.bool_)
    known[inside] = sorted_ids[at[inside]] == came_ids[inside]
    came_rank = np.full(len(came_ids), -1, np.int64)
    came_rank[known] = kept.by_id[at[known]]
    counts = kept.counts - np.bincount(kept.rows[~live], minlength=len(kept.ids))
    counts += np.bincount(came_rank[known], minlength=len(kept.ids))
    alive = counts > 0
    # each old text's first new row: its first row's, where that row stays (the
    # least of its kept rows'), then any row that came before it
    first = to[kept.first]
    again = alive & (first < 0)
    if again.any():  # its first row gone: its first kept row, if any
        first[again] = n_new
        wanted = again[kept.rows] & live
        np.minimum.at(first, kept.rows[wanted], to[wanted])
    first[~alive] = -1
    stay = alive & ~again
    if known.any():
        earliest = np.full(len(kept.ids), n_new, np.int64)
        np.minimum.at(earliest, came_rank[known], came_rows[known])
        lowered = alive & (earliest < np.where(first < 0, n_new, first))
        first[lowered] = earliest[lowered]
        stay &= ~lowered
    # the texts new to the build, each at its first row
    new_ids, first_at = np.unique(came_ids[~known], return_index=True)
    new_first = came_rows[~known][first_at]
    # the texts placed again among those that stay, by their first rows
    stays, placed = np.flatnonzero(stay), np.flatnonzero(alive & ~stay)
    moving_first = np.concatenate([first[placed], new_first])
    order = np.argsort(moving_first, kind="stable")
    places = np.searchsorted(first[stays], moving_first[order])
    ids = np.insert(kept.ids[stays], places, np.concatenate([kept.ids[placed], new_ids])[order])
    firsts = np.insert(first[stays], places, moving_first[order])
    rank = np.empty(len(order), np.int64)  # each moving text's new rank
    rank[order] = places + np.arange(len(places), dtype=np.int64)
    moved = np.full(len(kept.ids), -1, np.int64)
    held = np.arange(len(stays), dtype=np.int64)
    moved[stays] = held + np.searchsorted(places, held, "right")
    moved[placed] = rank[: len(placed)]
    new_rank = rank[len(placed) :]
    # each row's rank: the kept rows' text moved, those that came found
    rows = np.empty(n_new, np.int64)
    rows[to_live] = moved[rows_live]
    rows[came_rows[known]] = moved[came_rank[known]]
    rows[came_rows[~known]] = new_rank[np.searchsorted(new_ids, came_ids[~known])]
    return Carried(
        ids,
        rows[:n_desc],
        rows[n_desc:],
        moved,
        np.sort(new_rank),
        firsts,
        np.bincount(rows, minlength=len(ids)),
        kept_order(kept.by_id, moved, new_rank, ids),
    )


def kept_order(order: Ids, moved: Ids, added: Ids, values: Ids) -> Ids:
    """``order`` (old ranks in the order of their ``values`` before) moved to new ranks
    (``moved``, -1: gone), with the ranks ``added`` put in by their ``values`` (by new
    rank): the new ranks in the order of their values."""
    kept = moved[order]
    kept = kept[kept >= 0]
    new = added[np.argsort(values[added], kind="stable")]
    return np.insert(kept, np.searchsorted(values[kept], values[new]), new)


#: The last distinct texts of each index (by its directory), under the digest of the
#: tables they are the texts of and the model their keys are under: what the next
#: build in this process carries.
KEPT: KeptInProcess[KeptTexts] = KeptInProcess()
