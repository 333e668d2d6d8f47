"""Any text a JSON string can hold round-trips exactly through a real server: upload,
stored document, retrieved passage; a lone surrogate is refused naming its document
(issue 51, "faithful text")."""

from __future__ import annotations

import itertools
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import ROUTES, running, wait_for_job

#: Characters that break lines for ``str.splitlines`` or are otherwise easy to lose.
AWKWARD = [
    *"\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\x1f\r\n\x00\x01\x7f\ufeff\t ",
    "😀",
    "\U0010ffff",
]
#: Any text but a lone surrogate (category Cs).
TEXT = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(AWKWARD)), max_size=40
)
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
FIELDS = ("text", "title", "metadata")
EXAMPLES = settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def post_json(client, body):
    """POST documents as JSON with ASCII escapes (so lone surrogates travel too)."""
    return client.post(
        "/api/workspaces/main/documents",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )


def test_any_text_round_trips_through_the_server(index_copy):
    config = ServerSettings(
        workspaces=(WorkspaceSpec("main", index_copy),), llm=ScriptedChatModel(ROUTES)
    )
    markers = itertools.count()
    with running(config) as client:

        @EXAMPLES
        @given(docs=st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=3))
        def round_trip(docs):
            sent = []
            for title, before, after in docs:
                marker = f"zmark{next(markers)}z"
                sent.append((marker, {"title": title, "text": f"{before} {marker} {after}"}))
            response = post_json(client, {"documents": [doc for _, doc in sent]})
            assert response.status_code == 202, response.text
            job = wait_for_job(client, response.headers["location"])
            assert job["state"] == "succeeded" and job["documents_failed"] == 0, job["failures"]
            for (marker, doc), doc_id in zip(sent, job["doc_ids"], strict=True):
                got = client.get(f"/api/workspaces/main/documents/{doc_id}").json()
                assert (got["title"], got["text"]) == (doc["title"], doc["text"])
                body = {"query": marker, "method": "bm25", "k": 1}
                found = client.post("/api/workspaces/main/retrieve", json=body).json()
                assert found["passages"][0]["text"] == doc["text"].strip()

        round_trip()

        @EXAMPLES
        @given(good=TEXT, before=TEXT, lone=SURROGATE, after=TEXT, field=st.sampled_from(FIELDS))
        def refused(good, before, lone, after, field):
            bad = before + lone + after
            kept = {"text": f"kept {good}"}
            body = {"documents": [kept, {"text": "x", "title": "t", "metadata": {"n": 1}}]}
            body["documents"][1][field] = {"n": bad} if field == "metadata" else bad
            response = post_json(client, body)
            job = wait_for_job(client, response.headers["location"])
            assert job["state"] == "partial" and job["documents_failed"] == 1
            (failure,) = job["failures"]
            assert failure["error"].startswith(f"document 1: {field} holds an unpaired surrogate")
            assert f"at character {len(before)})" in failure["error"]

        refused()
