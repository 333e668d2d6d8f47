"""Documents and ingestion jobs on a real server: 202 with Location, progress as
server-sent events, pagination, uploads with bad files, exact deletion, cancel, resume
after a restart, isolation between workspaces, queries served during ingestion, and an
index another process writes opened once its build completes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.server.jobstore import Job, JobKind, JobState, JobStore
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import CORPUS, ROUTES, build_index, running, sse_events, wait_for_job
from quillian.testing.tables import table_rows
from quillian.types import Document

HOPPER = {"title": "Grace Hopper", "text": "Grace Hopper was born in New York City."}


def settings_for(*indexes, **extra) -> ServerSettings:
    spaces = tuple(WorkspaceSpec(f"ws{i}", path) for i, path in enumerate(indexes))
    return ServerSettings(workspaces=spaces, llm=ScriptedChatModel(ROUTES), **extra)


def titles(client, query, ws="ws0", k=8):
    body = client.post(
        f"/api/workspaces/{ws}/retrieve", json={"query": query, "method": "bm25", "k": k}
    )
    return [p["title"] for p in body.json()["passages"]]


def many(n):
    return [{"title": f"Person {i}", "text": f"Person {i} was born in Town {i}."} for i in range(n)]


def test_upload_json_then_progress_stream_then_list(index_copy):
    with running(settings_for(index_copy)) as client:
        response = client.post("/api/workspaces/ws0/documents", json={"documents": [HOPPER]})
        assert response.status_code == 202
        location = response.headers["location"]
        assert location == f"/api/workspaces/ws0/jobs/{response.json()['id']}"
        with client.stream("GET", f"{location}/events") as stream:
            events = sse_events(stream.iter_lines())
        names = [name for name, _ in events]
        assert names[-1] == "done" and set(names[:-1]) <= {"progress"}
        done = json.loads(events[-1][1])
        assert (
            done["state"] == "succeeded" and done["documents_done"] == done["documents_total"] == 1
        )
        assert done["report"]["counts"]["documents"] == len(CORPUS) + 1
        assert (
            "New York City"
            in client.post(
                "/api/workspaces/ws0/retrieve",
                json={"query": "Grace Hopper", "method": "bm25", "k": 1},
            ).json()["passages"][0]["text"]
        )
        first = client.get("/api/workspaces/ws0/documents", params={"limit": 2}).json()
        rest = client.get("/api/workspaces/ws0/documents", params={"offset": 2, "limit": 10}).json()
        assert first["total"] == rest["total"] == len(CORPUS) + 1
        ids = [d["id"] for d in first["documents"] + rest["documents"]]
        assert len(ids) == len(set(ids)) == len(CORPUS) + 1 and ids == sorted(ids)
        assert {d["status"] for d in first["documents"] + rest["documents"]} == {"processed"}
        (hopper,) = done["doc_ids"]
        detail = client.get(f"/api/workspaces/ws0/documents/{hopper}").json()
        assert detail["text"] == HOPPER["text"] and detail["title"] == "Grace Hopper"
        assert detail["status"] == "processed" and len(detail["chunk_ids"]) == detail["chunks"] == 1
        assert client.get("/api/workspaces/ws0/documents/doc-nope").status_code == 404
        jobs = client.get("/api/workspaces/ws0/jobs").json()
        assert jobs["total"] == 1 and jobs["jobs"][0]["id"] == done["id"]


def test_uploaded_files_bad_ones_fail_with_their_error_others_are_ingested(index_copy):
    with running(settings_for(index_copy)) as client:
        before = client.get("/api/workspaces/ws0/documents").json()["total"]
        files = [
            (
                "files",
                (
                    "hopper.md",
                    b"# Grace Hopper\n\nGrace Hopper was born in New York City.",
                    "text/markdown",
                ),
            ),
            ("files", ("paper.pdf", b"%PDF-1.4 binary", "application/pdf")),
            ("files", ("latin1.txt", "caf\u00e9 cr\u00e8me".encode("latin-1"), "text/plain")),
            ("files", ("blob.txt", bytes(range(256)), "application/octet-stream")),
        ]
        response = client.post("/api/workspaces/ws0/documents/files", files=files)
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "partial" and job["documents_failed"] == 3
        errors = {f["source"]: f["error"] for f in job["failures"]}
        assert set(errors) == {"paper.pdf", "latin1.txt", "blob.txt"}
        assert "unsupported file type '.pdf'" in errors["paper.pdf"]
        assert "invalid UTF-8" in errors["latin1.txt"] and "latin1.txt" in errors["latin1.txt"]
        assert "/tmp" not in errors["blob.txt"]
        assert job["documents_total"] == 4 and job["documents_done"] == 4
        assert titles(client, "Grace Hopper New York")[0] == "Grace Hopper"

        only_bad = [("files", ("paper.pdf", b"%PDF-1.4", "application/pdf"))]
        refused = client.post("/api/workspaces/ws0/documents/files", files=only_bad)
        assert refused.status_code == 400 and "paper.pdf" in refused.json()["detail"]
        empty = client.post("/api/workspaces/ws0/documents", json={"documents": []})
        assert empty.status_code == 422
        blank = client.post("/api/workspaces/ws0/documents", json={"documents": [{"text": "  "}]})
        assert blank.status_code == 400 and "blank" in blank.json()["detail"]
        after = client.get("/api/workspaces/ws0/documents").json()["total"]
        assert after == before + 1  # nothing lost, the good file added


def _tables(path):
    """The graph tables' rows by position, each text once."""
    return table_rows(path)


def test_delete_is_exact_and_the_passages_are_gone(index_copy, tmp_path):
    without = {t: text for t, text in CORPUS.items() if t != "Charles Babbage"}
    expected = build_index(tmp_path / "without", without)
    with running(settings_for(index_copy)) as client:
        docs = client.get("/api/workspaces/ws0/documents").json()["documents"]
        (babbage,) = [d["id"] for d in docs if d["title"] == "Charles Babbage"]
        assert "Charles Babbage" in titles(client, "Charles Babbage born London")
        response = client.delete(f"/api/workspaces/ws0/documents/{babbage}")
        assert response.status_code == 202
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "succeeded" and job["kind"] == "delete"
        assert "Charles Babbage" not in titles(client, "Charles Babbage born London")
        left = client.get("/api/workspaces/ws0/documents").json()
        assert left["total"] == len(CORPUS) - 1 and babbage not in [
            d["id"] for d in left["documents"]
        ]
        assert client.delete(f"/api/workspaces/ws0/documents/{babbage}").status_code == 404
    assert _tables(index_copy) == _tables(expected)


def test_cancel_keeps_the_index_whole_and_queries_are_served_during_ingestion(index_copy):
    with running(settings_for(index_copy)) as client:
        big = client.post("/api/workspaces/ws0/documents", json={"documents": many(150)})
        queued = client.post("/api/workspaces/ws0/documents", json={"documents": many(160)[150:]})
        served = 0
        while client.get(big.headers["location"]).json()["state"] in ("queued",):
            time.sleep(0.01)
        for _ in range(5):  # while the first job runs
            assert client.post("/api/workspaces/ws0/retrieve", json={"query": "Babbage"}).is_success
            served += 1
        cancelled = client.post(f"{queued.headers['location']}/cancel").json()
        assert cancelled["state"] == "cancelled"
        stopping = client.post(f"{big.headers['location']}/cancel")
        assert stopping.status_code in (200, 409)
        first = wait_for_job(client, big.headers["location"])
        assert first["state"] in ("cancelled", "succeeded")
        stored = len(CORPUS) + first["documents_done"]
        assert wait_for_job(client, queued.headers["location"])["state"] == "cancelled"
        docs = client.get("/api/workspaces/ws0/documents", params={"limit": 500}).json()
        assert {d["status"] for d in docs["documents"]} == {"processed"}
        workspace = client.get("/api/workspaces/ws0").json()
        assert workspace["state"] == "complete"
        assert workspace["counts"]["documents"] == docs["total"] == stored < len(CORPUS) + 160
        assert served == 5 and titles(client, "Charles Babbage")


def left_running(index, documents) -> Job:
    """What a server stopped mid-job leaves: an add job of ``documents`` on record as
    running, and the index building."""
    store = JobStore(index / "server")
    docs = [Document(d["text"], d["title"], "api") for d in documents]
    job = Job.new(JobKind.ADD, [d.id for d in docs])
    job.state = JobState.RUNNING
    store.create(job, docs)
    store.close()
    manifest = json.loads((index / "manifest.json").read_text())
    (index / "manifest.json").write_text(json.dumps({**manifest, "state": "building"}))
    return job


def test_a_restarted_server_resumes_unfinished_jobs(index_copy):
    """A server stopped mid-job left the job running and the index building: the next
    one takes the job up and finishes the index."""
    job = left_running(index_copy, [HOPPER, *many(3)])
    with running(settings_for(index_copy)) as client:
        done = wait_for_job(client, f"/api/workspaces/ws0/jobs/{job.id}")
        assert done["state"] == "succeeded" and done["resumed"] == 1
        assert client.get("/api/workspaces/ws0").json()["state"] == "complete"
        assert "Grace Hopper" in titles(client, "Grace Hopper")


def test_workspaces_are_isolated(index_copy, tmp_path):
    other = build_index(tmp_path / "other", {"Grace Hopper": HOPPER["text"]})
    with running(settings_for(index_copy, other)) as client:
        assert titles(client, "Grace Hopper", "ws1") == ["Grace Hopper"]
        assert "Grace Hopper" not in titles(client, "Grace Hopper", "ws0")
        response = client.post("/api/workspaces/ws1/documents", json={"documents": many(1)})
        wait_for_job(client, response.headers["location"])
        assert client.get("/api/workspaces/ws1").json()["counts"]["documents"] == 2
        assert client.get("/api/workspaces/ws0").json()["counts"]["documents"] == len(CORPUS)
        assert client.get("/api/workspaces/ws0/jobs").json()["total"] == 0
        job_path = response.headers["location"].replace("/ws1/", "/ws0/")
        assert client.get(job_path).status_code == 404


def test_a_server_stopped_mid_ingestion_leaves_the_job_to_the_next(index_copy):
    with running(settings_for(index_copy)) as client:
        response = client.post("/api/workspaces/ws0/documents", json={"documents": many(300)})
        location = response.headers["location"]
        while client.get(location).json()["stage"] != "ingest":
            time.sleep(0.01)
    store = JobStore(index_copy / "server")
    left = store.get(response.json()["id"])
    store.close()
    assert left is not None and left.state in (JobState.RUNNING, JobState.SUCCEEDED)
    with running(settings_for(index_copy)) as client:
        done = wait_for_job(client, location)
        assert done["state"] == "succeeded"
        assert done["resumed"] == (1 if left.state == JobState.RUNNING else 0)
        assert done["documents_done"] == 300
        workspace = client.get("/api/workspaces/ws0").json()
        assert workspace["state"] == "complete"
        assert workspace["counts"]["documents"] == len(CORPUS) + 300


def test_documents_another_process_indexes_are_served_once_its_build_completes(index_copy):
    """``quillian index`` run beside a server: the server keeps answering from the build
    it opened, then opens the one the other process completed (within a second)."""
    add = (
        "import sys; from pathlib import Path; from quillian.testing.server import build_index; "
        f"build_index(Path(sys.argv[1]), {{{HOPPER['title']!r}: {HOPPER['text']!r}}})"
    )
    with running(settings_for(index_copy)) as client:
        assert "Grace Hopper" not in titles(client, "Grace Hopper")
        subprocess.run([sys.executable, "-c", add, str(index_copy)], check=True, timeout=120)
        deadline = time.monotonic() + 10
        while "Grace Hopper" not in titles(client, "Grace Hopper"):
            assert time.monotonic() < deadline, "the server never opened the new build"
            time.sleep(0.2)
        assert client.get("/api/workspaces/ws0").json()["counts"]["documents"] == len(CORPUS) + 1


#: Characters ``str.splitlines`` breaks at besides ``\n``, with NUL, other controls and
#: an astral character: text an upload must keep exactly.
BREAKERS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\r\x00\x01\x7f\ufeff\U0001f600\U0010ffff"


def post_json(client, path, body):
    """POST ``body`` as JSON written with ASCII escapes (lone surrogates included)."""
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def stored(client, doc_id, ws="ws0"):
    return client.get(f"/api/workspaces/{ws}/documents/{doc_id}").json()


def test_line_separators_and_controls_in_a_document_do_not_lose_the_batch(index_copy):
    """Issue 51, defect 1: U+2028 or U+0085 in one document failed its whole upload job
    (the job store split its JSON Lines with ``str.splitlines``); JSON and files."""
    texts = [
        "ok",
        "a\u2028b",
        f"Ada Lovelace wrote{BREAKERS}notes.\n",
        "c\x85d",
    ]
    with running(settings_for(index_copy)) as client:
        body = {"documents": [{"title": f"T{i}", "text": t} for i, t in enumerate(texts)]}
        response = post_json(client, "/api/workspaces/ws0/documents", body)
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "succeeded" and job["failures"] == [], job
        assert [stored(client, d)["text"] for d in job["doc_ids"]] == texts
        assert {stored(client, d)["status"] for d in job["doc_ids"]} == {"processed"}

        lines = "".join(json.dumps({"title": "J", "text": t}) + "\n" for t in texts[1:])
        files = [
            ("files", ("sep.jsonl", lines.encode(), "application/x-ndjson")),
            ("files", ("sep.txt", "plain\u2028text\x85here".encode(), "text/plain")),
            ("files", ("raw.jsonl", '{"text": "raw\u2028in\u0085json"}\n'.encode(), "text/plain")),
        ]
        response = client.post("/api/workspaces/ws0/documents/files", files=files)
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "succeeded" and job["documents_done"] == 5
        got = sorted(stored(client, d)["text"] for d in job["doc_ids"])
        assert got == sorted([*texts[1:], "plain\u2028text\x85here", "raw\u2028in\u0085json"])


def test_an_unpaired_surrogate_is_refused_alone_naming_the_document(index_copy):
    """A JSON string may escape a lone surrogate, which no UTF-8 store can hold: a
    document holding one is refused with one line naming it, the others stored (in a
    corpus file or the metadata, where it crashed the upload with a 500 before)."""
    with running(settings_for(index_copy)) as client:
        before = client.get("/api/workspaces/ws0/documents").json()["total"]
        bad_meta = {"title": "Bad", "text": "fine", "metadata": {"note": ["x\ud800"]}}
        response = post_json(
            client, "/api/workspaces/ws0/documents", {"documents": [HOPPER, bad_meta]}
        )
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "partial" and job["documents_failed"] == 1
        (failure,) = job["failures"]
        assert failure["error"].startswith("document 1: metadata holds an unpaired surrogate")
        assert "U+D800 at character 1" in failure["error"] and "\n" not in failure["error"]
        assert titles(client, "Grace Hopper New York")[0] == "Grace Hopper"

        in_text = {"documents": [{"title": "x", "text": "lone \udfff"}]}
        refused = post_json(client, "/api/workspaces/ws0/documents", in_text)
        assert refused.status_code == 400  # the only document: nothing to ingest
        assert "document 0: text holds an unpaired surrogate" in refused.json()["detail"]
        only_bad = {"documents": [{"text": "fine", "metadata": {"\udc00": 1}}]}
        refused = post_json(client, "/api/workspaces/ws0/documents", only_bad)
        assert refused.status_code == 400
        assert "document 0: metadata holds an unpaired surrogate" in refused.json()["detail"]

        corpus = json.dumps([{"title": "Good", "text": "Good text."}, {"text": "b\udc80d"}])
        files = [("files", ("corpus.json", corpus.encode(), "application/json"))]
        response = client.post("/api/workspaces/ws0/documents/files", files=files)
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "partial"
        assert [f["error"] for f in job["failures"]] == [
            "corpus.json: entry 1: text holds an unpaired surrogate (U+DC80 at character 1), "
            "which is not Unicode text; send the character it stands for, or drop it"
        ]
        after = client.get("/api/workspaces/ws0/documents").json()["total"]
        assert after == before + 2


def test_job_events_carry_any_title_whole(index_copy):
    """The event stream's JSON is ASCII: a refused document's title with U+2028 or U+0085
    comes through a client that splits lines with ``str.splitlines`` (httpx does)."""
    title = "Line\u2028and\x85next"
    with running(settings_for(index_copy)) as client:
        body = {"documents": [HOPPER, {"title": title, "text": "x", "metadata": {"k": "\udc00"}}]}
        response = post_json(client, "/api/workspaces/ws0/documents", body)
        with client.stream("GET", f"{response.headers['location']}/events") as stream:
            events = sse_events(stream.iter_lines())
        done = json.loads(events[-1][1])
        assert done["state"] == "partial" and done["failures"][0]["title"] == title


def test_a_job_an_older_server_left_on_disk_is_read_exactly(index_copy):
    """Jobs written by the JSON Lines payload store (``payloads/JOB.jsonl``, raw U+2028
    in its lines) resume with their documents whole."""
    text = "Grace Hopper\u2028was born\x85in New York City."
    doc = Document(text, "Grace Hopper", "api")
    state = index_copy / "server"
    store = JobStore(state)
    job = Job.new(JobKind.ADD, [doc.id])
    job.state = JobState.RUNNING
    store.save(job)
    store.close()
    line = json.dumps(
        {"text": text, "title": doc.title, "source": "api", "metadata": {}}, ensure_ascii=False
    )
    (state / "payloads").mkdir(exist_ok=True)
    (state / "payloads" / f"{job.id}.jsonl").write_text(line + "\n", encoding="utf-8")
    with running(settings_for(index_copy)) as client:
        done = wait_for_job(client, f"/api/workspaces/ws0/jobs/{job.id}")
        assert done["state"] == "succeeded" and done["resumed"] == 1
        assert stored(client, doc.id)["text"] == text


def test_a_document_longer_than_spacy_takes_is_indexed_not_reported_as_success(index_copy):
    """Issue 51, defect 2: a document over spaCy's 1,000,000 characters failed inside
    spaCy and the job said ``succeeded`` with ``failed_documents`` 0; it is indexed.
    (Long filler words keep the model's work, and this test, short.)"""
    filler = " ".join(["Lorem" + "x" * 60] * 15) + ".\n\n"
    text = filler * (1_000_050 // len(filler) + 1) + HOPPER["text"]
    assert len(text) > 1_000_000
    with running(settings_for(index_copy)) as client:
        body = {"documents": [{"title": "Long", "text": text}]}
        response = client.post("/api/workspaces/ws0/documents", json=body)
        job = wait_for_job(client, response.headers["location"], timeout_s=180)
        assert job["state"] == "succeeded" and job["failures"] == [], job["failures"]
        assert job["report"]["counts"]["failed_documents"] == 0
        (doc_id,) = job["doc_ids"]
        got = stored(client, doc_id)
        assert got["status"] == "processed" and got["characters"] == len(text)
        assert "Long" in titles(client, "Grace Hopper New York")


def test_a_failed_job_records_no_server_path(index_copy):
    """A job that fails on a damaged index file records the error with the index's
    path hidden (clients read job records: the server's filesystem is not theirs)."""
    store = index_copy / "store.sqlite"
    data = bytearray(store.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # the second page: SQLite's check finds it
    store.write_bytes(bytes(data))
    with running(settings_for(index_copy)) as client:
        response = client.post("/api/workspaces/ws0/documents", json={"documents": [HOPPER]})
        assert response.status_code == 202
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "failed"
        assert "damaged" in job["error"] and "INDEX/" in job["error"]
        assert str(index_copy) not in json.dumps(job)
        assert str(index_copy.resolve()) not in json.dumps(job)


def test_a_blank_or_unstorable_document_is_refused_alone_in_a_json_upload(index_copy):
    """One blank document, or one with a lone surrogate escape in its text, is refused
    on its own: the batch is accepted, the good document stored, each refusal listed
    (it was a 422 for the whole request, the good document with it)."""
    body = (
        '{"documents": [{"title": "Hopper", "text": "Grace Hopper was born in New York."},'
        ' {"title": "Blank", "text": ""}, {"title": "Lone", "text": "a\\ud800b"}]}'
    )
    with running(settings_for(index_copy)) as client:
        response = client.post(
            "/api/workspaces/ws0/documents",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "partial" and job["documents_failed"] == 2
        reasons = {f["title"]: f["error"] for f in job["failures"]}
        assert set(reasons) == {"Blank", "Lone"}
        assert "blank" in reasons["Blank"] and "surrogate" in reasons["Lone"]
        assert titles(client, "Grace Hopper New York")[0] == "Hopper"


def test_while_a_resumed_job_builds_the_index_queries_are_told_why_and_when(index_copy):
    """After a restart mid-job the index is incomplete until the resumed job finishes:
    a query meanwhile is a 503 that names the job and asks to retry (Retry-After), with
    no server path, and is answered once the job is done."""
    job = left_running(index_copy, [HOPPER, *many(150)])
    query = {"query": "Grace Hopper", "method": "bm25", "k": 1}
    with running(settings_for(index_copy)) as client:
        refused = client.post("/api/workspaces/ws0/retrieve", json=query)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "2"
        detail = refused.json()["detail"]
        assert f"being built by job {job.id}" in detail and "after a restart" in detail
        assert str(index_copy) not in detail
        done = wait_for_job(client, f"/api/workspaces/ws0/jobs/{job.id}")
        assert done["state"] == "succeeded"
        answered = client.post("/api/workspaces/ws0/retrieve", json=query)
        assert answered.status_code == 200


def test_a_malformed_entry_of_an_uploaded_corpus_is_refused_alone(index_copy):
    """One entry without text in an uploaded JSON corpus is listed as refused; the
    file's other entries are ingested (the whole file was refused before)."""
    corpus = [HOPPER, {"title": "No text"}, {"title": "Lovelace", "text": "Ada was in London."}]
    with running(settings_for(index_copy)) as client:
        response = client.post(
            "/api/workspaces/ws0/documents/files",
            files=[("files", ("corpus.json", json.dumps(corpus).encode(), "application/json"))],
        )
        assert response.status_code == 202, response.text
        job = wait_for_job(client, response.headers["location"])
        assert job["state"] == "partial" and job["documents_failed"] == 1
        (failure,) = job["failures"]
        assert failure["source"] == "corpus.json" and "text" in failure["error"]
        assert "/" not in failure["error"].split("corpus.json")[0]  # no server path
        assert titles(client, "Grace Hopper")[0] == "Grace Hopper"
        assert "Lovelace" in titles(client, "Ada London")
