"""End to end: ``quillian serve`` as a subprocess on a free loopback port with the
scripted model: upload, job done, answer plain and streamed, delete, and the deleted
document's passages are no longer retrieved."""

from __future__ import annotations

import json

import httpx
import pytest

from quillian.testing.server import serve_process, sse_events, wait_for_job

KEY = "e2e-key"
QUESTION = "Where was the designer of the Difference Engine born?"
BABBAGE = (
    b"# Charles Babbage\n\nCharles Babbage was born in London. He designed the Difference Engine.\n"
)


@pytest.fixture
def served(index_copy, routes_file, tmp_path):
    args = [f"wiki={index_copy}", "--llm", f"scripted:{routes_file}"]
    with (
        serve_process(args, tmp_path / "serve.log", {"QUILLIAN_API_KEY": KEY}) as url,
        httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=60) as client,
    ):
        yield client


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
