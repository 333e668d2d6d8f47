"""The graph texts' vector keys kept by text id, and the chunks' by chunk id: each right,
and only the texts (chunks) not kept before are read and hashed; a file of another
model, damaged, tampered with or not writable (or, for chunks, of another build than
the one the update follows) never gives a wrong key."""

import dataclasses
import logging
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.retrieval.keyed import vector_keys
from quillian.index import artifacts, delete_documents, open_storage
from quillian.index import text_keys as text_keys_module
from quillian.index.artifacts import settle
from quillian.index.build import processed_chunks
from quillian.index.chunk_table import ChunkMoves
from quillian.index.stages import chunk_text
from quillian.index.text_keys import (
    CHUNK_KEYS_FILE,
    KEYS_FILE,
    ChunkKeys,
    carried_text_keys,
    chunk_keys,
    text_keys,
)
from quillian.stores.postgres.files import SKIPPED
from quillian.testing.corpus import LOVELACE, build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document, key64

MODEL = "model-a"


class Texts:
    """Distinct texts by id, counting the texts read."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.ids = np.array([key64(t) for t in texts], dtype=np.int64)
        self.read_texts: list[str] = []

    def read(self, at: npt.NDArray[np.int64]) -> list[str]:
        got = [self.texts[i] for i in at.tolist()]
        self.read_texts += got
        return got


def keyed(directory: Path, texts: list[str], model: str = MODEL) -> tuple[list[int], list[str]]:
    """The keys, checked against their definition, and the texts read to make them."""
    t = Texts(texts)
    keys = text_keys(directory, model, t.ids, t.read)
    settle()  # the file written aside, as a build waits for it
    np.testing.assert_array_equal(keys, vector_keys(model, texts))
    return keys.tolist(), t.read_texts


def test_only_texts_not_kept_before_are_read(tmp_path: Path) -> None:
    assert keyed(tmp_path, ["a", "b", "c"])[1] == ["a", "b", "c"]
    assert keyed(tmp_path, ["c", "a", "b"])[1] == []  # any order
    assert keyed(tmp_path, ["b", "d", "a", "é"])[1] == ["d", "é"]
    assert keyed(tmp_path, ["a"])[1] == []  # the others dropped from the file
    assert keyed(tmp_path, ["b", "a"])[1] == ["b"]
    assert keyed(tmp_path, [])[1] == []
    assert keyed(tmp_path, ["a"])[1] == ["a"]


def test_another_model_keys_every_text_again(tmp_path: Path) -> None:
    keys_a, _ = keyed(tmp_path, ["a", "b"])
    keys_b, read = keyed(tmp_path, ["a", "b"], model="model-b")
    assert read == ["a", "b"] and keys_b != keys_a
    assert keyed(tmp_path, ["a", "b"])[1] == ["a", "b"]  # the file was model-b's


def _tamper(path: Path, at: int) -> None:
    """One kept key changed in place, the file still a well-formed zip."""
    with np.load(path) as kept:
        arrays = {name: kept[name] for name in kept.files}
    arrays["keys"] = arrays["keys"].copy()
    arrays["keys"][at] ^= 1
    np.savez(path, **arrays)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "tampered"])
def test_a_damaged_file_is_ignored_and_written_anew(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    keyed(tmp_path, ["a", "b", "c"])
    path = tmp_path / KEYS_FILE
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a zip")
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # a key changed in place, the zip still well formed: the checksum tells
        _tamper(path, 1)
    with caplog.at_level(logging.WARNING, logger="quillian.index.text_keys"):
        assert keyed(tmp_path, ["a", "b", "c"])[1] == ["a", "b", "c"]
    assert "keying every text" in caplog.text
    assert keyed(tmp_path, ["a", "b", "c"])[1] == []


def test_a_file_that_cannot_be_written_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / KEYS_FILE).mkdir()  # a folder in the file's place
    with caplog.at_level(logging.WARNING, logger="quillian.index.text_keys"):
        assert keyed(tmp_path, ["a", "b"])[1] == ["a", "b"]
        assert keyed(tmp_path, ["a", "b"])[1] == ["a", "b"]
    assert "not kept" in caplog.text


CORPUS = {
    **LOVELACE,
    "Luigi Menabrea": "Luigi Menabrea wrote on the Analytical Engine, which Ada Lovelace"
    " translated in London.",
}


def _build(location: Path, titles: list[str]) -> None:
    build_tiny(location, CORPUS, titles=titles)


def test_an_update_hashes_only_the_texts_it_brings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built in steps, the graph's texts are keyed as when built at once (their keys by
    position, the keys in the collection), each text hashed by the build that brought
    it; the file never leaves the machine."""
    hashed: list[str] = []

    def counted(model_id: str, texts: list[str]) -> npt.NDArray[np.int64]:
        hashed.extend(texts)
        return vector_keys(model_id, texts)

    monkeypatch.setattr(text_keys_module, "vector_keys", counted)
    titles = list(CORPUS)
    steps = tmp_path / "steps"
    _build(steps, titles[:2])
    first = set(hashed)
    hashed.clear()
    _build(steps, titles[2:])
    assert hashed and not first & set(hashed)  # none of the first build's texts again
    hashed.clear()
    delete_documents(  # a document gone: nothing to hash
        steps,
        [Document(CORPUS[titles[0]], titles[0]).id],
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
    )
    assert hashed == []
    _build(tmp_path / "once", titles[1:])
    for name in ("text_keys.npy", "description_rows.npy", "relation_rows.npy"):
        np.testing.assert_array_equal(
            np.load(steps / "tables" / name), np.load(tmp_path / "once" / "tables" / name)
        )
    assert KEYS_FILE in SKIPPED and KEYS_FILE + ".partial" in SKIPPED


class Chunks:
    """Chunk names (id and text) by row, counting the names read."""

    def __init__(self, names: dict[str, str]) -> None:
        self.ids, self.names = list(names), list(names.values())
        self.rows = np.array([key64(i) for i in self.ids], dtype=np.int64)
        self.read: list[str] = []

    def name_at(self, at: npt.NDArray[np.int64]) -> list[str]:
        got = [self.names[i] for i in at.tolist()]
        self.read += got
        return got


def chunk_keyed(
    directory: Path,
    names: dict[str, str],
    *,
    tag: str,
    since: str | None,
    retitled: tuple[str, ...] = (),
    model: str = MODEL,
) -> list[str]:
    """The names read to key the chunks ``names`` (id to name), the keys checked."""
    c = Chunks(names)
    gone = np.array([key64(i) for i in retitled], dtype=np.int64)
    keyed = chunk_keys(directory, model, c.rows, c.name_at, tag=tag, since=since, retitled=gone)
    settle()
    np.testing.assert_array_equal(keyed.keys, vector_keys(model, list(names.values())))
    assert keyed.base is None  # no catalog's moves: looked up by id
    return c.read


def _carry(
    directory: Path, chunks: Chunks, tag: str, since: str | None, table: str, **moved: Any
) -> ChunkKeys:
    """:func:`chunk_keys` of ``chunks`` for the build ``tag`` and the chunk table
    ``table`` (``moved``: ``follows`` and ``moves``, where the catalog gave them)."""
    return chunk_keys(
        directory,
        MODEL,
        chunks.rows,
        chunks.name_at,
        tag=tag,
        since=since,
        retitled=chunks.rows[:0],
        table=table,
        **moved,
    )


def test_chunk_keys_carried_through_the_catalog_moves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Keys kept for the table the catalog patched this one from are carried where its
    rows went: only the rows added are keyed, and the keys of those gone are told."""
    one = {"a1": "a1\nA\none", "b1": "b1\nB\ntwo", "c1": "c1\nC\nthree"}
    _carry(tmp_path, Chunks(one), "b1", None, "t1")
    # b's document stored again (b1 gone, b2 and b3 came), a new document d
    two = {
        "a1": one["a1"],
        "b2": "b2\nB\nnew",
        "b3": "b3\nB\nmore",
        "c1": one["c1"],
        "d1": "d1\nD\nfour",
    }
    second = Chunks(two)
    keyed = _carry(
        tmp_path,
        second,
        "b2",
        "b1",
        "t2",
        follows="t1",
        moves=ChunkMoves(((0, 1, 0), (2, 3, 3)), 3, 5),
    )
    settle()
    np.testing.assert_array_equal(keyed.keys, vector_keys(MODEL, list(two.values())))
    assert second.read == [two["b2"], two["b3"], two["d1"]]
    assert keyed.base is not None and keyed.added is not None and keyed.gone is not None
    assert keyed.base.tolist() == vector_keys(MODEL, list(one.values())).tolist()
    assert keyed.added.tolist() == [1, 2, 4]
    assert keyed.gone.tolist() == vector_keys(MODEL, [one["b1"]]).tolist()
    unmoved = ChunkMoves(((0, 5, 0),), 5, 5)
    # moves from another table than the keys': looked up by id (tagged b2 above)
    third = Chunks(two)
    keyed = _carry(tmp_path, third, "b3", "b2", "t3", follows="t9", moves=unmoved)
    assert keyed.base is None and third.read == []
    # moves that do not carry the kept ids to these rows: a warning, looked up by id
    settle()
    fourth = Chunks(dict(reversed(two.items())))
    keyed = _carry(tmp_path, fourth, "b4", "b3", "t4", follows="t3", moves=unmoved)
    assert keyed.base is None and fourth.read == []
    assert "do not follow the chunk catalog's table" in caplog.text
    np.testing.assert_array_equal(keyed.keys, vector_keys(MODEL, list(fourth.names)))


def test_keys_an_update_carried_are_written_once_updates_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys an update carried are kept in this process at once and written to their
    file only once updates pause; a process killed before leaves the file of an earlier
    build, whose keys are still right: the next process keys the texts it lacks, and
    the chunks by id (their tag names a build it does not follow)."""
    monkeypatch.setattr(artifacts, "LATER_S", 3600.0)  # no pause within the test
    names = {"a1": "a1\nA\none", "b1": "b1\nB\ntwo", "c1": "c1\nC\nthree"}
    _carry(tmp_path, Chunks(names), "b1", None, "t1")  # no file yet: written at once
    texts = Texts(["one", "two", "three"])
    first = text_keys(tmp_path, MODEL, texts.ids, texts.read)
    settle()
    chunk_file, text_file = tmp_path / CHUNK_KEYS_FILE, tmp_path / KEYS_FILE
    written = chunk_file.read_bytes(), text_file.read_bytes()

    grown = {**names, "d1": "d1\nD\nfour"}
    moves = ChunkMoves(((0, 3, 0),), 3, 4)
    _carry(tmp_path, Chunks(grown), "b2", "b1", "t2", follows="t1", moves=moves)
    more = Texts(["one", "two", "three", "four"])
    by_id = np.argsort(more.ids)
    carried = carried_text_keys(
        tmp_path,
        MODEL,
        (more.ids, by_id),
        first,
        np.arange(3),
        np.array([3]),
        more.read,
    )
    np.testing.assert_array_equal(carried, vector_keys(MODEL, more.texts))
    assert (chunk_file.read_bytes(), text_file.read_bytes()) == written  # not yet
    # this process keys the next update from what it kept: nothing read
    again, same = Chunks(grown), Texts(more.texts)
    keyed = _carry(
        tmp_path, again, "b3", "b2", "t3", follows="t2", moves=ChunkMoves(((0, 4, 0),), 4, 4)
    )
    assert keyed.base is not None and again.read == []
    assert text_keys(tmp_path, MODEL, same.ids, same.read).tolist() == carried.tolist()
    assert same.read_texts == []

    monkeypatch.setattr(artifacts, "_LATER", artifacts._Later())  # killed
    monkeypatch.setattr(artifacts, "_REMEMBERED", type(artifacts._REMEMBERED)())
    assert (chunk_file.read_bytes(), text_file.read_bytes()) == written
    after, fresh = Chunks(grown), Texts(more.texts)
    keyed = _carry(
        tmp_path, after, "b4", "b3", "t4", follows="t3", moves=ChunkMoves(((0, 4, 0),), 4, 4)
    )
    np.testing.assert_array_equal(keyed.keys, vector_keys(MODEL, list(grown.values())))
    assert keyed.base is None and after.read == list(grown.values())  # keyed again
    assert text_keys(tmp_path, MODEL, fresh.ids, fresh.read).tolist() == carried.tolist()
    assert fresh.read_texts == ["four"]  # only the text the earlier build's file lacks


def test_chunk_keys_serve_only_the_build_that_follows_theirs(tmp_path: Path) -> None:
    one = {"c1": "c1\nA\none", "c2": "c2\nB\ntwo"}
    assert chunk_keyed(tmp_path, one, tag="b1", since=None) == list(one.values())
    grown = {**one, "c3": "c3\nC\nthree"}
    assert chunk_keyed(tmp_path, grown, tag="b2", since="b1") == ["c3\nC\nthree"]
    # a chunk retitled since: keyed from its name again, the others kept
    retitled = {**grown, "c1": "c1\nA new title\none"}
    assert chunk_keyed(tmp_path, retitled, tag="b3", since="b2", retitled=("c1",)) == [
        "c1\nA new title\none"
    ]
    # a build that does not follow the file's (a stopped build between): every chunk
    assert chunk_keyed(tmp_path, retitled, tag="b4", since="b2") == list(retitled.values())
    assert chunk_keyed(tmp_path, retitled, tag="b5", since="b4", model="model-b") == list(
        retitled.values()
    )
    # no tag (no linking delta): keyed from the names, nothing kept
    assert chunk_keyed(tmp_path, retitled, tag="", since="b5", model="model-b") == []
    assert not (tmp_path / CHUNK_KEYS_FILE).exists()
    assert chunk_keyed(tmp_path, one, tag="b6", since="b5") == list(one.values())
    assert CHUNK_KEYS_FILE in SKIPPED and CHUNK_KEYS_FILE + ".partial" in SKIPPED


def test_damaged_chunk_keys_are_keyed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    names = {"c1": "c1\none", "c2": "c2\ntwo"}
    chunk_keyed(tmp_path, names, tag="b1", since=None)
    _tamper(tmp_path / CHUNK_KEYS_FILE, 0)
    with caplog.at_level(logging.WARNING, logger="quillian.index.text_keys"):
        assert chunk_keyed(tmp_path, names, tag="b2", since="b1") == list(names.values())
    assert "chunk keys kept" in caplog.text and "keying every chunk" in caplog.text
    assert chunk_keyed(tmp_path, names, tag="b3", since="b2") == []


def test_a_retitled_chunk_is_keyed_by_its_new_title(tmp_path: Path) -> None:
    """A chunk whose title changed in place (a document given its own id, retitled) is
    keyed by the build after as by one made at once."""
    location = tmp_path / "index"
    titles = list(CORPUS)
    _build(location, titles)
    with open_storage(location) as storage:
        chunk = storage.documents.get_chunks([processed_chunks(storage).ids[0]])[0]
        assert chunk is not None
        storage.documents.put_chunks([dataclasses.replace(chunk, title="Another Title")])
    delete_documents(  # a rebuild: the title change reaches the keys
        location,
        [Document(CORPUS[titles[-1]], titles[-1]).id],
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
    )
    with open_storage(location) as storage:
        chunks = list(processed_chunks(storage))
    assert any(c.title == "Another Title" for c in chunks)
    expected = vector_keys(KeywordEmbedder().model_id, [f"{c.id}\n{chunk_text(c)}" for c in chunks])
    np.testing.assert_array_equal(np.load(location / "tables" / "chunk_keys.npy"), expected)


def test_keys_kept_with_a_blake2b_checksum_are_still_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Keys kept before their checksum was XXH3 carry BLAKE2b's: checked with it, and
    used (a file whose digest is neither is keyed again, as above)."""
    keyed(tmp_path, ["a", "b", "c"])
    path = tmp_path / KEYS_FILE
    with np.load(path) as kept:
        arrays = dict(kept)
    meta = [str(v) for v in arrays["meta"]]
    ids, keys = arrays["ids"], arrays["keys"]
    old = text_keys_module._digest(MODEL, ids, keys, meta[0], algorithm="blake2b")
    assert old != meta[2]
    np.savez(path, **{**arrays, "meta": np.array([meta[0], meta[1], old])})
    with caplog.at_level(logging.WARNING, logger="quillian.index.text_keys"):
        assert keyed(tmp_path, ["a", "b", "c"])[1] == []
    assert not caplog.text


def test_chunk_keys_of_the_first_version_are_served_by_id(tmp_path: Path) -> None:
    """A file written before keys were kept by position (ids sorted, tagged with a build
    alone) serves the build that follows it, and is written anew by position."""
    names = {"c1": "c1\none", "c2": "c2\ntwo"}
    c = Chunks(names)
    keys = vector_keys(MODEL, list(names.values()))
    order = np.argsort(c.rows)
    text_keys_module._save(
        tmp_path / CHUNK_KEYS_FILE, MODEL, c.rows[order], keys[order], "chunk-keys-1", "b1"
    )
    with np.load(tmp_path / CHUNK_KEYS_FILE) as kept:
        assert str(kept["meta"][0]) == "chunk-keys-1"
    assert chunk_keyed(tmp_path, names, tag="b2", since="b1") == []
    with np.load(tmp_path / CHUNK_KEYS_FILE) as kept:
        assert str(kept["meta"][0]) == "chunk-keys-2"
        assert kept["ids"].tolist() == c.rows.tolist()  # by position
