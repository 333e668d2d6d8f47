"""Small, batch-first protocols, one per storage role.

Algorithms never live in a store. Every backend inherits the contract test suite for
its protocol from :mod:`quillian.testing.contracts`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from quillian.stores.snapshot import GraphSnapshot
from quillian.types import Chunk, Document

__all__ = [
    "ChangeLog",
    "ChunkHead",
    "DocStatus",
    "DocumentStore",
    "GraphStore",
    "KeyValueStore",
    "SnapshotWriter",
    "StatusRecord",
    "StatusStore",
    "SummarizedIds",
    "VectorIndex",
    "VerifiedOnUse",
    "ids_summary",
]


class DocStatus(StrEnum):
    """Lifecycle of a document through ingestion (LightRAG's, so ingestion can resume)."""

    PENDING = "pending"
    PROCESSING = "processing"
    PROCESSED = "processed"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class StatusRecord:
    doc_id: str
    status: DocStatus
    error: str = ""
    source: str = ""


#: A chunk without its text, as :meth:`DocumentStore.iter_chunk_heads` gives it: its
#: document id, position in the document, id and title (so that heads sort into index
#: order as they are).
ChunkHead = tuple[str, int, str, str]


@runtime_checkable
class DocumentStore(Protocol):
    """Documents and their chunks; ``put_*`` upserts by id, one transaction per batch.
    ``delete_documents`` removes documents with their chunks; unknown ids are ignored.
    ``iter_chunk_heads`` gives every chunk as :data:`ChunkHead` (no text), in the order
    ``iter_chunks`` gives them."""

    def put_documents(self, documents: Sequence[Document]) -> None: ...
    def put_chunks(self, chunks: Sequence[Chunk]) -> None: ...
    def delete_documents(self, doc_ids: Sequence[str]) -> None: ...
    def get_documents(self, doc_ids: Sequence[str]) -> list[Document | None]: ...
    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk | None]: ...
    def chunks_of(self, doc_id: str) -> list[Chunk]: ...
    def iter_chunks(self) -> Iterator[Chunk]: ...
    def iter_chunk_heads(self) -> Iterator[ChunkHead]: ...
    def count_documents(self) -> int: ...
    def count_chunks(self) -> int: ...
    def close(self) -> None: ...


@runtime_checkable
class StatusStore(Protocol):
    """Per-document ingestion status: pending, processing, processed or failed with its error.

    ``set_status`` replaces status and error; an empty ``source`` keeps the one recorded.
    ``delete`` forgets documents (unknown ids are ignored).
    """

    def set_status(
        self, doc_ids: Sequence[str], status: DocStatus, *, error: str = "", source: str = ""
    ) -> None: ...
    def get_status(self, doc_ids: Sequence[str]) -> dict[str, StatusRecord]: ...
    def delete(self, doc_ids: Sequence[str]) -> None: ...
    def with_status(self, status: DocStatus) -> list[StatusRecord]: ...
    def ids_with_status(self, status: DocStatus) -> list[str]: ...
    def counts(self, statuses: Collection[DocStatus] | None = None) -> dict[DocStatus, int]: ...
    def close(self) -> None: ...


@runtime_checkable
class ChangeLog(Protocol):
    """The documents whose chunks or status changed since a mark, so a build can bring
    what it kept of the store up to date by reading only those.

    :meth:`mark` names the log's present end; :meth:`changed_since` gives the documents
    changed after a mark (sorted), with the new end, or None where the log cannot tell:
    a mark of another log, older than what it keeps, or past its end (the store put
    back to an older copy). :meth:`forget` drops what precedes a mark: later calls with
    older marks get None. A change and its log entry are one transaction, so a mark
    taken before reading the store never misses a change."""

    def mark(self) -> str: ...
    def changed_since(self, mark: str) -> tuple[str, list[str]] | None: ...
    def forget(self, mark: str) -> None: ...
    def close(self) -> None: ...


@runtime_checkable
class KeyValueStore(Protocol):
    """Namespaced bytes values (extraction results, embedding cache, manifests)."""

    def get_many(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]: ...
    def put_many(self, namespace: str, items: Mapping[str, bytes]) -> None: ...
    def delete_many(self, namespace: str, keys: Sequence[str]) -> None: ...
    def keys(self, namespace: str) -> Iterator[str]: ...
    def close(self) -> None: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Vectors keyed by non-negative int64 ids, searched by inner product.

    Vectors are expected L2-normalised, so inner product equals cosine similarity.
    ``search`` returns ``(ids, scores)`` of shape ``(n_queries, k')`` with
    ``k' = min(k, len(index))``, best first; an approximate index that finds fewer than
    ``k'`` for a query pads its row with id -1 and score -inf. ``get`` returns vectors in
    the order of the ids asked for and raises a :class:`KeyError` for an unknown id.
    Adding an id already present replaces its vector; ``delete`` removes ids (unknown
    ones are ignored), so a collection keyed by content changes by what changed;
    ``ids`` lists the stored ids, ascending; ``close`` flushes.
    """

    @property
    def dim(self) -> int: ...
    def __len__(self) -> int: ...
    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None: ...
    def delete(self, ids: npt.ArrayLike) -> None: ...
    def ids(self) -> npt.NDArray[np.int64]: ...
    def search(
        self, queries: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]: ...
    def get(self, ids: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


@runtime_checkable
class SummarizedIds(Protocol):
    """An optional power of a vector collection: summing up the ids it serves in one
    statement on its side (:func:`ids_summary` of them), so a build checks the ids it
    expects there against it instead of listing them all (a server's collection of
    100k ids took 0.07-0.1 s to list)."""

    def ids_summary(self) -> tuple[int, int, int, int]: ...


def ids_summary(ids: npt.NDArray[np.int64]) -> tuple[int, int, int, int]:
    """How many ``ids`` (distinct) there are, their XOR, and the sums of their high and
    low 32 bits (the high ones signed): a set of content-keyed ids that differs yet
    agrees on all four is not met by chance."""
    ids = np.asarray(ids, dtype=np.int64)
    xor = int(np.bitwise_xor.reduce(ids)) if len(ids) else 0
    return len(ids), xor, int((ids >> 32).sum()), int((ids & 0xFFFFFFFF).sum())


@runtime_checkable
class VerifiedOnUse(Protocol):
    """A store whose large files' checksums are checked on their first use, not at
    the open; ``verify`` checks them now."""

    def verify(self) -> None: ...


@runtime_checkable
class GraphStore(Protocol):
    """Accumulates typed nodes and weighted typed edges; yields immutable snapshots.

    Node ids are strings; ``kinds`` and edge ``kinds`` are small ints (see
    :class:`~quillian.stores.snapshot.NodeKind` and ``EdgeKind``). ``relations``
    holds, per edge, the index of the relation (triple) it carries, or -1. Adding a node
    again with the same kind is a no-op, with another kind an error, and so is an edge
    naming a node not added. ``close`` keeps what was added since the last snapshot.
    """

    def add_nodes(self, node_ids: Sequence[str], kinds: npt.ArrayLike) -> None: ...
    def add_edges(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        kinds: npt.ArrayLike,
        weights: npt.ArrayLike | None = None,
        relations: npt.ArrayLike | None = None,
    ) -> None: ...
    def snapshot(self) -> GraphSnapshot: ...
    def close(self) -> None: ...


@runtime_checkable
class SnapshotWriter(Protocol):
    """An optional power of a graph store: taking a whole graph at once, as a snapshot,
    instead of its nodes and edges by id."""

    def write_snapshot(self, snapshot: GraphSnapshot) -> GraphSnapshot:
        """Write ``snapshot`` as the graph of this store, which holds nothing yet (an
        :class:`~quillian.errors.StoreError` otherwise), and return it as the store
        reads it back (equal to ``snapshot``)."""
        ...


T = TypeVar("T")


def iter_batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Yield lists of at most ``size`` items."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
