"""The big-file benchmark's account of an embedded index's ``store.sqlite``."""

from pathlib import Path

from big_file import found_pairs, same_top, store_sizes
from quillian.stores.embedded.sqlite import SqliteDocumentStore, SqliteKeyValueStore
from quillian.types import Chunk, Document
from scale_child import openings_from, questions_from


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


def test_found_paragraphs_are_paired_question_by_question_with_the_first() -> None:
    first = {"src": "a", "probe": {"found": {"sa": [1, 0, 1, 1], "bm25": [0]}}}
    later = {"src": "b", "probe": {"found": {"sa": [1, 1, 0, 1], "bm25": [0]}}}
    failed = {"src": "c", "probe": {}}
    assert found_pairs([first, later, failed]) == {
        "b": {
            "sa": {"first": 3, "this": 3, "won": 1, "lost": 1},
            "bm25": {"first": 0, "this": 0, "won": 0, "lost": 0},
        },
        "c": {},
    }


def test_the_openings_mark_the_paragraphs_the_questions_name(tmp_path: Path) -> None:
    text = tmp_path / "t.txt"
    paragraphs = [f"Title {i}, a place. Paragraph {i} says  something\nlong." for i in range(6)]
    text.write_text("\n\n".join(paragraphs), encoding="utf-8")
    assert questions_from(text, 3) == ["What is Title 0?", "What is Title 2?", "What is Title 4?"]
    assert openings_from(text, 3)[1] == "Title 2, a place. Paragraph 2 says something long."
