"""The big-file benchmark's account of an embedded index's ``store.sqlite``."""

from pathlib import Path

from big_file import same_top, store_sizes
from quillian.stores.embedded.sqlite import SqliteDocumentStore, SqliteKeyValueStore
from quillian.types import Chunk, Document


def test_the_store_is_counted_by_namespace_and_text(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    doc = Document("Ada was born in London.", "Ada")
    with SqliteDocumentStore(path) as documents, SqliteKeyValueStore(path) as kv:
        documents.put_documents([doc])
        documents.put_chunks(
            [
                Chunk(doc.id, 0, doc.text, 0, len(doc.text), doc.title),  # its span: no text
                Chunk(doc.id, 1, "ADA", 0, 3, doc.title),  # not the document's text there
            ]
        )
        kv.put_many("linked:spacy", {"a": b"x" * 300, "b": b"y" * 200})
        kv.put_many("embeddings", {"k": b"z" * 10})
    assert store_sizes(tmp_path) == {
        "kv linked:spacy": 500,
        "documents text": 23,
        "chunks text": 3,
        "kv embeddings": 10,
    }
    assert store_sizes(tmp_path / "elsewhere") == {}


def test_later_trees_are_compared_question_by_question_with_the_first() -> None:
    first = {"src": "a", "probe": {"top": {"sa": [["x", "y"], ["z"]], "bm25": [["x"]]}}}
    later = {"src": "b", "probe": {"top": {"sa": [["x", "y"], ["y"]], "bm25": [["x"]]}}}
    failed = {"src": "c", "probe": {}}
    assert same_top([first, later, failed]) == {"b": {"sa": [1, 2], "bm25": [1, 1]}, "c": {}}
    assert same_top([]) == {}
