"""One thread at a time builds a syntax tree, on the Pythons whose tree builder shared
its recursion counter among threads.

CPython 3.11.0-3.11.7 and 3.12.0-3.12.1 kept the counter that guards the building of
an ``ast`` tree in the interpreter's state, not in the call (gh-106905, fixed in
3.11.8 and 3.12.2). A collection during one thread's build can hand the GIL to
another thread that builds a tree too, and the first then fails with ``SystemError:
AST constructor recursion depth mismatch`` although its tree is right. numpy reads
each ``.npy`` header with :func:`ast.literal_eval`, and an index reads its arrays in
several threads at once (a build's graph writer beside its stages, a served
retrieval's members): a build failed so on 3.11.7 (CI, stop 89), and so could a
served request.

On those Pythons :func:`ast.parse`, which :func:`ast.literal_eval` calls, is made to
hold a lock while it runs. Re-entrant, for a collection's finalizer that parses in
the thread that already holds it. Installed once, when :mod:`quillian` is imported;
nothing changes on a Python without the fault.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["affected", "install"]

_LOCK = threading.RLock()


def affected(version: tuple[int, int, int]) -> bool:
    """Whether a CPython of ``version`` shares the tree builder's counter among threads."""
    return (3, 11) <= version < (3, 11, 8) or (3, 12) <= version < (3, 12, 2)


def _serialised(parse: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(parse)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return parse(*args, **kwargs)

    locked.__quillian_guard__ = True  # type: ignore[attr-defined]
    return locked


def install() -> None:
    """Guard :func:`ast.parse` where this Python needs it (once, however often called)."""
    if sys.implementation.name != "cpython" or not affected(sys.version_info[:3]):
        return
    with _LOCK:
        if not getattr(ast.parse, "__quillian_guard__", False):
            ast.parse = _serialised(ast.parse)
