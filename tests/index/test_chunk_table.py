"""The processed chunks as columns: index order, texts read only for the chunks asked
for, and an update of an index that reads the texts of the chunks it adds and of no
other."""

from pathlib import Path

import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.errors import StoreError
from quillian.index import build_index, delete_documents, open_storage
from quillian.index.build import processed_chunks
from quillian.index.chunk_table import ChunkTable, rows_of
from quillian.stores.embedded.sqlite import SqliteDocumentStore
from quillian.stores.protocols import DocStatus
from quillian.testing.corpus import LOVELACE, build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Chunk, Document, key64


def _chunks(doc: str, n: int, title: str = "") -> list[Chunk]:
    return [Chunk(doc, i, f"{doc} text {i}", 0, 9, title or doc.upper()) for i in range(n)]


class Reads:
    """A store's chunk reads, counted."""

    def __init__(self, store: SqliteDocumentStore) -> None:
        self.store, self.ids = store, []

    def __call__(self, ids):
        self.ids.extend(ids)
        return self.store.get_chunks(ids)


def test_a_table_is_in_index_order_and_reads_texts_only_when_asked(tmp_path: Path) -> None:
    with SqliteDocumentStore(tmp_path / "store.sqlite") as store:
        b, a, gone = _chunks("doc-b", 3), _chunks("doc-a", 1500), _chunks("doc-c", 2)
        store.put_chunks([b[2], *gone, b[0], *a, b[1]])  # stored out of order
        table = ChunkTable.read(store, {"doc-a", "doc-b"})
        reads = Reads(store)
        table._read = reads
        ordered = [*a, *b]
        assert table.ids == [c.id for c in ordered]
        assert (table.doc_ids, table.indexes) == (
            [c.doc_id for c in ordered],
            [c.index for c in ordered],
        )
        assert table.titles == [c.title for c in ordered] and len(table) == 1503
        assert reads.ids == []  # no text read yet
        assert table.in_index_order()
        assert table[1500] == b[0] and table[-1] == b[2] and table[1:3] == a[1:3]
        assert table.at([1502, 0]) == [b[2], a[0]]
        assert reads.ids == [b[0].id, b[2].id, a[1].id, a[2].id, b[2].id, a[0].id]
        reads.ids.clear()
        assert list(table) == ordered  # iterated a page at a time
        assert reads.ids == table.ids
        assert table.rows.tolist() == [key64(c.id) for c in ordered]
        store.delete_documents(["doc-b"])
        with pytest.raises(
            StoreError, match=f"chunk {b[0].id} is listed but not in the document store"
        ):
            table.at([1500])
        assert ChunkTable.read(store, set()).ids == []


def test_a_table_of_chunks_in_hand() -> None:
    chunks = [*_chunks("doc-b", 2), *_chunks("doc-a", 1)]
    table = ChunkTable.of(chunks)
    assert ChunkTable.of(table) is table
    assert list(table) == chunks and table.ids == [c.id for c in chunks]
    assert not table.in_index_order()  # doc-b before doc-a
    assert ChunkTable.of(chunks[:2]).in_index_order()
    assert not ChunkTable.of([chunks[0], chunks[0]]).in_index_order()  # a place twice


def test_the_processed_chunks_are_those_of_processed_documents(tmp_path: Path) -> None:
    build_tiny(tmp_path / "index", LOVELACE)
    with open_storage(tmp_path / "index") as storage:
        every = sorted(
            (c for c in storage.documents.iter_chunks()), key=lambda c: (c.doc_id, c.index)
        )
        table = processed_chunks(storage)
        assert list(table) == every
        storage.status.set_status([every[0].doc_id], DocStatus.FAILED, error="x")
        assert every[0].id not in processed_chunks(storage).ids


CORPUS = {
    **LOVELACE,
    "Luigi Menabrea": "Luigi Menabrea was an Italian general who wrote on the engine.",
}


def test_an_update_reads_the_texts_of_the_chunks_it_adds_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add reads the new document's chunks (linked, keyed, embedded, indexed for
    BM25, written to the tables) and no other chunk's text; a delete reads none. The
    new title occurs in no other text, so no other chunk is linked again."""
    titles = list(CORPUS)
    location = tmp_path / "index"
    build_tiny(location, CORPUS, titles=titles[:-1])
    read: list[str] = []
    original = SqliteDocumentStore.get_chunks

    def counted(self: SqliteDocumentStore, ids: list[str]) -> list[Chunk | None]:
        read.extend(ids)
        return original(self, ids)

    monkeypatch.setattr(SqliteDocumentStore, "get_chunks", counted)
    new = Document(CORPUS[titles[-1]], titles[-1])
    build_index(
        [new],
        location,
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
    )
    with open_storage(location) as storage:
        added = {c.id for c in storage.documents.chunks_of(new.id)}
    assert read and set(read) == added
    read.clear()
    delete_documents(
        location, [new.id], extractor=TitleLinkExtractor(CORPUS), embedder=KeywordEmbedder()
    )
    assert read == []


def test_the_ids_among_a_set_come_in_the_tables_order_by_keys_or_by_a_pass() -> None:
    """A set's ids the table holds, in the table's order: found by their keys where
    the table holds keys (an id whose key another id shares not taken for it), else by
    a pass over the ids; an id the table lacks left out."""
    ids = [f"chunk-{i}" for i in range(8)]
    columns = (ids, ["d"] * 8, list(range(8)), [""] * 8)
    wanted = {"chunk-5", "chunk-1", "chunk-9"}
    unkeyed = ChunkTable(*columns, lambda asked: [None] * len(asked))
    assert unkeyed.ids_among(wanted) == ["chunk-1", "chunk-5"]
    rows = rows_of(ids)
    rows[6] = rows[5]  # chunk-6 shares chunk-5's key
    keyed = ChunkTable(*columns, lambda asked: [None] * len(asked), rows)
    assert keyed.ids_among(wanted) == ["chunk-1", "chunk-5"]
    assert keyed.ids_among(set()) == []
