"""Memory-mapped arrays as plain ndarray views."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quillian.stores.mapped import is_mapped, load_mapped


def test_a_mapped_array_is_a_plain_view_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.arange(10, dtype=np.int64))
    mapped = load_mapped(path)
    assert type(mapped) is np.ndarray and is_mapped(mapped)
    assert not mapped.flags.writeable  # read-only, as the file's mapping is
    assert mapped[3] == 3 and is_mapped(mapped[2:5])  # a view of a view still maps
    assert type(mapped[[1, 2]]) is np.ndarray and not is_mapped(mapped[[1, 2]])  # a copy


def test_reading_whole_gives_an_array_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.ones(4, dtype=np.float32))
    whole = load_mapped(path, mmap_file=False)
    assert not is_mapped(whole) and whole.flags.writeable
    assert not is_mapped(np.zeros(3))
