"""A sequence held as blocks: the same values as a list under any sequence of patches,
read and sliced as a list is, each patch making again only the blocks it falls in."""

import gc
import pickle
import random

import pytest

from quillian.index import blocks
from quillian.index.blocks import Blocks


@pytest.mark.parametrize("size", [1, 3, 8, blocks.SIZE])
def test_any_sequence_of_patches_gives_the_list_patched_alike(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    monkeypatch.setattr(blocks, "SIZE", size)
    rng = random.Random(size)
    model = list(range(rng.randint(0, 40)))
    seq = Blocks.of(model)
    made = 1000
    for _ in range(300):
        edits = []
        at = 0
        for _ in range(rng.randint(0, 4)):
            low = rng.randint(at, len(model))
            high = rng.randint(low, min(len(model), low + rng.choice([0, 1, 2, 5, 20])))
            edits.append((low, high, [made + i for i in range(rng.randint(0, 6))]))
            made += 10
            at = high
        for low, high, values in reversed(edits):
            model[low:high] = values
        before = seq
        seq = seq.spliced(edits)
        assert seq == model and len(seq) == len(model) and list(seq) == model
        assert all(block for block in seq.blocks) and all(len(b) <= size for b in seq.blocks)
        assert len(seq.blocks) <= 2 * (len(model) // size) + 16
        if edits and len(before.blocks) > 4:  # the blocks no edit fell in are shared
            shared = {id(b) for b in before.blocks} & {id(b) for b in seq.blocks}
            assert shared or len(seq.blocks) == -(-len(model) // size)
        for i in range(-len(model), len(model)):
            assert seq[i] == model[i]
        for _ in range(5):
            a, b = rng.randint(-50, 50), rng.randint(-50, 50)
            step = rng.choice([None, 1, 2, -1, -3])
            assert seq[a:b:step] == model[a:b:step]


def test_a_blocks_sequence_reads_as_a_list() -> None:
    seq = Blocks.of(["a", "b", "c"])
    assert seq == ["a", "b", "c"] and seq == ("a", "b", "c")
    assert ["a", "b", "c"].__eq__(seq) is NotImplemented  # so a list compares by ours
    assert seq != ["a", "b"] and seq != ["a", "b", "d"] and seq != "abc"
    assert seq == Blocks.of(["a", "b", "c"]) and Blocks.of(seq) is seq
    assert seq.index("b") == 1 and "c" in seq and list(reversed(seq)) == ["c", "b", "a"]
    with pytest.raises(IndexError):
        seq[3]
    with pytest.raises(IndexError):
        seq[-4]
    with pytest.raises(TypeError):
        hash(seq)
    assert pickle.loads(pickle.dumps(seq)) == seq
    empty = Blocks.of([])
    assert empty == [] and len(empty) == 0 and empty[0:5] == []
    assert empty.spliced([(0, 0, ["x"])]) == ["x"]


def test_edits_out_of_order_or_of_range_are_refused() -> None:
    seq = Blocks.of(range(10))
    with pytest.raises(ValueError, match="out of order"):
        seq.spliced([(5, 6, []), (2, 3, [])])
    with pytest.raises(ValueError, match="out of"):
        seq.spliced([(8, 11, [])])
    with pytest.raises(ValueError, match="out of"):
        seq.spliced([(4, 3, [])])


def test_the_collector_does_not_walk_the_values() -> None:
    """Blocks of strings are untracked by the garbage collector once it has seen them:
    its full collections walk the blocks, not every value."""
    seq = Blocks.of([f"chunk-{i}" for i in range(5000)]).spliced([(10, 12, ["x", "y", "z"])])
    gc.collect()
    assert not any(gc.is_tracked(block) for block in seq.blocks)
