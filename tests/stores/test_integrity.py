"""The stores record what they write and refuse what changed since: the exact vector
index (checked at open, a large file on its first use, and never copied on into a new
generation), the FAISS index, the graph snapshot, and SQLite's own check of a
database."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from quillian.errors import IndexDamagedError, StoreError
from quillian.stores import integrity
from quillian.stores import snapshot as snapshot_module
from quillian.stores.embedded import vectors as exact_vectors
from quillian.stores.embedded.sqlite import SqliteDocumentStore, quick_check
from quillian.stores.embedded.vectors import ExactVectorIndex, FaissHNSWIndex
from quillian.stores.recent import Recent
from quillian.stores.snapshot import GraphSnapshot
from quillian.types import Document

DIM = 8


def vector_index(directory: Path, n: int = 50) -> np.ndarray:
    """An exact index of ``n`` random unit vectors at ``directory``; the vectors."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with ExactVectorIndex(directory, DIM) as index:
        index.add(np.arange(n), vectors)
    return vectors


def set_row(path: Path, row: int, value: float) -> None:
    matrix = np.load(path, mmap_mode="r+")
    matrix[row] = value
    matrix.flush()
    del matrix


def test_a_scribbled_vectors_file_is_refused_at_open(tmp_path: Path) -> None:
    vector_index(tmp_path / "v")
    path = tmp_path / "v" / "vectors-000001.npy"
    set_row(path, 3, 10.0)
    with pytest.raises(IndexDamagedError) as info:
        ExactVectorIndex(tmp_path / "v")
    assert str(info.value) == f"{path} is damaged (checksum mismatch)"
    assert info.value.name == "vectors-000001.npy"


def test_a_truncated_ids_file_is_refused_with_its_sizes(tmp_path: Path) -> None:
    vector_index(tmp_path / "v")
    path = tmp_path / "v" / "ids-000001.npy"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(IndexDamagedError, match=f"truncated: expected {size} bytes, found 100"):
        ExactVectorIndex(tmp_path / "v")


def test_a_large_file_is_checked_on_first_read_and_never_copied_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exact_vectors, "HASH_AT_OPEN", 0)
    vectors = vector_index(tmp_path / "v")
    set_row(tmp_path / "v" / "vectors-000001.npy", 3, 10.0)
    index = ExactVectorIndex(tmp_path / "v")  # sizes check out: opens
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):
        index.search(vectors[:1], 5)
    # an update that keeps the damaged segment does not hash it (that would cost the
    # whole collection) and leaves it recorded as it was: the next search finds it
    with ExactVectorIndex(tmp_path / "v") as update:
        update.add([99], vectors[:1])
        assert 99 in update.ids()
    assert (tmp_path / "v" / "vectors-000002.npy").exists()
    with pytest.raises(IndexDamagedError, match=r"vectors-000001\.npy.*checksum mismatch"):
        ExactVectorIndex(tmp_path / "v").search(vectors[:1], 5)
    # one whose flush would merge the damaged rows into a new segment, under a fresh
    # checksum: refused, nothing written
    merging = ExactVectorIndex(tmp_path / "v")
    merging.add(np.arange(100, 200), np.repeat(vectors[:1], 100, axis=0))
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):
        merging.flush()
    assert sorted(p.name for p in (tmp_path / "v").glob("*.npy")) == [
        "ids-000001.npy",
        "ids-000002.npy",
        "vectors-000001.npy",
        "vectors-000002.npy",
    ]


def test_an_index_written_before_the_records_opens(tmp_path: Path) -> None:
    vectors = vector_index(tmp_path / "v")
    manifest = tmp_path / "v" / "index.json"
    meta = json.loads(manifest.read_text())
    del meta["files"]
    manifest.write_text(json.dumps(meta))
    ids, _ = ExactVectorIndex(tmp_path / "v").search(vectors[:1], 1)
    assert ids.tolist() == [[0]]


def snapshot(directory: Path) -> GraphSnapshot:
    graph = GraphSnapshot.from_edges(
        ["a", "b", "c", "d"], [0, 0, 0, 2], [0, 1, 2, 3], [1, 2, 3, 0], 2, [1.0, 2.0, 3.0, 4.0]
    )
    graph.save(directory)
    return graph


@pytest.mark.parametrize(
    "name",
    ["weight_codes", "weight_table", "relation_mask", "indices", "indptr", "kinds", "ids_blob"],
)
def test_a_scribbled_snapshot_array_is_refused(tmp_path: Path, name: str) -> None:
    snapshot(tmp_path / "g")
    path = tmp_path / "g" / f"{name}.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # the last value: the header still parses
    path.write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError) as info:
        GraphSnapshot.load(tmp_path / "g")
    assert str(info.value) == f"{path} is damaged (checksum mismatch)"


def test_a_truncated_snapshot_array_without_records_is_one_line(tmp_path: Path) -> None:
    """A snapshot of format 1 saved before files were recorded (each array as it is)."""
    graph = snapshot(tmp_path / "g")
    for name in snapshot_module._ARRAYS:
        np.save(tmp_path / "g" / f"{name}.npy", getattr(graph, name))
    marker = tmp_path / "g" / "snapshot.json"
    marker.write_text(json.dumps({"format": 1, "n_nodes": 4, "n_edges": 4}))
    assert GraphSnapshot.load(tmp_path / "g").weights.tolist() == [1.0, 2.0, 3.0, 4.0]
    path = tmp_path / "g" / "weights.npy"
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(IndexDamagedError) as info:
        GraphSnapshot.load(tmp_path / "g")
    message = str(info.value)
    assert message.startswith(f"{path} is damaged (not a readable array: ") and "\n" not in message


def test_a_snapshot_written_whole_loads_equal(tmp_path: Path) -> None:
    graph = snapshot(tmp_path / "g")
    loaded = GraphSnapshot.load(tmp_path / "g")
    assert np.array_equal(loaded.weights, graph.weights)
    assert np.array_equal(loaded.indices, graph.indices)


def damaged_database(path: Path) -> None:
    with SqliteDocumentStore(path) as store:
        store.put_documents([Document(f"text {i} " * 50, f"title {i}") for i in range(200)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    at = len(data) // 2 // 4096 * 4096
    data[at : at + 64] = np.random.default_rng(3).integers(0, 256, 64, np.uint8).tobytes()
    path.write_bytes(bytes(data))


def test_quick_check_names_a_damaged_database_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    damaged_database(path)
    with pytest.raises(IndexDamagedError) as info:
        quick_check(path)
    message = str(info.value)  # "integrity check failed: ..." or "... malformed"
    assert message.startswith(f"{path} is damaged (") and "\n" not in message
    assert message.endswith(f"after moving {path.name} aside")


def test_quick_check_passes_a_sound_database(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with SqliteDocumentStore(path) as store:
        store.put_documents([Document("text", "title")])
    quick_check(path)


def test_a_damaged_error_is_a_store_error() -> None:
    assert issubclass(IndexDamagedError, StoreError)


def test_a_scribbled_hnsw_graph_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    rng = np.random.default_rng(0)
    with FaissHNSWIndex(tmp_path / "h", DIM) as index:
        index.add(np.arange(40), rng.normal(size=(40, DIM)).astype(np.float32))
    path = tmp_path / "h" / "hnsw-000001.faiss"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError, match=r"hnsw-000001\.faiss is damaged \(checksum"):
        FaissHNSWIndex(tmp_path / "h")


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files :func:`integrity.file_digest` reads from now on."""
    reads: list[Path] = []
    digest = integrity.file_digest

    def counted(p: Path, *algorithm: str) -> str:
        reads.append(p)
        return digest(p, *algorithm)

    monkeypatch.setattr(integrity, "file_digest", counted)
    return reads


def test_a_record_takes_the_digest_just_computed_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "table.bin"
    path.write_bytes(b"a" * 5000)
    first = integrity.file_digest(path)
    reads = counted_reads(monkeypatch)
    assert integrity.file_record(path) == {"size": 5000, integrity.ALGORITHM: first}
    assert reads == []  # remembered by the file's stamp
    with path.open("r+b") as handle:  # the same size, other bytes
        handle.write(b"b")
    changed = integrity.file_record(path)
    assert reads == [path] and changed[integrity.ALGORITHM] != first
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):  # a check reads
        integrity.check_digest(path, {"size": 5000, integrity.ALGORITHM: first})


@pytest.mark.parametrize(
    "array",
    [
        np.arange(1000, dtype=np.int32),
        np.array([True, False, True]),
        np.array([b"ab", b"abcde"], dtype=np.bytes_),
        np.linspace(0, 1, 7, dtype=np.float32).reshape(7, 1),
        np.zeros((3, 4), np.int64),
        np.zeros(0, np.int64),
    ],
    ids=["int32", "bool", "bytes", "float-column", "matrix", "empty"],
)
def test_an_array_saved_is_recorded_from_memory_as_the_file_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, array: np.ndarray
) -> None:
    path = tmp_path / "array.npy"
    integrity.save_recorded(path, array)
    reads = counted_reads(monkeypatch)
    record = integrity.file_record(path)
    assert reads == []  # hashed as it was saved: its data not read back
    assert record == {"size": path.stat().st_size, integrity.ALGORITHM: read_digest(path)}


def read_digest(path: Path) -> str:
    """``path``'s digest, read whole."""
    digest = integrity.HASHES[integrity.ALGORITHM]()
    digest.update(path.read_bytes())
    return digest.hexdigest()


def test_an_array_numpy_writes_otherwise_is_read_for_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "array.npy"
    strided = np.arange(40, dtype=np.int64)[::3]  # numpy writes it in order, not as it lies
    integrity.save_recorded(path, strided)
    reads = counted_reads(monkeypatch)
    assert integrity.file_record(path)[integrity.ALGORITHM] == read_digest(path)
    assert reads == [path]


def test_a_check_told_known_takes_the_remembered_digest_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "array.npy"
    integrity.save_recorded(path, np.arange(500, dtype=np.int32))
    records = {"array.npy": integrity.file_record(path)}
    reads = counted_reads(monkeypatch)
    integrity.verify_files(tmp_path, records, known=True)
    assert reads == []
    integrity.verify_files(tmp_path, records)  # a check not told reads
    assert reads == [path]
    with path.open("r+b") as handle:  # the same size, other bytes: another stamp
        handle.seek(-4, 2)
        handle.write(b"zzzz")
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):
        integrity.verify_files(tmp_path, records, known=True)


def test_a_record_made_with_blake2b_is_checked_with_blake2b(tmp_path: Path) -> None:
    path = tmp_path / "table.bin"
    path.write_bytes(b"a" * 5000)
    older = {"size": 5000, "blake2b": hashlib.blake2b(b"a" * 5000, digest_size=16).hexdigest()}
    integrity.check_digest(path, older)
    assert integrity.file_record(path) == {"size": 5000, "xxh3_128": integrity.file_digest(path)}
    with path.open("r+b") as handle:
        handle.write(b"b")
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):
        integrity.check_digest(path, older)
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):
        integrity.check_digest(path, {"size": 5000, **integrity.file_record(path), **older})


def test_a_kept_checksum_matches_under_the_current_hash_or_one_before_it():
    asked: list[str] = []

    def compute(algorithm: str) -> str:
        asked.append(algorithm)
        return f"{algorithm}-digest"

    assert integrity.digest_matches("xxh3_128-digest", compute) and asked == ["xxh3_128"]
    assert integrity.digest_matches("blake2b-digest", compute)
    assert not integrity.digest_matches("other", compute)
    assert asked[1:] == ["xxh3_128", "blake2b", "xxh3_128", "blake2b"]


def test_a_large_file_this_process_read_is_not_read_again_on_a_later_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A served index opens each update's generation and checks its large files on the
    first search: a file this process hashed and that has not changed since takes the
    digest it remembered; an explicit check (a repair's) reads it, and a file written
    since is read."""
    import time

    monkeypatch.setattr(exact_vectors, "HASH_AT_OPEN", 0)
    vectors = vector_index(tmp_path / "v")
    path = tmp_path / "v" / "vectors-000001.npy"
    reads: list[Path] = []
    real = integrity.file_digest

    def counted(file: Path, *args: object) -> str:
        reads.append(Path(file))
        return real(file, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(integrity, "file_digest", counted)
    monkeypatch.setattr(integrity, "_KNOWN", Recent(integrity._KNOWN.kept))  # another process
    ExactVectorIndex(tmp_path / "v").search(vectors[:1], 5)
    assert path in reads  # read once in this process
    reads.clear()
    ExactVectorIndex(tmp_path / "v").search(vectors[:1], 5)
    assert path not in reads  # then remembered
    ExactVectorIndex(tmp_path / "v").verify()
    assert path in reads  # an explicit check reads it
    time.sleep(0.05)  # past the file system's clock tick: the write changes the stamp
    set_row(path, 3, 10.0)
    with pytest.raises(IndexDamagedError, match="checksum mismatch"):
        ExactVectorIndex(tmp_path / "v").search(vectors[:1], 5)
