"""Contract test suites, one per storage protocol, inherited by every backend's tests.

Each suite is a pytest class without the ``Test`` prefix, so it is collected only
through a subclass. A backend's test module subclasses it, overrides the ``store``
fixture (which receives ``tmp_path``) and the :meth:`reopen` hook::

    class TestSqliteDocumentStore(DocumentStoreContract):
        @pytest.fixture
        def store(self, tmp_path):
            with SqliteDocumentStore(tmp_path / "store.sqlite") as store:
                yield store

        def reopen(self, store):
            store.close()
            return SqliteDocumentStore(store.path)

Importing this module needs pytest (the ``test`` extra).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
import pytest

from quillian.errors import InputError, QuillianError, StoreError
from quillian.stores.protocols import (
    ChangeLog,
    DocStatus,
    DocumentStore,
    GraphStore,
    KeyValueStore,
    SnapshotWriter,
    StatusRecord,
    StatusStore,
    VectorIndex,
)
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, NodeKind
from quillian.types import Chunk, Document

__all__ = [
    "ChangeLogContract",
    "DocumentStoreContract",
    "GraphStoreContract",
    "KeyValueStoreContract",
    "StatusStoreContract",
    "VectorIndexContract",
    "add_five_node_graph",
    "assert_five_node_graph",
    "unit_vectors",
]


class _Closeable(Protocol):
    def close(self) -> None: ...


S = TypeVar("S", bound=_Closeable)


class _Contract(Generic[S]):
    """The ``store`` fixture and ``reopen`` hook every contract needs."""

    protocol: ClassVar[type]

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[S]:
        """An empty store under ``tmp_path``; backends override this fixture."""
        raise NotImplementedError("override the store fixture")

    def reopen(self, store: S) -> S:
        """Close ``store`` and open the same data again; backends override this hook."""
        raise NotImplementedError("override reopen")

    @contextmanager
    def reopened(self, store: S) -> Iterator[S]:
        """:meth:`reopen` as a context manager that closes the reopened store."""
        again = self.reopen(store)
        try:
            yield again
        finally:
            again.close()

    def test_implements_protocol(self, store: S) -> None:
        assert isinstance(store, self.protocol)

    def test_close_twice_is_harmless(self, store: S) -> None:
        store.close()
        store.close()


def _doc(i: int, **metadata: Any) -> Document:
    return Document(
        text=f"text {i} — ünïcode", title=f"T{i}", source=f"s{i}.txt", metadata=metadata
    )


class _Edited(Document):
    """A document under a given id (a store keys documents by :attr:`Document.id`,
    however it is made), as if a document were edited in place."""

    def __init__(self, text: str, doc_id: str) -> None:
        super().__init__(text=text, title="T", source="s.txt")
        object.__setattr__(self, "_id", doc_id)

    @property
    def id(self) -> str:
        return str(self._id)  # type: ignore[attr-defined]


def _chunk(doc: Document, index: int) -> Chunk:
    return Chunk(
        doc_id=doc.id, index=index, text=f"c{index}", start=index, end=index + 2, title=doc.title
    )


class DocumentStoreContract(_Contract[DocumentStore]):
    """What every :class:`~quillian.stores.protocols.DocumentStore` must do."""

    protocol = DocumentStore

    def test_long_texts_round_trip(self, store: DocumentStore) -> None:
        """Texts long enough for a store to compress (SQLite's) come back exactly: a
        store that compresses them reads them back, one that does not stores them as
        they are."""
        text = "Quillian invented semantic networks in 1966. " * 40 + "Ünïcode ✓ 😀."
        doc = Document(text=text, title="T", source="s.txt")
        chunk = Chunk(doc_id=doc.id, index=0, text=text[1:], start=1, end=len(text), title="T")
        store.put_documents([doc])
        store.put_chunks([chunk])

        def check(reading: DocumentStore) -> None:
            (got,) = reading.get_documents([doc.id])
            assert got is not None and got.text == text and got == doc
            assert reading.get_chunks([chunk.id]) == [chunk] == reading.chunks_of(doc.id)
            assert [c.text for c in reading.iter_chunks()] == [text[1:]]

        check(store)
        with self.reopened(store) as again:
            check(again)

    def test_chunks_keep_their_texts_when_their_document_changes(
        self, store: DocumentStore
    ) -> None:
        """A chunk's text changes only by a put of the chunk: not when its document is
        put again with another text (a store may keep a chunk as its document's span)."""
        text = "Quillian invented semantic networks. " * 20 + "Ünïcode ✓."
        doc = Document(text=text, title="T", source="s.txt")
        chunks = [
            Chunk(doc_id=doc.id, index=i, text=text[s:e], start=s, end=e, title="T")
            for i, (s, e) in enumerate([(0, 36), (36, len(text)), (5, 9)])
        ]
        store.put_documents([doc])
        store.put_chunks(chunks)
        assert store.get_chunks([c.id for c in chunks]) == chunks
        store.put_documents([doc])  # the same text again
        assert store.chunks_of(doc.id) == chunks
        changed = _Edited("Another text altogether.", doc.id)
        store.put_documents([changed])
        assert store.get_documents([doc.id])[0].text == changed.text  # type: ignore[union-attr]
        assert store.get_chunks([c.id for c in chunks]) == chunks
        assert store.chunks_of(doc.id) == chunks
        assert sorted(store.iter_chunks(), key=lambda c: c.index) == chunks
        store.delete_documents([doc.id])
        assert store.get_chunks([c.id for c in chunks]) == [None, None, None]

    def test_documents_round_trip_in_order(self, store: DocumentStore) -> None:
        docs = [_doc(1, tags=["a", "b"], year=2020, nested={"x": [1.5, None, True]}), _doc(2)]
        store.put_documents(docs)
        got = store.get_documents([docs[1].id, "doc-missing", docs[0].id])
        assert got == [docs[1], None, docs[0]]
        assert [d.metadata if d else None for d in got] == [{}, None, docs[0].metadata]
        assert [(d.source, d.title) for d in got if d] == [("s2.txt", "T2"), ("s1.txt", "T1")]

    def test_put_documents_is_an_upsert(self, store: DocumentStore) -> None:
        store.put_documents([_doc(1, v=1)])
        store.put_documents([_doc(1, v=1)])
        assert store.count_documents() == 1
        store.put_documents([_doc(1, v=2)])
        got = store.get_documents([_doc(1).id])[0]
        assert got is not None and got.metadata == {"v": 2}
        assert store.count_documents() == 1

    def test_chunks_round_trip_and_order(self, store: DocumentStore) -> None:
        doc, other = _doc(1), _doc(2)
        chunks = [_chunk(doc, i) for i in (2, 0, 1)] + [_chunk(other, 0)]
        store.put_chunks(chunks)
        store.put_chunks(chunks[:2])
        assert store.count_chunks() == 4
        assert store.chunks_of(doc.id) == sorted(chunks[:3], key=lambda c: c.index)
        assert store.chunks_of("doc-missing") == []
        assert store.get_chunks([chunks[3].id, "chunk-x", chunks[0].id]) == [
            chunks[3],
            None,
            chunks[0],
        ]
        assert sorted(c.id for c in store.iter_chunks()) == sorted(c.id for c in chunks)

    def test_delete_documents_takes_their_chunks_only(self, store: DocumentStore) -> None:
        doc, other = _doc(1), _doc(2)
        store.put_documents([doc, other])
        store.put_chunks([_chunk(doc, 0), _chunk(doc, 1), _chunk(other, 0)])
        store.delete_documents([doc.id, "doc-missing", doc.id])
        assert store.get_documents([doc.id, other.id]) == [None, other]
        assert store.chunks_of(doc.id) == []
        assert [c.id for c in store.iter_chunks()] == [_chunk(other, 0).id]
        assert (store.count_documents(), store.count_chunks()) == (1, 1)
        store.delete_documents([])
        assert store.count_documents() == 1

    def test_iter_chunks_yields_each_chunk_once(self, store: DocumentStore) -> None:
        doc = _doc(1)
        chunks = [_chunk(doc, i) for i in range(2500)]
        store.put_chunks(chunks)
        ids = [c.id for c in store.iter_chunks()]
        assert len(ids) == 2500 and set(ids) == {c.id for c in chunks}

    def test_chunk_heads_are_the_chunks_without_text(self, store: DocumentStore) -> None:
        doc, other = _doc(1), _doc(2)
        chunks = [_chunk(doc, i) for i in range(2300)] + [_chunk(other, 0)]
        store.put_chunks(chunks)
        retitled = dataclasses.replace(chunks[5], title="A new title")
        store.put_chunks([retitled])  # an upsert keeps the chunk's place, with its title
        store.delete_documents([other.id])
        heads = list(store.iter_chunk_heads())
        assert heads == [(c.doc_id, c.index, c.id, c.title) for c in store.iter_chunks()]
        assert sorted(heads) == sorted(
            (c.doc_id, c.index, c.id, c.title) for c in [*chunks[:5], retitled, *chunks[6:-1]]
        )

    def test_empty_store_and_batches(self, store: DocumentStore) -> None:
        store.put_documents([])
        store.put_chunks([])
        assert store.get_documents([]) == [] and store.get_chunks([]) == []
        assert store.count_documents() == 0 and store.count_chunks() == 0
        assert list(store.iter_chunks()) == [] and list(store.iter_chunk_heads()) == []

    def test_bad_document_rejects_the_whole_batch(self, store: DocumentStore) -> None:
        store.put_documents([_doc(1)])
        with pytest.raises(InputError, match="metadata"):
            store.put_documents([_doc(2), _doc(3, bad=object())])
        assert store.count_documents() == 1
        assert store.get_documents([_doc(2).id]) == [None]

    def test_bad_chunk_rejects_the_whole_batch(self, store: DocumentStore) -> None:
        doc = _doc(1)
        bad = Chunk(doc_id=doc.id, index=1, text="x", start=5, end=2)
        with pytest.raises(InputError, match="start"):
            store.put_chunks([_chunk(doc, 0), bad])
        assert store.count_chunks() == 0

    def test_persists_across_reopen(self, store: DocumentStore) -> None:
        doc = _doc(1, k="v")
        store.put_documents([doc])
        store.put_chunks([_chunk(doc, 0)])
        with self.reopened(store) as again:
            got = again.get_documents([doc.id])[0]
            assert got == doc and got is not None and got.metadata == {"k": "v"}
            assert again.chunks_of(doc.id) == [_chunk(doc, 0)]

    def test_use_after_close_raises(self, store: DocumentStore) -> None:
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.count_documents()


class StatusStoreContract(_Contract[StatusStore]):
    """What every :class:`~quillian.stores.protocols.StatusStore` must do."""

    protocol = StatusStore

    def test_lifecycle_keeps_source_and_clears_error(self, store: StatusStore) -> None:
        store.set_status(["d1", "d2"], DocStatus.PENDING, source="a.txt")
        store.set_status(["d1"], DocStatus.PROCESSING)
        assert store.get_status(["d1"])["d1"] == StatusRecord(
            "d1", DocStatus.PROCESSING, source="a.txt"
        )
        store.set_status(["d1"], DocStatus.FAILED, error="boom: bad line 3")
        assert store.get_status(["d1"])["d1"].error == "boom: bad line 3"
        store.set_status(["d1"], DocStatus.PROCESSED)
        assert store.get_status(["d1"])["d1"] == StatusRecord(
            "d1", DocStatus.PROCESSED, source="a.txt"
        )

    def test_unknown_ids_are_left_out(self, store: StatusStore) -> None:
        store.set_status(["d1"], DocStatus.PENDING)
        assert set(store.get_status(["d1", "nope"])) == {"d1"}
        assert store.get_status([]) == {}

    def test_delete_forgets_only_the_given_ids(self, store: StatusStore) -> None:
        store.set_status(["d1", "d2"], DocStatus.PROCESSED)
        store.delete(["d1", "nope"])
        assert set(store.get_status(["d1", "d2"])) == {"d2"}
        assert store.counts()[DocStatus.PROCESSED] == 1

    def test_with_status_and_counts(self, store: StatusStore) -> None:
        store.set_status(["b", "a", "c"], DocStatus.PENDING)
        store.set_status(["c"], DocStatus.FAILED, error="e")
        assert [r.doc_id for r in store.with_status(DocStatus.PENDING)] == ["a", "b"]
        assert store.with_status(DocStatus.FAILED) == [StatusRecord("c", DocStatus.FAILED, "e")]
        assert store.ids_with_status(DocStatus.PENDING) == ["a", "b"]
        assert store.ids_with_status(DocStatus.PROCESSED) == []
        assert store.counts() == {
            DocStatus.PENDING: 2,
            DocStatus.PROCESSING: 0,
            DocStatus.PROCESSED: 0,
            DocStatus.FAILED: 1,
        }
        # those named only, a status no document has at 0
        assert store.counts([DocStatus.FAILED, DocStatus.PROCESSED]) == {
            DocStatus.FAILED: 1,
            DocStatus.PROCESSED: 0,
        }

    def test_status_given_as_string(self, store: StatusStore) -> None:
        store.set_status(["d1"], "processed")  # type: ignore[arg-type]
        assert store.get_status(["d1"])["d1"].status is DocStatus.PROCESSED

    def test_unknown_status_is_rejected(self, store: StatusStore) -> None:
        with pytest.raises(InputError, match="done"):
            store.set_status(["d1"], "done")  # type: ignore[arg-type]
        assert store.get_status(["d1"]) == {}

    def test_persists_across_reopen(self, store: StatusStore) -> None:
        store.set_status(["d1"], DocStatus.FAILED, error="x", source="f.txt")
        with self.reopened(store) as again:
            assert again.get_status(["d1"])["d1"] == StatusRecord(
                "d1", DocStatus.FAILED, "x", "f.txt"
            )

    def test_use_after_close_raises(self, store: StatusStore) -> None:
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.counts()


class KeyValueStoreContract(_Contract[KeyValueStore]):
    """What every :class:`~quillian.stores.protocols.KeyValueStore` must do."""

    protocol = KeyValueStore

    def test_round_trip_in_order(self, store: KeyValueStore) -> None:
        store.put_many("ns", {"a": b"\x00\x01binary", "b": b"", "c": bytearray(b"ba")})  # type: ignore[dict-item]
        assert store.get_many("ns", ["c", "missing", "a", "b"]) == [
            b"ba",
            None,
            b"\x00\x01binary",
            b"",
        ]

    def test_namespaces_are_separate(self, store: KeyValueStore) -> None:
        store.put_many("one", {"k": b"1"})
        store.put_many("two", {"k": b"2"})
        assert store.get_many("one", ["k"]) == [b"1"]
        assert store.get_many("two", ["k"]) == [b"2"]
        assert list(store.keys("three")) == []

    def test_overwrite_delete_and_keys(self, store: KeyValueStore) -> None:
        store.put_many("ns", {"b": b"1", "a": b"2", "c": b"3"})
        store.put_many("ns", {"b": b"new"})
        store.delete_many("ns", ["c", "never-there"])
        assert list(store.keys("ns")) == ["a", "b"]
        assert store.get_many("ns", ["b", "c"]) == [b"new", None]

    def test_keys_yields_each_key_once(self, store: KeyValueStore) -> None:
        items = {"": b"v", **{f"k{i:05d}": b"v" for i in range(2500)}}  # pages of 1,000
        store.put_many("ns", items)
        assert list(store.keys("ns")) == sorted(items)

    def test_bad_value_rejects_the_whole_batch(self, store: KeyValueStore) -> None:
        store.put_many("ns", {"a": b"old"})
        with pytest.raises(InputError, match="'b'"):
            store.put_many("ns", {"a": b"new", "b": "not bytes"})  # type: ignore[dict-item]
        assert store.get_many("ns", ["a", "b"]) == [b"old", None]

    def test_persists_across_reopen(self, store: KeyValueStore) -> None:
        store.put_many("ns", {"a": b"1"})
        with self.reopened(store) as again:
            assert again.get_many("ns", ["a"]) == [b"1"]

    def test_use_after_close_raises(self, store: KeyValueStore) -> None:
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.get_many("ns", ["a"])


class ChangeLogContract(_Contract[ChangeLog]):
    """What every :class:`~quillian.stores.protocols.ChangeLog` must do: the ``store``
    fixture is the log, and :meth:`writers` gives the document and status stores it
    logs."""

    protocol = ChangeLog

    @pytest.fixture
    def writers(self, store: ChangeLog) -> Iterator[tuple[DocumentStore, StatusStore]]:
        """The document and status stores ``store`` logs; backends override this."""
        raise NotImplementedError("override the writers fixture")

    def test_every_chunk_and_status_change_is_logged_by_document(
        self, store: ChangeLog, writers: tuple[DocumentStore, StatusStore]
    ) -> None:
        docs, status = writers
        start = store.mark()
        assert _changed(store, start) == []
        a, b = _doc(1), _doc(2)
        docs.put_chunks([_chunk(b, 0), _chunk(a, 0), _chunk(a, 1)])
        status.set_status(["doc-c"], DocStatus.PENDING)
        since = store.changed_since(start)
        assert since is not None and since[1] == sorted([a.id, b.id, "doc-c"])
        mark = since[0]
        assert _changed(store, mark) == []
        docs.put_chunks([dataclasses.replace(_chunk(a, 1), title="New")])  # an upsert
        assert _changed(store, mark) == [a.id]
        later = store.mark()
        status.set_status([b.id], DocStatus.FAILED, error="x")
        docs.delete_documents([a.id])
        status.delete(["doc-c"])
        changed = sorted([a.id, b.id, "doc-c"])
        assert _changed(store, later) == changed
        assert _changed(store, mark) == changed

    def test_a_chunk_moved_to_another_document_logs_both(
        self, store: ChangeLog, writers: tuple[DocumentStore, StatusStore]
    ) -> None:
        docs, _ = writers
        chunk = _chunk(_doc(1), 0)
        docs.put_chunks([chunk])
        mark = store.mark()
        docs.put_chunks([Chunk.stored(chunk.id, "doc-b", 0, chunk.text, 0, 2, "T")])
        assert _changed(store, mark) == sorted([chunk.doc_id, "doc-b"])

    def test_a_forgotten_foreign_or_malformed_mark_is_refused(
        self, store: ChangeLog, writers: tuple[DocumentStore, StatusStore]
    ) -> None:
        docs, _ = writers
        first = store.mark()
        docs.put_chunks([_chunk(_doc(1), 0)])
        second = store.mark()
        docs.put_chunks([_chunk(_doc(2), 0)])
        store.forget(second)
        assert store.changed_since(first) is None  # what followed it is partly forgotten
        assert _changed(store, second) == [_doc(2).id]
        end = store.mark()
        store.forget(end)
        docs.put_chunks([_chunk(_doc(3), 0)])
        assert _changed(store, end) == [_doc(3).id]
        log = end.partition(":")[0]
        for bad in ("", "nonsense", f"{end}x", f"{log}:-1", f"{log}:", "0" * 32 + end[32:]):
            assert store.changed_since(bad) is None, bad
        store.forget("0" * 32 + end[32:])  # another log's mark: nothing forgotten
        store.forget("nonsense")
        assert _changed(store, end) == [_doc(3).id]

    def test_marks_hold_across_reopen(
        self, store: ChangeLog, writers: tuple[DocumentStore, StatusStore]
    ) -> None:
        docs, _ = writers
        mark = store.mark()
        docs.put_chunks([_chunk(_doc(1), 0)])
        with self.reopened(store) as again:
            assert _changed(again, mark) == [_doc(1).id]


def _changed(log: ChangeLog, mark: str) -> list[str]:
    """The documents ``log`` says changed since ``mark`` (which it must follow)."""
    since = log.changed_since(mark)
    assert since is not None, f"the log does not follow {mark!r}"
    return since[1]


def unit_vectors(n: int, dim: int, seed: int) -> npt.NDArray[np.float32]:
    """``n`` random L2-normalised float32 vectors (deterministic per seed)."""
    x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class VectorIndexContract(_Contract[VectorIndex]):
    """What every :class:`~quillian.stores.protocols.VectorIndex` must do.

    ``store`` must return an empty index of dimension :attr:`dim`. An approximate index
    sets :attr:`recall_threshold` below 1; a lossy storage type raises :attr:`atol`.
    """

    protocol = VectorIndex
    dim: ClassVar[int] = 16
    recall_threshold: ClassVar[float] = 1.0
    atol: ClassVar[float] = 1e-6

    def test_add_get_round_trip(self, store: VectorIndex) -> None:
        x = unit_vectors(50, self.dim, 0)
        store.add(np.arange(100, 150), x)
        assert len(store) == 50 and store.dim == self.dim
        got = store.get([149, 100, 100])
        np.testing.assert_allclose(got, x[[49, 0, 0]], atol=self.atol)
        assert got.dtype == np.float32

    def test_top_k_matches_brute_force(self, store: VectorIndex) -> None:
        x, q = unit_vectors(600, self.dim, 1), unit_vectors(25, self.dim, 2)
        ids = np.arange(600) * 3 + 7
        store.add(ids[:400], x[:400])
        store.flush()
        store.add(ids[400:], x[400:])
        got_ids, got_scores = store.search(q, 10)
        assert got_ids.shape == got_scores.shape == (25, 10) and got_ids.dtype == np.int64
        truth = ids[np.argsort(-(q @ x.T), axis=1)[:, :10]]
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got_ids, truth, strict=True)])
        assert recall >= self.recall_threshold
        expected = np.einsum("qd,qkd->qk", q, x[(got_ids - 7) // 3])
        np.testing.assert_allclose(got_scores, expected, atol=10 * self.atol + 1e-5)
        assert (np.diff(got_scores, axis=1) <= 1e-6).all()

    def test_k_is_capped_and_validated(self, store: VectorIndex) -> None:
        q = unit_vectors(3, self.dim, 3)
        ids, scores = store.search(q, 5)
        assert ids.shape == scores.shape == (3, 0)
        store.add([1, 2], unit_vectors(2, self.dim, 4))
        assert store.search(q, 5)[0].shape == (3, 2)
        assert store.search(q[0], 1)[0].shape == (1, 1)
        for k in (0, -1):
            with pytest.raises(InputError, match="k"):
                store.search(q, k)

    def test_existing_id_is_replaced(self, store: VectorIndex) -> None:
        x = unit_vectors(12, self.dim, 5)
        store.add(np.arange(10), x[:10])
        store.flush()
        store.add([3, 4], x[10:12])
        store.add([4], x[11])
        assert len(store) == 10
        np.testing.assert_allclose(store.get([3, 4]), x[10:12], atol=self.atol)
        ids, _ = store.search(x[10:12], 10)
        assert ids[0, 0] == 3 and ids[1, 0] == 4
        assert all(len(set(row)) == len(row) for row in ids.tolist())

    def test_repeated_id_in_one_batch_keeps_the_last(self, store: VectorIndex) -> None:
        x = unit_vectors(3, self.dim, 6)
        store.add([7, 8, 7], x)
        assert len(store) == 2
        np.testing.assert_allclose(store.get([7]), x[2:], atol=self.atol)

    def test_unknown_id_names_it(self, store: VectorIndex) -> None:
        store.add([1], unit_vectors(1, self.dim, 7))
        with pytest.raises(QuillianError, match="424242") as info:
            store.get([1, 424242])
        assert isinstance(info.value, KeyError)

    def test_dimension_mismatch_is_rejected(self, store: VectorIndex) -> None:
        with pytest.raises(InputError, match=str(self.dim)):
            store.add([1], unit_vectors(1, self.dim + 1, 8))
        with pytest.raises(InputError, match=str(self.dim)):
            store.search(unit_vectors(1, self.dim - 1, 8), 1)

    @pytest.mark.parametrize(
        ("ids", "fix"),
        [([1, -2], None), ([1, 2], "nan"), ([1, 2, 3], None), ([1.5, 2.0], None)],
    )
    def test_bad_batch_changes_nothing(
        self, store: VectorIndex, ids: list[float], fix: str | None
    ) -> None:
        store.add([9], unit_vectors(1, self.dim, 9))
        bad = unit_vectors(2, self.dim, 10)
        if fix == "nan":
            bad[1, 0] = np.nan
        with pytest.raises(InputError):
            store.add(ids, bad)
        assert len(store) == 1
        with pytest.raises(KeyError):
            store.get([1])

    def test_persists_across_reopen(self, store: VectorIndex) -> None:
        x = unit_vectors(40, self.dim, 11)
        store.add(np.arange(30), x[:30])
        store.flush()
        store.add(np.arange(25, 40), x[25:])  # unflushed, with replacements: close flushes
        before = store.search(x[:5], 3)
        with self.reopened(store) as again:
            assert len(again) == 40 and again.dim == self.dim
            np.testing.assert_allclose(again.get(np.arange(40)), x, atol=self.atol)
            np.testing.assert_array_equal(again.search(x[:5], 3)[0], before[0])

    def test_delete_removes_ids_and_ignores_unknown_ones(self, store: VectorIndex) -> None:
        x = unit_vectors(20, self.dim, 13)
        store.add(np.arange(20), x)
        store.flush()
        store.delete([3, 4, 999])
        store.add([21], x[3])  # added after the flush, deleted before the next
        store.delete([21, 5])
        assert len(store) == 17
        np.testing.assert_array_equal(store.ids(), np.setdiff1d(np.arange(20), [3, 4, 5]))
        with pytest.raises(KeyError):
            store.get([4])
        ids, _ = store.search(x[3:6], 17)
        assert not set(ids.ravel().tolist()) & {3, 4, 5, 21}
        store.add([4], x[4])  # a deleted id may come back
        assert store.search(x[4], 1)[0][0, 0] == 4
        with self.reopened(store) as again:
            assert len(again) == 18 and 3 not in again.ids().tolist()
            np.testing.assert_allclose(again.get([4, 19]), x[[4, 19]], atol=self.atol)

    def test_ties_rank_by_the_smaller_id(self, store: VectorIndex) -> None:
        x = unit_vectors(6, self.dim, 14)
        store.add([50, 40, 30], np.stack([x[0], x[0], x[1]]))
        store.flush()
        store.add([20, 10], np.stack([x[0], x[2]]))
        ids, scores = store.search(x[0], 3)
        assert ids[0].tolist() == [20, 40, 50] and len(set(scores[0].tolist())) == 1

    def test_use_after_close_raises(self, store: VectorIndex) -> None:
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.search(unit_vectors(1, self.dim, 12), 1)


# A hand-made graph: nodes a, b, c (entities), d (description), e (chunk).
_NODES = ["a", "b", "c", "d", "e"]
_KINDS = [NodeKind.ENTITY] * 3 + [NodeKind.DESCRIPTION, NodeKind.CHUNK]
# (source, target, kind, weight, relation), deliberately not grouped by source.
_EDGES = [
    ("e", "c", EdgeKind.DESCRIBES, 1.0, -1),
    ("a", "b", EdgeKind.RELATED_TO, 0.5, 0),
    ("c", "e", EdgeKind.DESCRIBED_BY, 0.25, -1),
    ("d", "a", EdgeKind.DESCRIBES, 1.0, -1),
    ("b", "a", EdgeKind.RELATED_TO, 0.5, 0),
    ("a", "d", EdgeKind.DESCRIBED_BY, 1.0, -1),
    ("b", "c", EdgeKind.RELATED_TO, 2.0, 1),
]
# Worked out by hand: rows in node order, each row's edges in the order they were added.
_INDPTR = [0, 2, 4, 5, 6, 7]
_INDICES = [1, 3, 0, 2, 4, 0, 2]  # a->b a->d | b->a b->c | c->e | d->a | e->c
_WEIGHTS = [0.5, 1.0, 0.5, 2.0, 0.25, 1.0, 1.0]
_EDGE_KINDS = [2, 1, 2, 2, 1, 0, 0]
_RELATIONS = [0, -1, 0, 1, -1, -1, -1]


def add_five_node_graph(store: GraphStore) -> None:
    """Add the contract's hand-made five-node graph to ``store``."""
    store.add_nodes(_NODES, _KINDS)
    src, dst, kinds, weights, rels = zip(*_EDGES, strict=True)
    store.add_edges(list(src), list(dst), list(kinds), list(weights), list(rels))


def assert_five_node_graph(snap: GraphSnapshot) -> None:
    """Check ``snap`` against the hand-worked CSR of :func:`add_five_node_graph`."""
    assert (snap.n_nodes, snap.n_edges) == (5, 7)
    assert snap.ids.ids_of(range(5)) == _NODES
    assert snap.ids.index_of("d") == 3 and snap.ids.index_of("zz") == -1
    np.testing.assert_array_equal(snap.kinds, [0, 0, 0, 1, 2])
    np.testing.assert_array_equal(snap.indptr, _INDPTR)
    np.testing.assert_array_equal(snap.indices, _INDICES)
    np.testing.assert_allclose(snap.weights, _WEIGHTS)
    np.testing.assert_array_equal(snap.edge_kinds, _EDGE_KINDS)
    np.testing.assert_array_equal(snap.edge_relations, _RELATIONS)


class GraphStoreContract(_Contract[GraphStore]):
    """What every :class:`~quillian.stores.protocols.GraphStore` must do."""

    protocol = GraphStore

    def test_five_node_graph_csr(self, store: GraphStore) -> None:
        add_five_node_graph(store)
        assert_five_node_graph(store.snapshot())

    def test_snapshot_without_changes_is_the_same(self, store: GraphStore) -> None:
        add_five_node_graph(store)
        store.snapshot()
        assert_five_node_graph(store.snapshot())

    def test_empty_graph(self, store: GraphStore) -> None:
        snap = store.snapshot()
        assert (snap.n_nodes, snap.n_edges) == (0, 0)
        np.testing.assert_array_equal(snap.indptr, [0])

    def test_defaults_and_scalar_kinds(self, store: GraphStore) -> None:
        store.add_nodes(["x", "y"], NodeKind.ENTITY)
        store.add_edges(["x"], ["y"], EdgeKind.RELATED_TO)
        snap = store.snapshot()
        assert snap.weights.tolist() == [1.0] and snap.edge_relations.tolist() == [-1]
        assert snap.edge_kinds.tolist() == [EdgeKind.RELATED_TO]

    def test_node_added_again(self, store: GraphStore) -> None:
        store.add_nodes(["x", "y"], [NodeKind.ENTITY, NodeKind.CHUNK])
        store.add_nodes(["y", "x"], [NodeKind.CHUNK, NodeKind.ENTITY])
        with pytest.raises(InputError, match="'y'"):
            store.add_nodes(["z", "y"], [NodeKind.ENTITY, NodeKind.ENTITY])
        snap = store.snapshot()
        assert snap.ids.ids_of(range(snap.n_nodes)) == ["x", "y"]
        assert snap.kinds.tolist() == [NodeKind.ENTITY, NodeKind.CHUNK]

    def test_edge_to_unknown_node_changes_nothing(self, store: GraphStore) -> None:
        store.add_nodes(["x", "y"], NodeKind.ENTITY)
        with pytest.raises(InputError, match="'ghost'"):
            store.add_edges(["x", "y"], ["y", "ghost"], EdgeKind.RELATED_TO)
        assert store.snapshot().n_edges == 0

    def test_mismatched_edge_columns_are_rejected(self, store: GraphStore) -> None:
        store.add_nodes(["x", "y"], NodeKind.ENTITY)
        with pytest.raises(InputError):
            store.add_edges(["x", "y"], ["y"], EdgeKind.RELATED_TO)
        with pytest.raises(InputError, match="weights"):
            store.add_edges(["x", "y"], ["y", "x"], EdgeKind.RELATED_TO, weights=[1.0])
        with pytest.raises(InputError, match="kinds"):
            store.add_edges(["x"], ["y"], [300])

    def test_reopen_appends_to_the_snapshot(self, store: GraphStore) -> None:
        add_five_node_graph(store)
        store.snapshot()
        self._reopen_and_append(store)

    def test_a_graph_taken_whole(self, store: GraphStore) -> None:
        """A store that takes a graph whole (:class:`SnapshotWriter`) reads it back
        equal, refuses another once it holds one, and, reopened, takes nodes and edges
        after it as after a graph added by id."""
        if not isinstance(store, SnapshotWriter):
            pytest.skip(f"{type(store).__name__} takes no graph whole")
        src, dst, kinds, weights, rels = zip(*_EDGES, strict=True)
        ids = {node: i for i, node in enumerate(_NODES)}
        snapshot = GraphSnapshot.from_edges(
            _NODES, _KINDS, [ids[s] for s in src], [ids[d] for d in dst], kinds, weights, rels
        )
        assert_five_node_graph(store.write_snapshot(snapshot))
        assert_five_node_graph(store.snapshot())
        with pytest.raises(StoreError, match="empty"):
            store.write_snapshot(snapshot)
        assert_five_node_graph(store.snapshot())
        self._reopen_and_append(store)

    def _reopen_and_append(self, store: GraphStore) -> None:
        """Reopened, the five-node graph with a node and two edges added after it."""
        with self.reopened(store) as again:
            assert_five_node_graph(again.snapshot())
            again.add_nodes(["f", "a"], [NodeKind.ENTITY, NodeKind.ENTITY])
            again.add_edges(["f", "a"], ["a", "f"], EdgeKind.RELATED_TO, [3.0, 4.0], [2, 2])
            snap = again.snapshot()
        assert snap.n_nodes == 6 and snap.ids.index_of("f") == 5
        np.testing.assert_array_equal(snap.indptr, [0, 3, 5, 6, 7, 8, 9])
        np.testing.assert_array_equal(snap.indices, [1, 3, 5, 0, 2, 4, 0, 2, 0])
        np.testing.assert_allclose(snap.weights[[2, 8]], [4.0, 3.0])

    def test_close_keeps_what_was_added(self, store: GraphStore) -> None:
        add_five_node_graph(store)
        with self.reopened(store) as again:
            assert_five_node_graph(again.snapshot())

    def test_use_after_close_raises(self, store: GraphStore) -> None:
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.add_nodes(["x"], NodeKind.ENTITY)
