"""The graph's distinct texts carried through the rows that came and went."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from quillian.index.distinct_texts import KEPT, KeptTexts, TextMoves, carried, kept_order


def _first_met(descriptions: list[int], relations: list[int]) -> tuple[list[int], list[int]]:
    """The distinct ids in the order first met, and each row's rank (the reference)."""
    rank: dict[int, int] = {}
    rows = [rank.setdefault(i, len(rank)) for i in descriptions + relations]
    return list(rank), rows


def _moved(rng: random.Random, old: list[int], pool: list[int]) -> tuple[list[int], list[int]]:
    """``old`` with some rows gone and some put in (ids drawn from ``pool``), and each
    old row's new place (-1: gone)."""
    new: list[tuple[int, int]] = [(i, at) for at, i in enumerate(old) if rng.random() < 0.8]
    for _ in range(rng.randrange(0, 5)):
        new.insert(rng.randrange(len(new) + 1), (rng.choice(pool), -1))
    to = [-1] * len(old)
    for place, (_, at) in enumerate(new):
        if at >= 0:
            to[at] = place
    return [i for i, _ in new], to


@pytest.mark.parametrize("seed", range(40))
def test_carried_texts_are_those_made_from_every_row(seed: int) -> None:
    """Rows gone (a text's first row among them, or every row of a text) and rows put
    in anywhere (texts known and new): the texts carried step after step are those
    first met in the new rows, each row's rank among them, and each kept text's key
    carried to its new rank."""
    rng = random.Random(seed)
    pool = list(range(1, 25))
    descriptions = [rng.choice(pool) for _ in range(rng.randrange(0, 15))]
    relations = [rng.choice(pool) for _ in range(rng.randrange(0, 15))]
    ids, rows = _first_met(descriptions, relations)
    keys = [i * 1000 + 7 for i in ids]  # a text's key follows its id
    kept = KeptTexts.of(
        np.array(ids, np.int64),
        np.array(rows[: len(descriptions)], np.int64),
        np.array(rows[len(descriptions) :], np.int64),
        np.array(keys, np.int64),
    )
    for _ in range(6):
        pool += [pool[-1] + 1, pool[-1] + 2]
        new_desc, to_desc = _moved(rng, descriptions, pool)
        new_rel, to_rel = _moved(rng, relations, pool)
        moves = TextMoves(np.array(to_desc, np.int64), np.array(to_rel, np.int64), "t")
        got = carried(kept, np.array(new_desc, np.int64), np.array(new_rel, np.int64), moves)
        want_ids, want_rows = _first_met(new_desc, new_rel)
        assert got is not None
        assert got.ids.tolist() == want_ids
        assert got.description_rows.tolist() + got.relation_rows.tolist() == want_rows
        old_ids = kept.ids.tolist()
        assert [got.ids[m] if m >= 0 else None for m in got.moved.tolist()] == [
            i if i in want_ids else None for i in old_ids
        ]
        assert got.added.tolist() == sorted(r for r, i in enumerate(want_ids) if i not in old_ids)
        assert got.ids[got.by_id].tolist() == sorted(want_ids)
        assert got.counts.tolist() == np.bincount(want_rows, minlength=len(want_ids)).tolist()
        new_keys = np.empty(len(got.ids), np.int64)
        live = got.moved >= 0
        new_keys[got.moved[live]] = kept.keys[live]
        new_keys[got.added] = got.ids[got.added] * 1000 + 7
        assert new_keys.tolist() == [i * 1000 + 7 for i in want_ids]
        by_key = kept_order(kept.by_key, got.moved, got.added, new_keys)
        assert new_keys[by_key].tolist() == sorted(new_keys.tolist())
        kept, descriptions, relations = got.kept(new_keys, by_key), new_desc, new_rel
        assert kept.first.tolist() == [want_rows.index(r) for r in range(len(want_ids))]


def test_moves_that_do_not_fit_are_not_carried() -> None:
    """Moves for another number of rows, or a kept row whose text id changed: None."""
    kept = KeptTexts.of(np.array([5, 6]), np.array([0, 1]), np.array([1]), np.array([50, 60]))
    rows = np.array([5, 6], np.int64)
    assert carried(kept, rows, np.array([6]), TextMoves(np.array([0]), np.array([0]), "t")) is None
    same = TextMoves(np.array([0, 1]), np.array([0]), "t")
    assert carried(kept, rows, np.array([6]), same) is not None
    assert carried(kept, rows, np.array([7]), same) is None


def test_texts_are_recalled_for_their_tables_and_model_only(tmp_path: Path) -> None:
    """Texts kept for the tables of one digest, their keys under one model: recalled for
    those alone (a build whose tables or model differ makes its texts again)."""
    kept = KeptTexts.of(np.array([5]), np.array([0]), np.array([0]), np.array([50]))
    KEPT.keep(tmp_path, ("tables-a", "model-a"), kept)
    assert KEPT.get(tmp_path, ("tables-a", "model-a")) is kept
    assert KEPT.get(tmp_path, ("tables-a", "model-b")) is None
    assert KEPT.get(tmp_path, ("tables-b", "model-a")) is None
    assert KEPT.get(tmp_path / "other", ("tables-a", "model-a")) is None
    KEPT.clear()
    assert KEPT.get(tmp_path, ("tables-a", "model-a")) is None
