"""``quillian serve`` over a PostgreSQL workspace while its upload jobs rebuild it: every
retrieval is answered from one whole build (a real server and a real PostgreSQL; marked
``postgres``).

Issue 51: a 1-minute soak on PostgreSQL got 500 (``IndexError`` in
``RetrievalContext.page_entities``) on 1,958 of 6,830 retrievals after uploads, and 503s
("index ... damaged") without any restart. A reader opening the index pulled the
server's files into the local cache the build was writing at that moment: the build's
new files were replaced by the old ones and then not sent back, so the workspace
completed with the graph of one build and the tables of another.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import CORPUS, build_index, running, wait_for_job

pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres

#: People uploaded while the readers run, one document a job, one job after another.
PEOPLE = ("Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Donald Knuth", "Frances Allen")
METHODS = ("sa", "bm25", "ppr")


def person(name: str) -> dict[str, str]:
    return {"title": name, "text": f"{name} met Ada Lovelace in London. {name} was born there."}


def test_retrievals_during_uploads_are_whole_and_never_fail(
    postgres_url: str, tmp_path: Path
) -> None:
    build_index(postgres_url)  # type: ignore[arg-type]
    texts = dict(CORPUS) | {p["title"]: p["text"] for p in map(person, PEOPLE)}
    settings = ServerSettings(workspaces=(WorkspaceSpec.parse(f"pg={postgres_url}"),))
    failures: list[str] = []
    answered = [0]
    done = threading.Event()

    def read(base: str, method: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while not done.is_set():
                query = {"query": "Where was Ada Lovelace born?", "method": method, "k": 4}
                try:
                    response = client.post("/api/workspaces/pg/retrieve", json=query)
                except httpx.TransportError as exc:  # the server closed it after a 500
                    failures.append(f"{method} {exc!r}")
                    continue
                if response.status_code != 200:
                    failures.append(f"{method} {response.status_code} {response.text[:200]}")
                    continue
                answered[0] += 1
                for passage in response.json()["passages"]:
                    if texts.get(passage["title"], "") not in passage["text"]:
                        failures.append(f"{method}: {passage['title']!r} with {passage['text']!r}")

    def look_up(base: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while not done.is_set():
                try:
                    response = client.get("/api/workspaces/pg/documents/doc-unknown")
                except httpx.TransportError as exc:
                    failures.append(f"document {exc!r}")
                    continue
                if response.status_code != 404:
                    failures.append(f"document {response.status_code} {response.text[:200]}")

    with running(settings) as client:
        base = str(client.base_url)
        readers = [threading.Thread(target=read, args=(base, m)) for m in METHODS]
        readers += [threading.Thread(target=look_up, args=(base,)) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            for name in PEOPLE:
                job = client.post(
                    "/api/workspaces/pg/documents", json={"documents": [person(name)]}
                )
                assert job.status_code == 202
                assert wait_for_job(client, job.headers["location"])["state"] == "succeeded"
        finally:
            done.set()
            for reader in readers:
                reader.join(60)
        query = {"query": PEOPLE[-1], "method": "bm25", "k": 1}
        last = client.post("/api/workspaces/pg/retrieve", json=query).json()
        counts = client.get("/api/workspaces/pg").json()["counts"]
    assert failures == []
    assert answered[0] > 0
    assert last["passages"][0]["title"] == PEOPLE[-1]
    assert counts["documents"] == len(CORPUS) + len(PEOPLE)
