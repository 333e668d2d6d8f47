"""Readers for text, markdown, folders and JSON/JSONL corpora, and their error messages."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from quillian.components.ingestion import markdown_title, read_documents
from quillian.errors import InputError


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_text_file_is_one_document_titled_by_its_stem(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.txt", b"\xef\xbb\xbfLine one\r\nLine two\r")
    (doc,) = read_documents(path)
    assert (doc.title, doc.text, doc.source) == ("notes", "Line one\nLine two\n", str(path))


def test_markdown_title_comes_from_the_first_h1(tmp_path: Path) -> None:
    text = "Intro\n```sh\n# not a title\n```\n## Sub\n# The Title #\n\nBody\n# Later\n"
    (doc,) = read_documents(write(tmp_path / "page.md", text))
    assert doc.title == "The Title" and doc.text == text
    (untitled,) = read_documents(write(tmp_path / "plain.markdown", "Just text\n#hashtag\n"))
    assert untitled.title == "plain"
    assert markdown_title("#   Spaced   \n") == "Spaced"


def test_folder_is_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path / "b.txt", "bee")
    write(tmp_path / "a" / "z.md", "# Zed\nzed")
    write(tmp_path / "a" / "c.txt", "sea")
    write(tmp_path / ".git" / "config.txt", "hidden")
    write(tmp_path / ".hidden.txt", "hidden")
    skipped: list[InputError] = []
    docs = list(read_documents(tmp_path, on_skip=skipped.append))
    assert [d.title for d in docs] == ["c", "Zed", "b"]
    assert skipped == []


def test_unsupported_file_in_a_folder_is_skipped_and_reported(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "kept")
    write(tmp_path / "image.png", b"\x89PNG")
    skipped: list[InputError] = []
    assert [d.text for d in read_documents(tmp_path, on_skip=skipped.append)] == ["kept"]
    assert len(skipped) == 1 and "image.png" in str(skipped[0])
    with pytest.raises(InputError, match=r"image\.png: unsupported file type '\.png'"):
        list(read_documents(tmp_path, strict=True))


def test_unsupported_file_named_directly_raises(tmp_path: Path) -> None:
    path = write(tmp_path / "data.csv", "a,b")
    with pytest.raises(InputError, match=r"data\.csv: unsupported file type '\.csv'.*\.txt"):
        list(read_documents(path))


def test_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.txt: no such file or directory"):
        list(read_documents(tmp_path / "nope.txt"))


def test_unreadable_file_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    path = write(tmp_path / "locked.txt", "x")
    monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(InputError, match=r"locked\.txt: cannot read file: Permission denied"):
        list(read_documents(path))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_file_without_read_permission_raises(tmp_path: Path) -> None:
    path = write(tmp_path / "secret.txt", "x")
    path.chmod(0)
    try:
        with pytest.raises(InputError, match=r"secret\.txt: cannot read file: Permission denied"):
            list(read_documents(path))
    finally:
        path.chmod(0o600)


def test_invalid_utf8_names_the_line_and_byte_offset(tmp_path: Path) -> None:
    path = write(tmp_path / "latin1.txt", "first\nsecond café".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.txt, line 2: invalid UTF-8 at byte offset 16 "):
        list(read_documents(path))


def test_empty_file_is_skipped_and_reported_or_raises_when_strict(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.md", " \n\n")
    skipped: list[InputError] = []
    assert list(read_documents(path, on_skip=skipped.append)) == []
    assert [str(e) for e in skipped] == [f"{path}: empty document"]
    with pytest.raises(InputError, match="empty document"):
        list(read_documents(path, strict=True))


def test_json_list_corpus(tmp_path: Path) -> None:
    corpus = [{"title": "A", "text": "alpha"}, {"text": "untitled", "id": 7}]
    docs = list(read_documents(write(tmp_path / "c.json", json.dumps(corpus))))
    assert [(d.title, d.text, d.metadata) for d in docs] == [
        ("A", "alpha", {"index": 0}),
        ("", "untitled", {"index": 1}),
    ]
    assert docs[0].source == str(tmp_path / "c.json")


def test_hotpotqa_dict_corpus_joins_sentences_verbatim(tmp_path: Path) -> None:
    corpus = {"Demon Dice": ["Demon Dice is a game.", " It uses dice."], "Solo": "One text."}
    docs = list(read_documents(write(tmp_path / "h.json", json.dumps(corpus))))
    assert [(d.title, d.text) for d in docs] == [
        ("Demon Dice", "Demon Dice is a game. It uses dice."),
        ("Solo", "One text."),
    ]
    assert docs[1].metadata == {"index": 1}


def test_jsonl_corpus_skips_blank_lines(tmp_path: Path) -> None:
    text = '{"title": "A", "text": "alpha"}\n\n{"title": "B", "text": "beta"}\n'
    docs = list(read_documents(write(tmp_path / "c.jsonl", text)))
    assert [(d.title, d.metadata) for d in docs] == [("A", {"index": 0}), ("B", {"index": 1})]


def test_missing_text_field_names_the_entry_and_field(tmp_path: Path) -> None:
    corpus = [{"title": str(i), "text": "t"} for i in range(17)] + [{"title": "no text"}]
    path = write(tmp_path / "c.json", json.dumps(corpus))
    with pytest.raises(InputError, match=r"c\.json, field 'text': entry 17: missing field") as info:
        list(read_documents(path))
    assert info.value.field == "text" and info.value.path == str(path)


def test_wrong_field_type_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", json.dumps([{"title": 3, "text": "t"}]))
    with pytest.raises(InputError, match=r"field 'title': entry 0: .* must be a string, got a int"):
        list(read_documents(path))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["just", "strings"], r"entry 0: expected an object with 'title' and 'text', got a string"),
        (
            "a string",
            r"expected a list of \{\"title\", \"text\"\} objects, one such .* got a string",
        ),
        ({"T": [1, 2]}, r"field 'T': entry 0 \('T'\): expected a list of sentence strings"),
        ({"T": None}, r"entry 0 \('T'\): expected a list of sentence strings, got null"),
    ],
)
def test_json_of_the_wrong_shape_raises(tmp_path: Path, data: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        list(read_documents(write(tmp_path / "c.json", json.dumps(data))))


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", '[\n  {"title": "A", "text": "a"},\n  {"title": }\n]')
    with pytest.raises(
        InputError, match=r"c\.json, line 3: invalid JSON: Expecting value \(column 13\)"
    ):
        list(read_documents(path))


def test_invalid_jsonl_line_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"text": "a"}\n{"text": "b"\n')
    with pytest.raises(InputError, match=r"c\.jsonl, line 2: invalid JSON"):
        list(read_documents(path))
    path = write(tmp_path / "d.jsonl", '{"text": "a"}\n\n["x"]\n')
    with pytest.raises(InputError, match=r"d\.jsonl, line 3: entry 1: expected an object"):
        list(read_documents(path))


def test_empty_corpus_entry_is_reported_not_silently_dropped(tmp_path: Path) -> None:
    corpus = [
        {"title": "A", "text": "a"},
        {"title": "B", "text": "  "},
        {"title": "C", "text": "c"},
    ]
    path = write(tmp_path / "c.json", json.dumps(corpus))
    skipped: list[InputError] = []
    assert [d.title for d in read_documents(path, on_skip=skipped.append)] == ["A", "C"]
    assert [str(e) for e in skipped] == [f"{path}, field 'text': entry 1: empty text"]
    with pytest.raises(InputError, match="entry 1: empty text"):
        list(read_documents(path, strict=True))


def test_empty_jsonl_entry_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"text": "a"}\n{"text": ""}\n')
    skipped: list[InputError] = []
    assert len(list(read_documents(path, on_skip=skipped.append))) == 1
    assert skipped[0].line == 2 and skipped[0].field == "text"


def test_one_document_object_is_one_document(tmp_path: Path) -> None:
    path = write(tmp_path / "one.json", json.dumps({"title": "Ada", "text": "Ada wrote.", "x": 1}))
    (doc,) = read_documents(path)
    assert (doc.title, doc.text, doc.source) == ("Ada", "Ada wrote.", str(path))
    (untitled,) = read_documents(write(tmp_path / "u.json", json.dumps({"text": "alone"})))
    assert (untitled.title, untitled.text) == ("", "alone")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"title": "Ada", "body": "no text"}, r"the document object: missing field 'text'"),
        ({"title": "Ada", "text": 5}, r"field 'text' must be a string, got a int"),
        ({"text": "t", "title": ["x"]}, r"field 'title' must be a string, got a list"),
    ],
)
def test_a_malformed_document_object_is_refused(tmp_path: Path, data: object, message: str) -> None:
    path = write(tmp_path / "one.json", json.dumps(data))
    with pytest.raises(InputError, match=message):
        list(read_documents(path))
    refused: list[InputError] = []
    assert list(read_documents(path, on_refused=refused.append)) == []
    assert len(refused) == 1 and str(refused[0]).startswith(str(path))


def test_top_level_json_of_no_known_shape_names_the_shapes(tmp_path: Path) -> None:
    for data in (5, "text", None, True):
        path = write(tmp_path / "c.json", json.dumps(data))
        with pytest.raises(InputError, match=r"c\.json: expected a list of .* one such object"):
            list(read_documents(path, on_refused=lambda e: None))


def test_malformed_entries_are_refused_one_by_one_and_the_rest_read(tmp_path: Path) -> None:
    corpus = [
        {"title": "A", "text": "a"},
        {"title": "no text"},
        "a string",
        {"title": "B", "text": ["not", "a string"]},
        {"title": "C", "text": "c"},
    ]
    path = write(tmp_path / "c.json", json.dumps(corpus))
    refused: list[InputError] = []
    docs = list(read_documents(path, on_refused=refused.append))
    assert [d.title for d in docs] == ["A", "C"]
    assert [str(e).split(": ", 1)[1] for e in refused] == [
        "entry 1: missing field 'text'",
        "entry 2: expected an object with 'title' and 'text', got a string",
        "entry 3: field 'text' must be a string, got a list",
    ]
    with pytest.raises(InputError, match="entry 1: missing field 'text'"):
        list(read_documents(path, strict=True, on_refused=refused.append))


def test_malformed_jsonl_lines_are_refused_one_by_one(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"text": "a"}\n{"text": \n[1]\n{"text": "d"}\n')
    refused: list[InputError] = []
    assert [d.text for d in read_documents(path, on_refused=refused.append)] == ["a", "d"]
    assert [e.line for e in refused] == [2, 3]
    assert "invalid JSON" in str(refused[0]) and "entry 2: expected an object" in str(refused[1])


def test_malformed_hotpotqa_items_are_refused_one_by_one(tmp_path: Path) -> None:
    path = write(tmp_path / "h.json", json.dumps({"Good": ["One."], "Bad": [1, 2]}))
    refused: list[InputError] = []
    assert [d.title for d in read_documents(path, on_refused=refused.append)] == ["Good"]
    assert "entry 1 ('Bad'): expected a list of sentence strings" in str(refused[0])
