"""The processed chunks kept between builds: patched from the store's change log, the
same table as one read whole after any sequence of changes, and read whole whenever
the catalog cannot be trusted."""

import logging
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from quillian.index import artifacts, blocks, chunk_catalog
from quillian.index.chunk_catalog import CATALOG_FILE, processed_chunks
from quillian.index.chunk_table import ChunkTable
from quillian.index.storage import STORE_DB, Storage, open_storage
from quillian.stores.embedded.sqlite import SqliteDocumentStore
from quillian.stores.protocols import DocStatus
from quillian.types import Chunk, key64


def _chunks(doc: str, n: int, title: str) -> list[Chunk]:
    return [Chunk(doc, i, f"{doc} text {i} {title}", 0, 9, title) for i in range(n)]


def _whole(storage: Storage) -> ChunkTable:
    processed = set(storage.status.ids_with_status(DocStatus.PROCESSED))
    return ChunkTable.read(storage.documents, processed)


def _same(table: ChunkTable, storage: Storage) -> None:
    whole = _whole(storage)
    assert table.ids == whole.ids and table.doc_ids == whole.doc_ids
    assert table.indexes == whole.indexes and table.titles == whole.titles
    assert table.rows.tolist() == [key64(i) for i in whole.ids]
    assert list(table) == list(whole)
    # what a patched table carries over instead of passing over every title again
    assert table.qualified.tolist() == whole.qualified.tolist()
    assert table.in_index_order() == whole.in_index_order()


def _add(storage: Storage, doc: str, n: int, title: str, status: DocStatus) -> None:
    storage.documents.put_chunks(_chunks(doc, n, title))
    storage.status.set_status([doc], status)


class HeadReads:
    """Counts passes over every stored chunk's head."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.passes = 0
        original = SqliteDocumentStore.iter_chunk_heads

        def counted(store: SqliteDocumentStore):  # type: ignore[no-untyped-def]
            self.passes += 1
            return original(store)

        monkeypatch.setattr(SqliteDocumentStore, "iter_chunk_heads", counted)


@pytest.mark.parametrize("size", [blocks.SIZE, 4], ids=["blocks", "small-blocks"])
def test_any_sequence_of_changes_gives_the_table_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    monkeypatch.setattr(blocks, "SIZE", size)  # a patch within one block, or over many
    rng = random.Random(7)
    reads = HeadReads(monkeypatch)
    with open_storage(tmp_path / "index", create=True) as storage:
        for d in range(400):
            title = f"Title {d}" + (" (band)" if d % 3 == 0 else "")
            _add(storage, f"doc-{d:04d}", rng.randint(1, 3), title, DocStatus.PROCESSED)
        previous = processed_chunks(storage)  # no catalog: read whole, then kept
        _same(previous, storage)
        assert previous.catalog is not None and previous.catalog.since is None
        assert (tmp_path / "index" / CATALOG_FILE).exists()
        patched = carried = 0
        for step in range(60):
            doc = f"doc-{rng.randrange(500):04d}"
            kind = rng.choice(["add", "retitle", "delete", "fail", "processing", "none"])
            if kind == "add":
                title = f"T{step}" + (" (film) " if step % 2 else "")
                _add(storage, doc, rng.randint(1, 4), title, DocStatus.PROCESSED)
            elif kind == "retitle":  # an upsert: the chunks keep their ids, a new title
                old = storage.documents.chunks_of(doc)
                storage.documents.put_chunks(
                    [
                        Chunk.stored(c.id, c.doc_id, c.index, c.text, 0, 9, f"R{step} (x{i})")
                        for i, c in enumerate(old)
                    ]
                )
            elif kind == "delete":
                storage.documents.delete_documents([doc])
                storage.status.delete([doc])
            elif kind == "fail":  # chunks stored, the document not processed
                _add(storage, doc, 2, f"F{step}", DocStatus.FAILED)
            elif kind == "processing":  # a status change alone
                storage.status.set_status([doc], DocStatus.PROCESSING)
            passes = reads.passes
            previous.titles_by_id()  # made for the first table, then carried
            titles = previous.titles_box[0]
            table = processed_chunks(storage)
            patched += reads.passes == passes  # not read whole
            _same(table, storage)
            _delta_between(previous, table)
            # the titles by id made for the table before are moved to this one, patched
            carried += table.titles_box[0] is titles
            by_id = table.titles_by_id()
            assert dict(by_id) == dict(zip(table.ids, table.titles, strict=True))
            assert list(by_id) == table.ids and len(by_id) == len(table)
            _columns_as_made(tmp_path / "index" / CATALOG_FILE, table)
            if step % 10 == 9:  # as a new process: the file read, its columns carried
                artifacts.write_kept()  # what this process kept, written as it exits
                monkeypatch.setattr(artifacts, "_REMEMBERED", type(artifacts._REMEMBERED)())
            previous = table
        assert patched == 60 and carried == 55  # but after each of 5 reads of the file
        with sqlite3.connect(tmp_path / "index" / STORE_DB) as conn:
            assert conn.execute("SELECT count(*) FROM doc_changes").fetchone() == (0,)


def _columns_as_made(path: Path, table: ChunkTable) -> None:
    """The columns kept for ``table`` (patched where it was) are its own, in this
    process and in the file."""
    kept = artifacts.recall(path)  # once written
    assert kept is not None and kept.table.ids == table.ids and kept.table.titles == table.titles
    assert kept.table.doc_ids == table.doc_ids and kept.table.indexes == table.indexes
    made = chunk_catalog._arrays(table)
    artifacts.write_kept(path)  # as this process leaves it
    with np.load(path) as stored:
        for name, array in made.items():
            assert stored[name].tobytes() == array.tobytes(), name


def _delta_between(previous: ChunkTable, table: ChunkTable) -> None:
    """``table``'s catalog changes name what differs from ``previous``, its titles."""
    assert previous.catalog is not None and table.catalog is not None
    assert table.catalog.kept is not None
    assert table.catalog.since == previous.catalog.kept
    was = dict(zip(previous.ids, previous.titles, strict=True))
    now = dict(zip(table.ids, table.titles, strict=True))
    before, after = table.catalog.before, table.catalog.after
    assert before.items() <= was.items() and after.items() <= now.items()
    same = (was.keys() | now.keys()) - before.keys() - after.keys()
    assert all(was.get(i) == now.get(i) for i in same)
    assert all(i in was and i in now for i in same)
    # where the rows went: the kept ones as they were, the others the changed documents'
    moves = table.catalog.moves
    assert moves is not None and (moves.before, moves.after) == (len(previous), len(table))
    for start, end, to in moves.spans:
        assert previous.ids[start:end] == table.ids[to : to + end - start]
    assert {table.ids[i] for i in moves.added()} == after.keys()
    assert {previous.ids[i] for i in moves.gone()} == before.keys()
    added = moves.added()
    assert moves.carry(previous.rows, table.rows[added]).tolist() == table.rows.tolist()
    moved = moves.moved(np.arange(-1, len(previous)))
    assert moved[0] == -1 and set(np.flatnonzero(moved[1:] < 0).tolist()) == set(moves.gone())
    assert all(previous.ids[i] == table.ids[j] for i, j in enumerate(moved[1:]) if j >= 0)
    assert moves.every().tolist() == moved[1:].tolist()


def test_a_repair_reads_every_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = HeadReads(monkeypatch)
    with open_storage(tmp_path / "index", create=True) as storage:
        _add(storage, "doc-a", 2, "A", DocStatus.PROCESSED)
        processed_chunks(storage)
        passes = reads.passes
        table = processed_chunks(storage, whole=True)
        assert reads.passes == passes + 1
        _same(table, storage)


def test_many_documents_changed_are_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = HeadReads(monkeypatch)
    with open_storage(tmp_path / "index", create=True) as storage:
        for d in range(50):
            _add(storage, f"doc-{d:03d}", 1, "T", DocStatus.PROCESSED)
        processed_chunks(storage)
        for d in range(50, 80):  # more than the share one reads document by document
            _add(storage, f"doc-{d:03d}", 1, "T", DocStatus.PROCESSED)
        passes = reads.passes
        table = processed_chunks(storage)
        assert reads.passes == passes + 1
        _same(table, storage)


def test_a_catalog_that_cannot_be_trusted_is_read_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    location = tmp_path / "index"
    catalog = location / CATALOG_FILE
    with open_storage(location, create=True) as storage:
        _add(storage, "doc-a", 2, "A", DocStatus.PROCESSED)
        _add(storage, "doc-b", 1, "B", DocStatus.PROCESSED)
        processed_chunks(storage)
        artifacts.settle(catalog)  # written in a thread of its own
        with np.load(catalog) as kept:
            arrays = dict(kept)
        tampered = bytes(arrays["titles"]).replace(b"A", b"Z")
        np.savez(catalog, **{**arrays, "titles": np.frombuffer(tampered, np.uint8)})
        with caplog.at_level(logging.WARNING):
            _same(processed_chunks(storage), storage)
        assert "fails its checksum" in caplog.text
        artifacts.settle(catalog)
        catalog.write_bytes(b"not a catalog")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            _same(processed_chunks(storage), storage)
        assert "does not read" in caplog.text
        _same(processed_chunks(storage), storage)  # written anew: read without a word
    artifacts.settle(catalog)
    kept = catalog.read_bytes()
    (location / STORE_DB).unlink()  # a new store at the same place is another log
    with open_storage(location, create=True) as storage:
        _add(storage, "doc-c", 1, "C", DocStatus.PROCESSED)
        catalog.write_bytes(kept)
        _same(processed_chunks(storage), storage)
        assert processed_chunks(storage).ids == [c.id for c in _chunks("doc-c", 1, "C")]


def test_a_catalog_kept_with_a_blake2b_checksum_is_still_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A catalog kept before its checksum was XXH3 carries BLAKE2b's: checked with it,
    and used without a warning."""
    location = tmp_path / "index"
    catalog = location / CATALOG_FILE
    with open_storage(location, create=True) as storage:
        _add(storage, "doc-a", 2, "A", DocStatus.PROCESSED)
        processed_chunks(storage)
        artifacts.settle(catalog)  # written in a thread of its own
        with np.load(catalog) as kept:
            arrays = dict(kept)
        version, mark, _, checksum = (str(v) for v in arrays["meta"])
        assert version == chunk_catalog._VERSION
        old = chunk_catalog._checksum(mark, arrays, "blake2b")
        assert old != checksum
        # a catalog of version 1: its digest was its checksum
        meta = np.array([chunk_catalog._VERSION_1, mark, old])
        np.savez(catalog, **{**arrays, "meta": meta})
        with caplog.at_level(logging.WARNING):
            _same(processed_chunks(storage), storage)
        assert not caplog.text


def test_a_title_holding_a_nul_is_read_whole_each_time(tmp_path: Path) -> None:
    with open_storage(tmp_path / "index", create=True) as storage:
        _add(storage, "doc-a", 1, "A\0B", DocStatus.PROCESSED)
        _same(processed_chunks(storage), storage)
        assert not (tmp_path / "index" / CATALOG_FILE).exists()
        _add(storage, "doc-b", 1, "B", DocStatus.PROCESSED)
        _same(processed_chunks(storage), storage)


def test_an_empty_index_keeps_an_empty_catalog(tmp_path: Path) -> None:
    with open_storage(tmp_path / "index", create=True) as storage:
        assert processed_chunks(storage).ids == []
        assert processed_chunks(storage).ids == []
        _add(storage, "doc-a", 1, "", DocStatus.PROCESSED)  # an empty title
        _same(processed_chunks(storage), storage)
        _same(processed_chunks(storage), storage)


def test_a_catalog_this_process_kept_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table this process kept is patched without reading the file (its texts read
    through the store open now); with the process's memory gone, the file gives the
    same table."""
    loads: list[Path] = []
    real = chunk_catalog.load_arrays

    def counted(path: Path, *args: object) -> object:
        loads.append(path)
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(chunk_catalog, "load_arrays", counted)
    for d in range(20):
        with open_storage(tmp_path / "index", create=True) as storage:
            _add(storage, f"doc-{d:03d}", 2, f"T{d}", DocStatus.PROCESSED)
            _same(processed_chunks(storage), storage)
    assert len(loads) == 1  # the first build: no catalog yet
    artifacts.write_kept()  # what this process kept, written as it exits
    monkeypatch.setattr(artifacts, "_REMEMBERED", type(artifacts._REMEMBERED)())
    with open_storage(tmp_path / "index") as storage:
        _add(storage, "doc-new", 1, "N", DocStatus.PROCESSED)
        _same(processed_chunks(storage), storage)
    assert len(loads) == 2


def test_a_patched_table_knows_its_order_and_qualified_titles(tmp_path: Path) -> None:
    """Carried over from the kept table where that was in order, compared again where it
    was not: a document stored twice at one place and then deleted leaves a table in
    order."""
    with open_storage(tmp_path / "index", create=True) as storage:
        _add(storage, "doc-a", 2, "Alpha (band)", DocStatus.PROCESSED)
        _add(storage, "doc-c", 1, "Gamma", DocStatus.PROCESSED)
        assert processed_chunks(storage).qualified.tolist() == [0, 1]
        _add(storage, "doc-b", 2, "Beta (film)", DocStatus.PROCESSED)
        _add(storage, "doc-b", 2, "Beta two", DocStatus.PROCESSED)  # other texts, same places
        table = processed_chunks(storage)
        assert table.catalog is not None and table.catalog.since is not None  # patched
        _same(table, storage)
        assert not table.in_index_order() and len(table.qualified) == 4
        storage.documents.delete_documents(["doc-b"])
        storage.status.delete(["doc-b"])
        table = processed_chunks(storage)
        _same(table, storage)
        assert table.in_index_order() and table.qualified.tolist() == [0, 1]


def test_a_catalog_a_killed_process_did_not_write_is_read_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Updates in one process write the catalog's file only once they pause: a process
    killed before leaves an earlier build's, which the log no longer follows (it forgot
    what preceded the last mark kept): the next process reads the table whole, the
    same table."""
    monkeypatch.setattr(artifacts, "LATER_S", 3600.0)  # no pause within the test
    path = tmp_path / "index" / CATALOG_FILE
    for d in range(6):
        with open_storage(tmp_path / "index", create=True) as storage:
            _add(storage, f"doc-{d:03d}", 2, f"T{d}", DocStatus.PROCESSED)
            _same(processed_chunks(storage), storage)
    written = path.read_bytes()
    assert artifacts._LATER.due  # the last builds' catalog not written yet
    monkeypatch.setattr(artifacts, "_LATER", artifacts._Later())  # killed
    monkeypatch.setattr(artifacts, "_REMEMBERED", type(artifacts._REMEMBERED)())
    assert path.read_bytes() == written
    with open_storage(tmp_path / "index") as storage:
        _add(storage, "doc-new", 1, "N", DocStatus.PROCESSED)
        table = processed_chunks(storage)
        _same(table, storage)
        assert table.catalog is not None and table.catalog.since is None  # read whole


def test_a_patch_makes_again_only_the_blocks_its_documents_fall_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each column of a patched table shares with the last table every block that no
    changed document's rows fall in: an update costs the blocks it touches, not a copy
    of every row."""
    monkeypatch.setattr(blocks, "SIZE", 16)
    with open_storage(tmp_path / "index", create=True) as storage:
        for d in range(0, 600, 2):
            _add(storage, f"doc-{d:04d}", 2, f"T{d}", DocStatus.PROCESSED)
        table = processed_chunks(storage)
        for change in ("add", "delete", "add"):
            if change == "add":
                _add(storage, "doc-0301", 3, "New", DocStatus.PROCESSED)
            else:
                storage.documents.delete_documents(["doc-0301"])
                storage.status.delete(["doc-0301"])
            patched = processed_chunks(storage)
            assert patched.catalog is not None and patched.catalog.since is not None
            _same(patched, storage)
            for name in ("ids", "doc_ids", "indexes", "titles"):
                old, new = getattr(table, name), getattr(patched, name)
                assert isinstance(old, blocks.Blocks) and isinstance(new, blocks.Blocks)
                shared = {id(b) for b in old.blocks} & {id(b) for b in new.blocks}
                assert len(new.blocks) - len(shared) <= 2, name
                assert len(old.blocks) - len(shared) <= 2, name
            table = patched
