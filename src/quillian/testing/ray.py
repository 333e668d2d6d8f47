"""Ray in tests: a local instance that is checked to stay on loopback and is always
stopped, and extractors that let a test kill a worker in the middle of a job."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType

import psutil

from quillian.components.extraction.base import Extraction, Extractor
from quillian.errors import MissingExtraError
from quillian.index.ray_cluster import listeners_off_loopback, ray_processes, ray_session
from quillian.types import Chunk

__all__ = [
    "MissingInWorker",
    "PidReportingExtractor",
    "ProcessDying",
    "kill_first_worker",
    "local_ray",
]

#: Seconds a test's Ray node is given to start (Ray's own default: 60).
RAYLET_START_WAIT_S = 180


@contextmanager
def local_ray(num_cpus: int = 2) -> Iterator[ModuleType]:
    """A local Ray instance for the block. On entry it asserts that no Ray process
    listens off loopback; on exit Ray is shut down and any process it left is killed."""
    before = {p.pid for p in ray_processes()}
    # Ray gives its node 60 s to start; a machine running other work (CI beside other
    # jobs) can take longer, and the test would fail on its start, not on Quillian
    os.environ.setdefault("RAY_raylet_start_wait_time_s", str(RAYLET_START_WAIT_S))
    with ray_session("local", num_cpus=num_cpus) as ray:
        try:
            off = listeners_off_loopback()
            assert not off, f"Ray listens off loopback: {off}"
            yield ray
        finally:
            started = [p for p in ray_processes() if p.pid not in before]  # workers too
            ray.shutdown()
            _kill(started)


def _kill(processes: Sequence[psutil.Process]) -> None:
    alive = [p for p in processes if p.is_running()]
    for proc in alive:
        with suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=10)


class PidReportingExtractor:
    """Wraps an extractor: before each call it writes a file named by its process id
    into ``folder`` and waits ``delay`` seconds, so a test knows which worker process
    is extracting, and has time to kill it."""

    def __init__(self, inner: Callable[[], Extractor], folder: str, delay: float = 0.0) -> None:
        self.inner = inner()
        self.name = self.inner.name
        self.folder = Path(folder)
        self.delay = delay

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        (self.folder / str(os.getpid())).touch()
        time.sleep(self.delay)
        return self.inner.extract(chunks)


class ProcessDying:
    """An extractor whose worker process exits at once on every call: a worker that
    dies for good."""

    name = "dying"

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        os._exit(1)


class MissingInWorker:
    """An extractor the driver (process ``driver``) makes from ``inner`` and a worker
    cannot make at all: the worker lacks an extra."""

    def __init__(self, driver: int, inner: Callable[[], Extractor]) -> None:
        if os.getpid() != driver:
            raise MissingExtraError("spacy", "nlp")
        self.inner = inner()
        self.name = self.inner.name

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        return self.inner.extract(chunks)


def kill_first_worker(folder: Path, timeout: float = 120.0) -> tuple[threading.Thread, list[int]]:
    """Start a thread that SIGKILLs the first process to report itself in ``folder``
    (see :class:`PidReportingExtractor`); returns the thread and the list the killed
    pid is put in."""
    killed: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [int(p.name) for p in folder.iterdir()]
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, killed
