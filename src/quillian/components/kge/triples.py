"""The triples a KG-embedding model trains on, whatever graph they came from.

A :class:`TripleSet` is three int32 arrays (heads, relations, tails) numbered
``0..n_entities-1`` and ``0..n_relations-1`` plus the counts, and a ``source_key``
naming what the numbers stand for (a digest of the entity ids and relation names the
adapters in :mod:`quillian.components.kge.sources` compute). Its :attr:`fingerprint`
identifies the graph a model was trained on: the counts, the source key and the set of
triples (a multiset hash, so the order of the triples does not matter but every triple
and every numbering does).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.errors import InputError

__all__ = ["HELD_OUT_MAX", "HELD_OUT_MIN", "TripleSet", "digest_strings", "hold_out"]

Ints = npt.NDArray[np.int32]
#: Any integer array (stored as int32 once checked).
AnyInts = npt.NDArray[np.integer[Any]]

_FINGERPRINT_VERSION = "quillian-kge-triples-1"
#: Fewer held-out triples than this measure too little to stop on (the mean of 200
#: reciprocal ranks, both directions of 100 triples, has a standard error of a few
#: hundredths), so a smaller share holds none out.
HELD_OUT_MIN = 100
#: At most this many are held out: each validation scores every entity as the head and
#: as the tail of each held-out triple.
HELD_OUT_MAX = 2000
_HASH_CHUNK = 1 << 20


def digest_strings(strings: list[str] | tuple[str, ...]) -> str:
    """A short digest of an ordered list of strings (entity ids, relation names)."""
    digest = hashlib.blake2b(digest_size=16)
    for text in strings:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


@dataclass(frozen=True, eq=False)
class TripleSet:
    """Triples as int arrays plus the sizes of their entity and relation vocabularies."""

    heads: AnyInts
    relations: AnyInts
    tails: AnyInts
    n_entities: int
    n_relations: int
    source_key: str = ""
    """What the numbers stand for (a digest of entity ids and relation names)."""
    relation_names: tuple[str, ...] = field(default=())
    """Names of relations ``0..n_relations-1`` when known (for reports, not scoring)."""

    def __post_init__(self) -> None:
        arrays = {}
        for name in ("heads", "relations", "tails"):
            array = np.ascontiguousarray(getattr(self, name))
            if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
                raise InputError(f"{name} must be a 1-d integer array", field=name)
            arrays[name] = array.astype(np.int32, copy=False)
        if not len(arrays["heads"]) == len(arrays["relations"]) == len(arrays["tails"]):
            raise InputError("heads, relations and tails differ in length")
        for name, bound in (("heads", self.n_entities), ("tails", self.n_entities)):
            _check_range(arrays[name], bound, name)
        _check_range(arrays["relations"], self.n_relations, "relations")
        if self.relation_names and len(self.relation_names) != self.n_relations:
            raise InputError(
                f"{len(self.relation_names)} relation names for {self.n_relations} relations"
            )
        for name, array in arrays.items():
            object.__setattr__(self, name, array)

    @classmethod
    def from_array(
        cls, triples: npt.ArrayLike, n_entities: int, n_relations: int, source_key: str = ""
    ) -> TripleSet:
        """From an ``(n, 3)`` array of ``(head, relation, tail)`` rows."""
        rows = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        return cls(rows[:, 0], rows[:, 1], rows[:, 2], n_entities, n_relations, source_key)

    def __len__(self) -> int:
        return len(self.heads)

    def __repr__(self) -> str:
        return (
            f"TripleSet({len(self)} triples, {self.n_entities} entities, "
            f"{self.n_relations} relations)"
        )

    def subset(self, rows: npt.ArrayLike) -> TripleSet:
        """The triples at ``rows``, with this set's numbering."""
        index = np.asarray(rows, dtype=np.int64)
        return TripleSet(
            self.heads[index],
            self.relations[index],
            self.tails[index],
            self.n_entities,
            self.n_relations,
            self.source_key,
            self.relation_names,
        )

    def as_array(self) -> npt.NDArray[np.int64]:
        """The triples as an ``(n, 3)`` int64 array."""
        return np.stack([self.heads, self.relations, self.tails], axis=1).astype(np.int64)

    @cached_property
    def fingerprint(self) -> str:
        """Identifies this graph: counts, source key and the multiset of triples."""
        total = np.zeros(1, np.uint64)
        mixed = np.zeros(1, np.uint64)
        for start in range(0, len(self), _HASH_CHUNK):
            stop = start + _HASH_CHUNK
            key = _mix(self.heads[start:stop].astype(np.uint64) + np.uint64(1))
            key = _mix(key ^ self.relations[start:stop].astype(np.uint64))
            key = _mix(key ^ self.tails[start:stop].astype(np.uint64))
            total += key.sum(dtype=np.uint64)
            mixed ^= np.bitwise_xor.reduce(_mix(key ^ np.uint64(0x5BD1E995)))
        digest = hashlib.blake2b(digest_size=16)
        header = f"{_FINGERPRINT_VERSION}:{self.n_entities}:{self.n_relations}:{len(self)}:"
        digest.update((header + self.source_key).encode("utf-8"))
        digest.update(total.tobytes() + mixed.tobytes())
        return digest.hexdigest()


def hold_out(triples: TripleSet, share: float, seed: int = 0) -> tuple[TripleSet, TripleSet]:
    """``triples`` split into training and held-out triples, ``share`` of them held out
    (at most :data:`HELD_OUT_MAX`; none when that would be fewer than
    :data:`HELD_OUT_MIN`), drawn at random by ``seed``.

    Held out by entity pair: every triple between two entities, in either direction,
    is held out with the others or not at all. A graph that states each fact with its
    inverse (WordNet's hypernym and hyponym) would otherwise leave the held-out triple's
    reverse in training, and a model answers it from that alone: on WordNet, 1,986 of
    2,000 held-out triples had their reverse in training and the held-out MRR read 0.987
    (the flaw of WN18: Toutanova and Chen 2015; Dettmers et al. 2018). A pair is held
    out only while each of its entities keeps another triple in training: an entity no
    training triple names keeps its initial vector, and a triple about it measures
    nothing."""
    if not 0.0 <= share < 1.0:
        raise InputError(f"the held-out share must be in [0, 1), got {share}", field="share")
    wanted = min(HELD_OUT_MAX, round(share * len(triples)))
    none = triples.subset(np.zeros(0, dtype=np.int64))
    if wanted < HELD_OUT_MIN:
        return triples, none
    heads, tails = triples.heads.astype(np.int64), triples.tails.astype(np.int64)
    left = np.bincount(heads, minlength=triples.n_entities) + np.bincount(
        tails, minlength=triples.n_entities
    )
    # the triples of each unordered entity pair, a group each
    pair = np.minimum(heads, tails) * triples.n_entities + np.maximum(heads, tails)
    order = np.argsort(pair, kind="stable")
    starts = np.flatnonzero(np.r_[True, pair[order][1:] != pair[order][:-1]])
    ends = np.r_[starts[1:], len(order)]
    held: list[int] = []
    for group in np.random.default_rng(seed).permutation(len(starts)):
        members = order[starts[group] : ends[group]]
        if len(held) + len(members) > wanted:
            continue
        a, b = int(heads[members[0]]), int(tails[members[0]])
        # each triple of the pair names both ends once (a self-loop names its entity twice)
        needed = 2 * len(members) if a == b else len(members)
        if min(left[a], left[b]) > needed:
            left[a] -= len(members)
            left[b] -= len(members)
            held.extend(int(row) for row in members)
            if len(held) == wanted:
                break
    if len(held) < HELD_OUT_MIN:
        return triples, none
    keep = np.ones(len(triples), dtype=bool)
    keep[held] = False
    return triples.subset(np.flatnonzero(keep)), triples.subset(np.sort(held))


def _check_range(array: AnyInts, bound: int, name: str) -> None:
    if len(array) and (int(array.min()) < 0 or int(array.max()) >= bound):
        bad = array[(array < 0) | (array >= bound)][0]
        raise InputError(f"{name}: {int(bad)} outside 0..{bound - 1}", field=name)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser, element-wise (uint64 arithmetic wraps)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
