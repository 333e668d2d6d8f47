"""Vector collections keyed by content, read by position.

A build stores each vector under a key derived from what was embedded
(:func:`vector_keys`: the embedding model and the text, or the chunk's id and text), so
a later build adds the keys it lacks and deletes those no longer used, and the
collection changes by what changed. The retrievers address vectors by position (a chunk's
position in ``kg.chunk_ids``, a text's row): the build saves each collection's keys in
position order, and :class:`KeyedVectors` presents a collection with those keys as the
positional :class:`~quillian.stores.protocols.VectorIndex` the retrievers read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from quillian.errors import StoreError, UnknownIdError
from quillian.stores.embedded._vecutil import as_matrix, check_k
from quillian.stores.protocols import VectorIndex

__all__ = ["KeyedVectors", "check_distinct", "vector_keys"]

#: Keys are 62-bit hashes with bit 62 set: non-negative int64s that never equal a
#: position (the ids of collections written before keys), so an old collection's ids
#: are all deleted by the first keyed build and none is taken for a key.
_KEY_BIT = 1 << 62


def vector_keys(model_id: str, texts: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each text's key under the embedding model ``model_id`` (BLAKE2b, 62 bits): a new
    model keys every vector anew, so none embedded by another model is kept."""
    prefix, blake2b = model_id.encode() + b"\x00", hashlib.blake2b
    # the digests joined and read as little-endian integers at once, not an integer a
    # text: every update keys every chunk and text of the index
    digests = b"".join([blake2b(prefix + t.encode(), digest_size=8).digest() for t in texts])
    keys = np.frombuffer(digests, dtype="<u8")
    return ((keys & np.uint64(_KEY_BIT - 1)) | np.uint64(_KEY_BIT)).astype(np.int64)


def check_distinct(
    keys: npt.NDArray[np.int64],
    text_at: Callable[[int], str],
    collection: str,
    order: npt.NDArray[np.intp] | None = None,
) -> None:
    """Refuse two different texts with one key (a 62-bit hash collision): the build
    stops before it writes, naming both. ``text_at`` gives the text of a position: only
    those of equal keys are asked for. ``order``: the positions in the order of their
    keys, where the caller has it (else sorted here)."""
    if order is None:
        # the keys sorted tell whether any two are equal at a third of the cost of their
        # order (0.5 against 1.4 ms for 100k chunks' keys); the order only then
        ordered = np.sort(keys)
        if not (ordered[1:] == ordered[:-1]).any():
            return
        order = np.argsort(keys)  # equal keys side by side in any order: each pair compared
    same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    for at in same.tolist():
        first, second = sorted((int(order[at]), int(order[at + 1])))
        a, b = text_at(first), text_at(second)
        if a != b:
            raise StoreError(
                f"vector collection {collection!r}: {a[:60]!r} and {b[:60]!r} hash to the "
                f"same key {int(keys[order[at]])}; the index cannot hold both"
            )


class KeyedVectors:
    """A read-only positional :class:`~quillian.stores.protocols.VectorIndex` over a
    collection keyed by content: position ``i`` is the vector of ``keys[i]``.

    ``search`` maps the collection's keys back to positions (a key several positions
    share, such as one text of several relations, gives each of them, in position
    order) and drops keys the positions do not name: vectors a later build is adding to
    a shared collection while this index reads it. It fetches more until ``k`` positions
    are found or the collection is exhausted. The collection ranks ties by key, which is
    derived from content, so an index grown in steps ranks like one built at once.
    """

    def __init__(self, collection: VectorIndex, keys: npt.NDArray[np.int64]) -> None:
        self.collection = collection
        self.keys = keys

    @cached_property
    def _by_key(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        order = np.argsort(self.keys, kind="stable").astype(np.int64)
        return np.asarray(self.keys)[order], order

    @property
    def dim(self) -> int:
        return self.collection.dim

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"KeyedVectors({self.collection!r}, {len(self)} positions)"

    def get(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Vectors at ``ids`` (positions); raises :class:`UnknownIdError` for a position
        out of range."""
        positions = np.asarray(ids, dtype=np.int64).reshape(-1)
        bad = (positions < 0) | (positions >= len(self.keys))
        if bad.any():
            raise UnknownIdError(positions[bad])
        return self.collection.get(np.asarray(self.keys)[positions])

    def search(
        self, queries: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best positions and scores per query, best first (rows padded with
        -1 and -inf where the collection holds fewer)."""
        q = as_matrix(queries, self.dim, field="queries")
        k = min(check_k(k), len(self.keys))
        stored = len(self.collection)
        fetch = min(k, stored)
        found: list[tuple[list[int], list[float]]] = [([], [])] * len(q)
        while fetch > 0:
            keys, scores = self.collection.search(q, fetch)  # validates q and k
            found = [self._positions(r, s, k) for r, s in zip(keys, scores, strict=True)]
            if fetch >= stored or all(len(f[0]) >= k for f in found):
                break
            fetch = min(stored, max(fetch * 4, k + 16))  # keys it does not name: more
        ids = np.full((len(q), k), -1, np.int64)
        out = np.full((len(q), k), -np.inf, np.float32)
        for j, (positions, values) in enumerate(found):
            ids[j, : len(positions)] = positions
            out[j, : len(values)] = values
        return ids, out

    def _positions(
        self, keys: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], k: int
    ) -> tuple[list[int], list[float]]:
        """The first ``k`` positions of the found ``keys``, with their scores."""
        sorted_keys, order = self._by_key
        lo = np.searchsorted(sorted_keys, keys, side="left")
        hi = np.searchsorted(sorted_keys, keys, side="right")
        positions: list[int] = []
        values: list[float] = []
        for key, start, stop, score in zip(keys.tolist(), lo, hi, scores.tolist(), strict=True):
            if key < 0 or start == stop:
                continue
            for position in np.sort(order[start:stop]).tolist():
                positions.append(position)
                values.append(score)
            if len(positions) >= k:
                break
        return positions[:k], values[:k]

    def ids(self) -> npt.NDArray[np.int64]:
        """Every position, ascending."""
        return np.arange(len(self.keys), dtype=np.int64)

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        raise StoreError(f"{self!r} is read-only: a build writes the collection by key")

    def delete(self, ids: npt.ArrayLike) -> None:
        raise StoreError(f"{self!r} is read-only: a build writes the collection by key")

    def flush(self) -> None:
        """Nothing to write."""

    def close(self) -> None:
        """Close the collection."""
        self.collection.close()
