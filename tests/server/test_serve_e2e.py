"""End to end: ``quillian serve`` as a subprocess on a free loopback port with the
scripted model: upload, job done, answer plain and streamed, delete, and the deleted
document's passages are no longer retrieved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import quillian
from quillian.testing.server import free_port, sse_events, wait_for_job

KEY = "e2e-key"
QUESTION = "Where was the designer of the Difference Engine born?"
BABBAGE = (
    b"# Charles Babbage\n\nCharles Babbage was born in London. He designed the Difference Engine.\n"
)


@pytest.fixture
def served(index_copy, routes_file):
    port = free_port()
    here = str(Path(quillian.__file__).parents[1])  # run the quillian this test imported
    env = {**os.environ, "QUILLIAN_API_KEY": KEY, "PYTHONPATH": here}
    command = [sys.executable, "-m", "quillian.cli.main", "serve", f"wiki={index_copy}",
               "--llm", f"scripted:{routes_file}", "--port", str(port)]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": KEY}, timeout=60
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.stdout.read().decode() if process.stdout else ""
                raise RuntimeError(f"quillian serve did not start:\n{output}")
            time.sleep(0.1)
        yield client
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


def test_upload_answer_stream_delete(served):
    client = served
    upload = client.post(
        "/api/workspaces/wiki/documents/files",
        files=[("files", ("babbage2.md", BABBAGE, "text/markdown"))],
    )
    assert upload.status_code == 202
    job = wait_for_job(client, upload.headers["location"])
    assert job["state"] == "succeeded" and job["failures"] == []
    (doc_id,) = job["doc_ids"]

    ask = {"question": QUESTION, "method": "sa-rag", "options": {"k": 3}}
    plain = client.post("/api/workspaces/wiki/answer", json=ask).json()
    assert plain["answer"] == "London"
    assert "Difference Engine" in " ".join(p["text"] for p in plain["citations"]["passages"])

    with client.stream("POST", "/api/workspaces/wiki/answer", json={**ask, "stream": True}) as r:
        events = sse_events(r.iter_lines())
    names = [name for name, _ in events]
    assert names[0] == "retrieval" and names[-1] == "final"
    assert set(names[1:-1]) == {"step", "token"} and names.count("final") == 1
    assert names.index("token") > names.index("step")  # the retrieval step, then the text
    assert json.loads(events[-1][1])["answer"] == "London"

    def retrieved_ids():
        body = client.post(
            "/api/workspaces/wiki/retrieve",
            json={"query": "Difference Engine", "method": "bm25", "k": 10},
        ).json()
        return {p["chunk_id"] for p in body["passages"]}

    docs = client.get("/api/workspaces/wiki/documents", params={"limit": 100}).json()
    assert doc_id in [d["id"] for d in docs["documents"]]
    chunk_ids = retrieved_ids()
    deleted = client.delete(f"/api/workspaces/wiki/documents/{doc_id}")
    assert deleted.status_code == 202
    assert wait_for_job(client, deleted.headers["location"])["state"] == "succeeded"
    after = retrieved_ids()
    assert after < chunk_ids
    for method in ("bm25", "dense", "sa"):
        body = client.post(
            "/api/workspaces/wiki/retrieve",
            json={"query": "Difference Engine", "method": method, "k": 10},
        ).json()
        assert all("Difference Engine" not in p["text"] for p in body["passages"]), method
