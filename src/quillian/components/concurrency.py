"""Running CPU-bound work (retrieval, graph look-ups) off the event loop.

An :data:`Offload` takes a function and its arguments and awaits its result on a
worker thread, so one process keeps answering other questions (and the model keeps
streaming) while a retriever or a graph query computes. numpy, bm25s and the numba
kernels release the GIL in their inner loops, so the threads also overlap.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, Protocol, TypeVar

from quillian.errors import ConfigError

__all__ = ["Offload", "ThreadOffload", "to_thread"]

P = ParamSpec("P")
T = TypeVar("T")


class Offload(Protocol):
    """``await offload(fn, *args, **kwargs)``: ``fn``'s result, computed off the loop."""

    def __call__(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[T]: ...


async def to_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """The default offload: asyncio's shared thread pool."""
    return await asyncio.to_thread(fn, *args, **kwargs)


class ThreadOffload:
    """An offload on its own bounded pool of ``workers`` threads (an engine's)."""

    def __init__(self, workers: int = 4) -> None:
        if workers <= 0:
            raise ConfigError(f"workers must be greater than 0, got {workers}")
        self.workers = workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="quillian-cpu")

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        call: Callable[[], Any] = functools.partial(fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def close(self) -> None:
        """Stop accepting work; running calls finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)
