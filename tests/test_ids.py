"""Content-derived ids: distinct parts give distinct ids whatever characters they hold."""

from __future__ import annotations

import hashlib
import itertools

from quillian.types import Document, stable_id, stable_ids


def test_parts_holding_the_separator_do_not_collide():
    """Text may hold U+001F (the parts' separator): two documents whose title and text
    join to the same string got one id, so the second was taken as already indexed."""
    assert Document("c", "a\x1fb").id != Document("b\x1fc", "a").id
    assert stable_id("x", "a\x1fb", "c") != stable_id("x", "a", "b\x1fc")
    assert stable_id("x", "a\x1e", "\x1fb") != stable_id("x", "a\x1e\x1f", "b")


def test_every_split_of_tricky_text_has_its_own_id():
    """Exhaustively over short parts made of 'a', U+001E and U+001F: one id per tuple."""
    alphabet = ["", "a", "\x1e", "\x1f", "\x1e\x1f", "\x1f\x1e", "\x1e\x1e", "a\x1f"]
    tuples = [p for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    assert len({stable_id("x", *parts) for parts in tuples}) == len(tuples)


def test_ids_of_ordinary_text_are_unchanged():
    """Parts without U+001E or U+001F hash as before the escape: indexes keep their ids."""
    before = hashlib.sha256("\x1f".join(["Ada", "born in London"]).encode()).hexdigest()
    assert stable_id("doc", "Ada", "born in London") == f"doc-{before[:16]}"


def test_ids_in_one_pass_equal_one_at_a_time():
    """:func:`stable_ids` over every tricky split (escapes, separators, empty parts)."""
    alphabet = ["", "a", "\x1e", "\x1f", "\x1e\x1f", "\x1f\x1e", "\x1e\x1e", "a\x1f", "ü"]
    tuples = [p for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    assert stable_ids("desc", tuples) == [stable_id("desc", *parts) for parts in tuples]


def test_a_chunk_hashes_its_id_once_and_the_cache_is_not_part_of_it():
    """A chunk keeps its id after the first read (builds read every chunk's id in several
    passes); equality, pickling, ``replace`` and ``asdict`` see only the chunk's fields."""
    import dataclasses
    import pickle

    from quillian.types import Chunk

    chunk = Chunk("doc-1", 0, "Ada was born in London.", 0, 23, "Ada")
    expected = stable_id("chunk", "doc-1", "0", "Ada was born in London.")
    assert chunk.id == expected and chunk.id is chunk.id
    fresh = Chunk("doc-1", 0, "Ada was born in London.", 0, 23, "Ada")
    assert fresh == chunk and hash(fresh) == hash(chunk)
    assert pickle.loads(pickle.dumps(chunk)).id == expected
    moved = dataclasses.replace(chunk, index=1)
    assert moved.id == stable_id("chunk", "doc-1", "1", "Ada was born in London.")
    fields = ["doc_id", "index", "text", "start", "end", "title"]
    assert list(dataclasses.asdict(chunk)) == fields and Chunk(**dataclasses.asdict(chunk)) == chunk
