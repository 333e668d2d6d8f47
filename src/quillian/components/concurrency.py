"""Running CPU-bound work (retrieval, graph look-ups) off the event loop.

An :data:`Offload` takes a function and its arguments and awaits its result on a
worker thread, so one process keeps answering other questions (and the model keeps
streaming) while a retriever or a graph query computes. numpy, bm25s and the numba
kernels release the GIL in their inner loops, so the threads also overlap.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, Protocol, TypeVar

from quillian.errors import ConfigError, MissingExtraError

__all__ = ["Offload", "ThreadOffload", "in_thread", "to_thread"]

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
    """An offload on its own bounded pool of ``workers`` threads (an engine's).

    With ``blas_threads``, each thread runs the BLAS libraries under numpy's matrix
    products on that many threads, set in the thread itself: a library built on OpenMP
    (faiss's OpenBLAS) keeps the setting per thread, where one on its own pthreads pool
    (numpy's and scipy's) keeps one for the process."""

    def __init__(self, workers: int = 4, blas_threads: int | None = None) -> None:
        if workers <= 0:
            raise ConfigError(f"workers must be greater than 0, got {workers}")
        if blas_threads is not None and blas_threads <= 0:
            raise ConfigError(f"blas_threads must be greater than 0, got {blas_threads}")
        self.workers = workers
        if blas_threads is None:
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="quillian-cpu")
            return
        try:
            from threadpoolctl import threadpool_limits
        except ImportError as exc:
            raise MissingExtraError("threadpoolctl", "serve") from exc
        self._pool = ThreadPoolExecutor(
            workers,
            thread_name_prefix="quillian-cpu",
            initializer=functools.partial(threadpool_limits, blas_threads, "blas"),
        )

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        call: Callable[[], Any] = functools.partial(fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def close(self) -> None:
        """Stop accepting work; running calls finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def in_thread(call: Callable[..., T], *args: object, name: str) -> Future[T]:
    """``call(*args)`` run in a thread of its own; its future gives the result, or
    raises what it raised."""
    future: Future[T] = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(call(*args))
            except BaseException as exc:  # handed to whoever waits for the result
                future.set_exception(exc)

    threading.Thread(target=run, name=name).start()
    return future
