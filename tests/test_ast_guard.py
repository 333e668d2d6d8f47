"""Headers of arrays read in several threads at once never fail (gh-106905's race)."""

import gc
import io
import sys
import threading
import time

import numpy as np

import quillian  # noqa: F401  (installs the guard)
from quillian._ast_guard import affected


def _header() -> io.BytesIO:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((3, 384), dtype=np.float32))
    return buffer


def test_array_headers_read_in_threads_under_collections_never_fail():
    """Three threads at different stack depths read ``.npy`` headers the way
    ``np.load`` does, while every collection hands the GIL on. On 3.11.7 without the
    guard this raised ``SystemError: AST constructor recursion depth mismatch`` in
    each of five runs (a build in CI failed so)."""
    raw = _header().getvalue()
    failures: list[BaseException] = []
    deadline = time.monotonic() + 20

    def read(depth: int) -> None:
        if depth:
            return read(depth - 1)
        for _ in range(1_500):
            if failures or time.monotonic() > deadline:
                return
            handle = io.BytesIO(raw)
            try:
                np.lib.format.read_magic(handle)
                shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
            except BaseException as exc:  # reported below, whatever it is
                failures.append(exc)
                return
            assert shape == (3, 384) and dtype == np.float32

    def hand_on(phase: str, _info: dict) -> None:
        if phase == "start":
            time.sleep(0.0002)  # releases the GIL mid-collection

    threshold = gc.get_threshold()
    gc.callbacks.append(hand_on)
    gc.set_threshold(10)
    try:
        threads = [threading.Thread(target=read, args=(d,)) for d in (0, 40, 80)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gc.callbacks.remove(hand_on)
        gc.set_threshold(*threshold)
    assert failures == []


def test_the_guard_is_on_only_where_the_fault_is():
    assert affected((3, 11, 7)) and affected((3, 12, 1)) and affected((3, 11, 0))
    assert not affected((3, 11, 8)) and not affected((3, 12, 2)) and not affected((3, 13, 0))
    import ast

    guarded = getattr(ast.parse, "__quillian_guard__", False)
    assert guarded == (sys.implementation.name == "cpython" and affected(sys.version_info[:3]))
    assert ast.literal_eval("{'shape': (3, 384)}") == {"shape": (3, 384)}
