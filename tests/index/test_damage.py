"""A damaged index file gives one line naming it and how to rebuild it, never a changed
ranking: a same-size scribble or a truncation of every kind of file (graph arrays,
vectors, BM25 data, each table), through ``open_index``, the CLI and the HTTP server;
a damaged ``store.sqlite`` is named before a build writes over it; indexing the corpus
again rebuilds what was damaged; an index written before the checksums still opens."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from quillian.cli.main import main
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.errors import IndexDamagedError
from quillian.index import open_index, open_storage
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.stores import integrity
from quillian.stores.embedded import vectors as exact_vectors
from quillian.testing.corpus import build_tiny
from quillian.testing.server import running


def people(n: int = 90) -> dict[str, str]:
    """People and towns that mention each other: a graph with links to rank over."""
    rows = {}
    for i in range(n):
        if i % 3:
            rows[f"Person {i}"] = (
                f"Person {i} was taught by Person {(i * 7) % n} in Town {i % 20}. "
                f"Person {i} later met Person {(i + 5) % n}."
            )
        else:
            rows[f"Town {i // 3}"] = f"Town {i // 3} lies near Town {(i // 3 + 1) % 30}."
    return rows


QUESTIONS = tuple(f"Who taught Person {i}?" for i in range(1, 40, 4))
METHODS = ("ppr", "dense", "bm25", "sa")
#: The graph tables' database, patched where it is: SQLite checks it (``quick_check``)
#: where it changed since the build, and names the damage in its words.
TABLES = "tables/graph.sqlite"


#: One file of every kind the index stores beside ``store.sqlite``.
FILES = (
    "graph/weight_codes.npy",
    "graph/relation_values.npy",
    "graph/indices.npy",
    "graph/indptr.npy",
    "graph/ids_numbers.npy",
    "vectors/chunks/vectors-000001.npy",
    "vectors/chunks/ids-000001.npy",
    "vectors/texts/vectors-000001.npy",
    "bm25/seg-000001/rows.npy",
    "bm25/seg-000001/term_bytes.npy",
    "bm25/manifest.json",
    TABLES,
    "tables/page_entities.npy",
    "tables/by_entity_order.npy",
    "tables/description_rows.npy",
    "tables/relation_rows.npy",
    "tables/relation_subject.npy",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "idx"
    build_tiny(path, people())
    return path


@pytest.fixture(scope="module")
def clean(built: Path) -> dict[str, list[list[str]]]:
    return rankings(built)


@pytest.fixture
def index(built: Path, tmp_path: Path) -> Path:
    """A fresh copy of the built index, to damage."""
    target = tmp_path / "idx"
    shutil.copytree(built, target)
    return target


def rankings(location: Path) -> dict[str, list[list[str]]]:
    """Each method's top 10 chunk ids for each question."""
    context = open_index(location, KeywordEmbedder()).context
    return {
        method: [
            [p.chunk_id for p in make_retriever(context, method).retrieve(q, 10).passages]
            for q in QUESTIONS
        ]
        for method in METHODS
    }


def scribble(path: Path) -> None:
    """Flip the lowest bit of 16 bytes three quarters into ``path``: the same size, still
    parseable where the file is text. A SQLite database is scribbled where the page
    there begins: SQLite's check (``quick_check``) finds damage to the pages' structure,
    not to the bytes of a value, which a scribble three quarters in may hit, depending
    on how the file's pages fall."""
    data = bytearray(path.read_bytes())
    at = len(data) * 3 // 4
    if path.suffix == ".sqlite":
        at -= at % 4096  # SQLite's default page size, which the tables keep
    for i in range(at, min(at + 16, len(data))):
        data[i] ^= 1
    path.write_bytes(bytes(data))


def truncate(path: Path) -> tuple[int, int]:
    """Cut ``path`` to half; its sizes before and after."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return len(data), len(data) // 2


def assert_one_line(message: str, index: Path, name: str, reason: str) -> None:
    assert "\n" not in message
    assert message == (
        f"{index / name} is damaged ({reason}); rebuild with: quillian index CORPUS --out {index}"
    )


def sqlite_reason(message: str, index: Path) -> str:
    """The reason ``message`` gives for the tables' database, which it names in one
    line with the index's rebuild command."""
    head, tail = (
        f"{index / TABLES} is damaged (",
        f"); rebuild with: quillian index CORPUS --out {index}",
    )
    assert "\n" not in message and message.startswith(head) and message.endswith(tail)
    return message[len(head) : -len(tail)]


@pytest.mark.parametrize("name", FILES)
def test_a_scribbled_file_is_named_never_ranked(index: Path, name: str) -> None:
    scribble(index / name)
    with pytest.raises(IndexDamagedError) as info:
        rankings(index)
    if name == TABLES:
        assert sqlite_reason(str(info.value), index).startswith("integrity check failed: ")
    else:
        assert_one_line(str(info.value), index, name, "checksum mismatch")


@pytest.mark.parametrize("name", FILES)
def test_a_truncated_file_is_named_with_its_sizes(index: Path, name: str) -> None:
    expected, found = truncate(index / name)
    with pytest.raises(IndexDamagedError) as info:
        rankings(index)
    if name == TABLES:  # SQLite's words: no size is recorded of a file patched where it is
        assert sqlite_reason(str(info.value), index) == "database disk image is malformed"
        return
    reason = f"truncated: expected {expected} bytes, found {found}"
    assert_one_line(str(info.value), index, name, reason)


def overwrite_row(path: Path, row: int, value: float) -> None:
    """Set every value of ``row`` of the ``.npy`` matrix at ``path``, in place."""
    matrix = np.load(path, mmap_mode="r+")
    matrix[row] = value
    matrix.flush()
    del matrix


def test_a_scribble_over_the_chunk_vectors_never_changes_dense_ranking(
    index: Path, clean: dict[str, list[list[str]]]
) -> None:
    # the reproducer: one chunk's vector made huge wins every dense question
    overwrite_row(index / "vectors/chunks/vectors-000001.npy", 7, 100.0)
    with pytest.raises(IndexDamagedError, match=r"vectors-000001\.npy is damaged"):
        rankings(index)


def test_a_large_vectors_file_is_checked_on_its_first_search(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exact_vectors, "HASH_AT_OPEN", 0)  # every file counts as large
    overwrite_row(index / "vectors/chunks/vectors-000001.npy", 7, 100.0)
    context = open_index(index, KeywordEmbedder()).context  # sizes check out
    with pytest.raises(IndexDamagedError) as info:
        make_retriever(context, "dense").retrieve(QUESTIONS[0], 10)
    assert_one_line(
        str(info.value), index, "vectors/chunks/vectors-000001.npy", "checksum mismatch"
    )


def test_an_update_leaves_a_damaged_large_vectors_file_to_the_next_search(
    index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update reads no vectors it keeps, so it does not hash them (that would cost
    the whole collection): a damaged large vectors file goes through it unchanged and
    still recorded as it was written, the next search names it, and indexing the same
    corpus again (nothing new) checks every file and rewrites it."""
    monkeypatch.setattr(exact_vectors, "HASH_AT_OPEN", 0)  # every file counts as large
    overwrite_row(index / "vectors/chunks/vectors-000001.npy", 7, 100.0)
    grown = {**people(), "Town 99": "Town 99 lies far away, near Person 4."}
    build_tiny(index, grown)
    with pytest.raises(IndexDamagedError, match=r"vectors-000001\.npy is damaged"):
        rankings(index)
    build_tiny(index, grown)
    build_tiny(tmp_path / "fresh", grown)
    assert rankings(index) == rankings(tmp_path / "fresh")


def test_indexing_the_corpus_again_rebuilds_damaged_files(
    index: Path, clean: dict[str, list[list[str]]]
) -> None:
    for name in (
        "vectors/chunks/vectors-000001.npy",
        "graph/weight_codes.npy",
        "tables/graph.sqlite",
        "bm25/seg-000001/tfs.npy",
    ):
        scribble(index / name)
    build_tiny(index, people())  # nothing new: without the damage it would reuse the files
    assert rankings(index) == clean


def test_an_index_without_checksums_opens_as_before(
    index: Path, clean: dict[str, list[list[str]]]
) -> None:
    records = [
        index / "manifest.json",
        index / "graph" / "snapshot.json",
        *(index / "vectors").glob("*/index.json"),
    ]
    for path in records:
        meta = json.loads(path.read_text())
        del meta["files"]
        path.write_text(json.dumps(meta))
    assert rankings(index) == clean
    # the next build records them (a new Quillian version rebuilds every file, as here
    # a new document does)
    build_tiny(index, {**people(), "Town 99": "Town 99 lies far away."})
    assert all("files" in json.loads(path.read_text()) for path in records)


def test_a_truncated_array_without_checksum_is_one_line(index: Path) -> None:
    meta = json.loads((index / "graph" / "snapshot.json").read_text())
    del meta["files"]
    (index / "graph" / "snapshot.json").write_text(json.dumps(meta))
    truncate(index / "graph" / "indices.npy")
    with pytest.raises(IndexDamagedError) as info:
        rankings(index)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{index / 'graph/indices.npy'} is damaged")
    assert message.endswith(f"rebuild with: quillian index CORPUS --out {index}")


def scribble_database(path: Path) -> None:
    """64 bytes of noise over the start of a leaf page of the documents' table in
    ``path`` (a page in use: a free page's bytes are nobody's, and the integrity check
    passes them)."""
    with closing(sqlite3.connect(path)) as conn:
        pages = [
            p
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'documents' AND pagetype = 'leaf'"
                " ORDER BY pageno"
            )
        ]
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    data = bytearray(path.read_bytes())
    at = (pages[len(pages) // 2] - 1) * size
    rng = np.random.default_rng(3)
    data[at : at + 64] = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))


def test_a_damaged_database_is_named_before_a_build_uses_it(
    index: Path, clean: dict[str, list[list[str]]]
) -> None:
    db = index / "store.sqlite"
    scribble_database(db)
    hint = f"rebuild with: quillian index CORPUS --out {index} after moving store.sqlite aside"
    for attempt in (lambda: rankings(index), lambda: build_tiny(index, people())):
        with pytest.raises(IndexDamagedError) as info:
            attempt()
        message = str(info.value)
        assert "\n" not in message
        # quick_check reports the damage ("integrity check failed: ...") or stops at it
        # ("database disk image is malformed"), depending on where the noise fell
        assert message.startswith(f"{db} is damaged (")
        assert message.endswith(hint)
    db.rename(index / "store.sqlite.damaged")  # what the message says to do
    build_tiny(index, people())
    assert rankings(index) == clean


def test_chunks_missing_from_the_database_are_named(index: Path) -> None:
    with open_storage(index) as storage:
        gone = next(storage.documents.iter_chunks()).doc_id
        storage.documents.delete_documents([gone])
    with pytest.raises(IndexDamagedError) as info:
        rankings(index)
    assert str(info.value) == (
        f"{index / 'store.sqlite'} is damaged (1 chunk(s) the graph names are missing); "
        f"rebuild with: quillian index CORPUS --out {index} after moving store.sqlite aside"
    )


class DiesAfterOneCall(KeywordEmbedder):
    """Embeds once, then fails: a build interrupted in its embedding stage."""

    calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("killed mid-embedding")
        return super().embed(texts)


def test_nan_vectors_in_a_damaged_cache_are_recomputed(index: Path, tmp_path: Path) -> None:
    """The embedding cache holds what an interrupted build embedded, for its rerun; a
    damaged vector there is recomputed, and a complete build leaves the cache empty
    (the collections hold the vectors)."""
    with open_storage(index) as storage:
        assert list(storage.kv.keys("embeddings")) == []
    more = {**people(), "Town 99": "Town 99 lies far away."}
    with pytest.raises(RuntimeError, match="killed mid-embedding"):
        build_tiny(index, more, embedder=DiesAfterOneCall())
    nan = np.full(KeywordEmbedder().dim, np.nan, np.float32).tobytes()
    with open_storage(index) as storage:
        keys = list(storage.kv.keys("embeddings"))
        assert keys
        storage.kv.put_many("embeddings", dict.fromkeys(keys, nan))
    build_tiny(index, more)  # was: "vectors contain NaN", then every later build again
    build_tiny(tmp_path / "clean", more)
    assert rankings(index) == rankings(tmp_path / "clean")
    with open_storage(index) as storage:
        assert list(storage.kv.keys("embeddings")) == []


def test_the_cli_says_it_in_one_line(index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scribble(index / "vectors/chunks/vectors-000001.npy")
    code = main(["retrieve", str(index), QUESTIONS[0], "--method", "dense"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == (
        f"error: {index / 'vectors/chunks/vectors-000001.npy'} is damaged (checksum mismatch); "
        f"rebuild with: quillian index CORPUS --out {index}\n"
    )


def test_the_server_answers_503_naming_the_workspace_not_its_path(index: Path) -> None:
    scribble(index / "vectors/chunks/vectors-000001.npy")
    with running(ServerSettings(workspaces=(WorkspaceSpec("people", index),))) as client:
        response = client.post(
            "/api/workspaces/people/retrieve", json={"query": QUESTIONS[0], "method": "dense"}
        )
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert detail == (
        "workspace people: the index file vectors/chunks/vectors-000001.npy is damaged "
        "(checksum mismatch); rebuild the index with: quillian index CORPUS --out LOCATION"
    )
    assert str(index.parent) not in response.text


def test_an_index_opened_again_by_the_process_that_wrote_it_reads_no_recorded_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "idx"
    build_tiny(path, people())  # this process hashed each file as it wrote it
    read: list[Path] = []
    digest = integrity.file_digest

    def reading(file: Path, algorithm: str = integrity.ALGORITHM) -> str:
        read.append(file)
        return digest(file, algorithm)

    monkeypatch.setattr(integrity, "file_digest", reading)
    rankings(path)
    recorded = json.loads((path / "manifest.json").read_text(encoding="utf-8"))["files"]
    assert recorded and not {f.relative_to(path).as_posix() for f in read} & set(recorded)


def test_a_file_damaged_after_this_process_wrote_it_is_still_named(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    build_tiny(path, people())
    rankings(path)  # opened once: every file's digest remembered
    name = "tables/relation_subject.npy"
    scribble(path / name)  # a write: the file's stat stamp changes
    with pytest.raises(IndexDamagedError) as info:
        rankings(path)
    assert_one_line(str(info.value), path, name, "checksum mismatch")
