"""The store benchmark's account of compressed texts and of a packed copy."""

import json
import sys
from pathlib import Path

import pytest

from quillian.stores.embedded.sqlite import SqliteDocumentStore, SqliteKeyValueStore
from quillian.types import Chunk, Document
from store_bytes import main


def test_texts_are_compressed_as_the_store_keeps_them_and_a_copy_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "idx"
    path = index / "store.sqlite"
    long = Document("Ada Lovelace was born in London. " * 20, "Ada")
    short = Document("Babbage.", "Charles")
    with SqliteDocumentStore(path) as documents, SqliteKeyValueStore(path) as kv:
        documents.put_documents([long, short])
        documents.put_chunks(
            [Chunk(d.id, 0, d.text, 0, len(d.text), d.title) for d in (long, short)]
        )
        kv.put_many("cache", {str(i): bytes(300) for i in range(200)})
        kv.put_many("long", {str(i): bytes(range(256)) * 8 for i in range(20)})
        kv.delete_many("cache", [str(i) for i in range(0, 200, 2)])
    stored = path.read_bytes()
    monkeypatch.setattr(sys, "argv", ["store_bytes.py", str(index)])
    main()
    report = json.loads(capsys.readouterr().out)[str(index)]
    chunks = report["texts"]["chunks"]
    assert chunks["count"] == 2 and chunks["bytes"] == len(long.text) + len(short.text)
    for level in ("level_1", "level_6"):  # the long text shrinks, the short one is kept
        assert len(short.text) < chunks[level]["bytes"] < len(long.text) / 4
    assert report["texts"]["documents"]["bytes"] == chunks["bytes"]
    pack = report["pack"]
    assert pack["bytes"] == len(stored) and 0 < pack["packed_bytes"] <= pack["bytes"]
    assert pack["moved_bytes"] > 0 and pack["rewrite_seconds"] >= 0
    assert len(short.text) < chunks["pack_text"]["bytes"] < len(long.text) / 4
    assert path.read_bytes() == stored  # the index's own store is not touched
