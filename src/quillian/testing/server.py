"""Helpers for testing the HTTP API: a small corpus indexed with spaCy and the keyword
embedder, the scripted model's routes for it, a real uvicorn server on a free loopback
port (in a thread, stopped at the end), and a reader of server-sent events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

import quillian
from quillian.engine import IndexSettings, index_documents
from quillian.server.app import create_app
from quillian.server.load import free_port, stop_process
from quillian.server.settings import ServerSettings
from quillian.types import Document

__all__ = [
    "CORPUS",
    "QUESTION",
    "ROUTES",
    "build_index",
    "free_port",
    "running",
    "serve_process",
    "sse_events",
    "wait_for_job",
]

CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine. "
    "She was born in London.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a mechanical computer designed by "
    "Charles Babbage.",
    "Alan Turing": "Alan Turing was born in Maida Vale, London. He worked at Bletchley Park.",
}
QUESTION = "Where was the collaborator of Ada Lovelace born?"

#: The scripted model's answers: SA-RAG's answer prompt and vanilla RAG's note and answer.
ROUTES = {
    "sa-rag.answer": json.dumps(
        {"reasoning": "Babbage was born in London.", "final_answer": "London"}
    ),
    "kg-infused.passage-note": "Babbage, her collaborator, was born in London.",
    "kg-infused.answer": "London",
}

#: How the test index is built: spaCy entities, the model-free keyword embedder.
SETTINGS = IndexSettings(extractor="spacy", embedder="keyword")


def build_index(path: Path, corpus: dict[str, str] = CORPUS) -> Path:
    """Index ``corpus`` (title to text) into ``path``."""
    documents = [Document(text, title, "test") for title, text in corpus.items()]
    index_documents(path, documents, SETTINGS)
    return path


@contextmanager
def running(settings: ServerSettings, timeout_s: float = 30.0) -> Iterator[httpx.Client]:
    """A real uvicorn server for ``settings`` on a free loopback port, in a thread,
    stopped at the end; yields an HTTP client for it (with the API key, if any)."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name="quillian-test-server")
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    headers = {"X-API-Key": settings.api_key} if settings.api_key else {}
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=timeout_s
        ) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout_s)
        if thread.is_alive():
            raise RuntimeError("the server did not stop")


@contextmanager
def serve_process(
    args: Sequence[str], log: Path, env: Mapping[str, str] | None = None, timeout_s: float = 60.0
) -> Iterator[str]:
    """``quillian serve ARGS`` as a child process (the quillian this process imported) on a
    free loopback port, its output in ``log``; yields its base URL once ``/healthz``
    answers, and stops it at the end (terminated, killed if it lingers)."""
    port = free_port()
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(Path(quillian.__file__).parents[1])}
    command = [sys.executable, "-m", "quillian.cli.main", "serve", *args, "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"quillian serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        stop_process(process, 20)


def wait_for_job(client: httpx.Client, location: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll a job until it has finished; its last state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(location).json()
        if job["state"] in ("succeeded", "partial", "failed", "cancelled"):
            return job
        time.sleep(0.05)
    raise TimeoutError(f"job {location} did not finish in {timeout_s} s")


def sse_events(lines: Iterable[str]) -> list[tuple[str | None, str]]:
    """``(event name, data)`` of each server-sent event in ``lines``."""
    events: list[tuple[str | None, str]] = []
    name: str | None = None
    data: list[str] = []
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            events.append((name, "\n".join(data)))
            name, data = None, []
    if data:
        events.append((name, "\n".join(data)))
    return events
