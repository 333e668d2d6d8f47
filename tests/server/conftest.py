"""Fixtures of the server tests: a small index built with spaCy and the hash embedder,
the scripted model's routes, and a real uvicorn server on a free loopback port."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from quillian.engine import IndexSettings, index_documents
from quillian.server.app import create_app
from quillian.server.settings import ServerSettings
from quillian.types import Document

CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine. "
    "She was born in London.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a mechanical computer designed by "
    "Charles Babbage.",
    "Alan Turing": "Alan Turing was born in Maida Vale, London. He worked at Bletchley Park.",
}

#: The scripted model's answers: SA-RAG's answer prompt says London; vanilla RAG's note.
ROUTES = {
    "sa-rag.answer": json.dumps(
        {"reasoning": "Babbage was born in London.", "final_answer": "London"}
    ),
    "kg-infused.passage-note": "Babbage, her collaborator, was born in London.",
    "kg-infused.answer": "London",
}

SETTINGS = IndexSettings(extractor="spacy", embedder="hash")


def build_index(path: Path, corpus: dict[str, str] = CORPUS) -> Path:
    index_documents(
        path, [Document(text, title, "test") for title, text in corpus.items()], SETTINGS
    )
    return path


@pytest.fixture(scope="session")
def built_index(tmp_path_factory) -> Path:
    return build_index(tmp_path_factory.mktemp("built") / "idx")


@pytest.fixture
def index_copy(built_index, tmp_path) -> Path:
    """A fresh copy of the built index, for tests that change it."""
    import shutil

    target = tmp_path / "idx"
    shutil.copytree(built_index, target)
    return target


@pytest.fixture
def routes_file(tmp_path) -> Path:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(ROUTES))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(settings: ServerSettings, timeout_s: float = 30.0) -> Iterator[httpx.Client]:
    """A real uvicorn server on a free loopback port, in a thread, stopped at the end;
    yields a client for it."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
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
        assert not thread.is_alive(), "the server did not stop"


def wait_for_job(client: httpx.Client, location: str, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(location).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {location} did not finish in {timeout_s} s")


def sse_events(lines: Iterator[str]) -> list[tuple[str | None, str]]:
    """``(event name, data)`` of each server-sent event."""
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
