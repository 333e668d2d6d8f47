"""KeyedVectors presents a collection keyed by content as the positional index the
retrievers read; vector_keys derives the keys and check_distinct refuses a collision."""

import hashlib
from pathlib import Path

import numpy as np
import pytest

from quillian.components.retrieval.keyed import KeyedVectors, check_distinct, vector_keys
from quillian.errors import InputError, StoreError, UnknownIdError
from quillian.stores.embedded.vectors import ExactVectorIndex
from quillian.testing.contracts import unit_vectors

DIM = 8


def test_keys_depend_on_model_and_text_and_are_never_positions() -> None:
    keys = vector_keys("model-a", ["x", "y", "x"])
    assert keys[0] == keys[2] != keys[1]
    assert (keys >= 1 << 62).all()  # non-negative int64s above every position
    assert not set(vector_keys("model-b", ["x", "y"]).tolist()) & set(keys.tolist())


def test_a_key_is_the_texts_blake2b_under_the_model_with_bit_62_set() -> None:
    texts = ["", "x", "Zoë's \u00e9t\u00e9", "a" * 10_000]
    expected = []
    for text in texts:
        digest = hashlib.blake2b(b"model-a\x00" + text.encode(), digest_size=8).digest()
        expected.append((int.from_bytes(digest, "little") & ((1 << 62) - 1)) | 1 << 62)
    keys = vector_keys("model-a", texts)
    assert keys.dtype == np.int64 and keys.tolist() == expected
    assert vector_keys("model-a", []).shape == (0,)


def test_a_collision_is_refused_naming_both_texts() -> None:
    # one text twice: fine
    check_distinct(np.array([5, 7, 5]), ["a", "b", "a"].__getitem__, "texts")
    with pytest.raises(StoreError, match=r"'texts': 'alpha' and 'beta' hash to the same key 9"):
        check_distinct(np.array([9, 3, 9]), ["alpha", "gamma", "beta"].__getitem__, "texts")


@pytest.fixture
def keyed(tmp_path: Path):
    """Positions 0..4 over keys 40, 10, 30, 10, 20 (positions 1 and 3 share a text), in
    a collection that also holds key 99, which no position names."""
    x = unit_vectors(5, DIM, 0)
    collection = ExactVectorIndex(tmp_path, DIM)
    collection.add([10, 20, 30, 40, 99], x)
    keys = np.array([40, 10, 30, 10, 20], np.int64)
    yield KeyedVectors(collection, keys), x
    collection.close()


def test_get_reads_by_position(keyed) -> None:
    index, x = keyed
    assert len(index) == 5 and index.dim == DIM
    np.testing.assert_allclose(index.get([0, 1, 3, 4]), x[[3, 0, 0, 1]], atol=1e-6)
    with pytest.raises(UnknownIdError):
        index.get([5])


def test_search_maps_keys_to_positions_and_drops_unknown_ones(keyed) -> None:
    index, x = keyed
    ids, scores = index.search(x[4], 5)  # key 99 is the best match: not a position
    assert -1 not in ids[0].tolist() and sorted(ids[0].tolist()) == [0, 1, 2, 3, 4]
    assert ids[0, 0] != -1 and scores[0, 0] < 1.0 - 1e-6
    ids, scores = index.search(x[0], 2)  # key 10: positions 1 and 3, in order, tied
    assert ids[0].tolist() == [1, 3] and scores[0, 0] == scores[0, 1]
    assert index.search(np.stack([x[2], x[1]]), 1)[0].tolist() == [[2], [4]]
    with pytest.raises(InputError, match="k"):
        index.search(x[0], 0)
    with pytest.raises(StoreError, match="read-only"):
        index.delete([1])
