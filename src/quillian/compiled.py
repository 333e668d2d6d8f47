"""Kernels compiled by numba when first called, not when their module is imported.

numba's import takes about 0.3 s, the largest single part of the CLI's start, and its
kernels (spreading activation, the traversal's fan-out cap, PPR's unfolding, the
embedded vector sketches, the KGE scans) run only when retrieval or link prediction
does: a process that only indexes, adds or deletes never pays for it. A server that
answers questions imports it as it starts (:func:`prepare`), so its first answer does
not.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["njit_on_first_call", "prepare"]

F = TypeVar("F", bound=Callable[..., Any])

_LOCK = threading.Lock()


def njit_on_first_call(**options: Any) -> Callable[[F], F]:
    """``numba.njit(**options)``, applied to the function when it is first called (its
    compiled code is cached as with the decorator: ``cache=True`` keeps it on disk)."""

    def wrap(func: F) -> F:
        compiled: list[Callable[..., Any]] = []

        @functools.wraps(func)
        def call(*args: Any) -> Any:
            if not compiled:
                with _LOCK:
                    if not compiled:
                        import numba

                        compiled.append(numba.njit(**options)(func))
            return compiled[0](*args)

        return call  # type: ignore[return-value]  # same signature as func

    return wrap


def prepare() -> None:
    """Import numba now (a server's start), not at the first answer."""
    import numba  # noqa: F401
