"""Word-window and passage chunkers: exact spans, overlaps, validation."""

from __future__ import annotations

import itertools
import random

import pytest

from quillian.components.chunking import Chunker, PassageChunker, WordWindowChunker
from quillian.errors import ConfigError
from quillian.types import Document


def words(n: int, sep: str = " ") -> str:
    return sep.join(f"w{i}" for i in range(n))


def test_windows_of_five_with_overlap_two() -> None:
    doc = Document(text=words(12), title="T")
    chunks = WordWindowChunker(size=5, overlap=2).chunk(doc)
    assert [c.text.split() for c in chunks] == [
        ["w0", "w1", "w2", "w3", "w4"],
        ["w3", "w4", "w5", "w6", "w7"],
        ["w6", "w7", "w8", "w9", "w10"],
        ["w9", "w10", "w11"],
    ]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    assert {(c.doc_id, c.title) for c in chunks} == {(doc.id, "T")}


def test_last_window_ending_at_the_last_word_is_not_followed_by_a_contained_one() -> None:
    chunks = WordWindowChunker(size=5, overlap=2).chunk(Document(text=words(8)))
    assert [c.text.split()[-1] for c in chunks] == ["w4", "w7"]


def test_short_document_is_one_chunk_and_empty_document_none() -> None:
    chunker = WordWindowChunker()
    assert [c.text for c in chunker.chunk(Document(text="  one two\n"))] == ["one two"]
    assert chunker.chunk(Document(text=" \n\t ")) == []


def test_chunks_keep_original_spacing() -> None:
    doc = Document(text="Alpha  beta,\n\tgamma   delta.\n\nEpsilon")
    chunks = WordWindowChunker(size=3, overlap=1).chunk(doc)
    assert [c.text for c in chunks] == ["Alpha  beta,\n\tgamma", "gamma   delta.\n\nEpsilon"]


@pytest.mark.parametrize("seed", range(20))
def test_random_documents_satisfy_the_chunk_invariants(seed: int) -> None:
    rng = random.Random(seed)
    seps = [" ", "  ", "\n", "\t", " \n "]
    text = "".join(rng.choice(seps) + "x" * rng.randint(1, 4) for _ in range(rng.randint(0, 60)))
    size = rng.randint(1, 12)
    overlap = rng.randint(0, size - 1)
    doc = Document(text=text)
    chunks = WordWindowChunker(size, overlap).chunk(doc)
    n_words = len(text.split())
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert 0 < len(chunk.text.split()) <= size
    if n_words:
        assert chunks[0].start == len(text) - len(text.lstrip())
        assert chunks[-1].end == len(text.rstrip())
        covered = sum(len(c.text.split()) for c in chunks) - overlap * (len(chunks) - 1)
        assert covered >= n_words  # every word is in some window
    else:
        assert chunks == []
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start and a.end < b.end
        assert len(text[b.start : a.end].split()) == overlap or a.end <= b.start


def test_sa_rag_defaults_and_name() -> None:
    chunker = WordWindowChunker()
    assert (chunker.size, chunker.overlap, chunker.name) == (500, 200, "word-window-500-200")
    chunks = chunker.chunk(Document(text=words(1000)))
    assert [len(c.text.split()) for c in chunks] == [500, 500, 400]
    assert chunks[1].text.split()[0] == "w300"


@pytest.mark.parametrize(
    ("size", "overlap", "message"),
    [
        (0, 0, "size must be greater than 0, got 0"),
        (-5, 0, "size must be greater than 0, got -5"),
        (5, 5, r"overlap must be >= 0 and smaller than size \(5\), got 5"),
        (5, -1, r"overlap must be >= 0 and smaller than size \(5\), got -1"),
    ],
)
def test_invalid_window_settings_are_rejected(size: int, overlap: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WordWindowChunker(size=size, overlap=overlap)


def test_passage_chunker_gives_one_stripped_chunk() -> None:
    doc = Document(text="\n  A whole passage.  \n", title="P")
    (chunk,) = PassageChunker().chunk(doc)
    assert chunk.text == "A whole passage." == doc.text[chunk.start : chunk.end]
    assert (chunk.index, chunk.title, chunk.doc_id) == (0, "P", doc.id)
    assert PassageChunker().chunk(Document(text="   ")) == []


def test_chunkers_follow_the_protocol() -> None:
    assert isinstance(WordWindowChunker(), Chunker)
    assert isinstance(PassageChunker(), Chunker)
    assert PassageChunker().name == "passage"


def test_a_long_document_becomes_passages_cut_at_paragraphs() -> None:
    paragraphs = [f"Paragraph {i} says something. " * 8 for i in range(40)]
    doc = Document(text="\n\n".join(paragraphs) + "\n", title="Book")
    chunks = PassageChunker(max_chars=1000).chunk(doc)
    assert len(chunks) > 1
    assert all(len(c.text) <= 1000 for c in chunks)
    assert all(c.text == doc.text[c.start : c.end] == c.text.strip() for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    # every cut falls at a paragraph break, and the passages cover every paragraph in order
    assert all(c.text.startswith("Paragraph") and c.text.endswith("something.") for c in chunks)
    assert " ".join(c.text for c in chunks).split() == doc.text.split()


def test_a_passage_within_the_bound_stays_whole_and_the_bound_names_the_chunker() -> None:
    text = "word " * 1599 + "end"  # 7,998 characters: within the default bound
    assert len(PassageChunker().chunk(Document(text=text))) == 1
    assert PassageChunker(max_chars=500).name == "passage-500"
    with pytest.raises(ConfigError, match="max_chars must be at least 1, got 0"):
        PassageChunker(max_chars=0)
