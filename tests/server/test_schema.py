"""The schema is the truth: what a fuzzer found, each as a test through a real server.
Integers past their bounds, values of the wrong JSON type, OPTIONS, event streams and
their documented events, method options given as text, bodies over the size limit sent
without a length, and an index without the build stage a method needs."""

from __future__ import annotations

import json
import shutil
from typing import Any

import httpx
import jsonschema_rs
import pytest

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import QUESTION, ROUTES, running, sse_events, wait_for_job

LIMIT = 1024 * 1024  # the server's body limit here
BASE = "/api/workspaces/main"


@pytest.fixture(scope="module")
def server(built_index, tmp_path_factory):
    index = tmp_path_factory.mktemp("schema") / "idx"
    shutil.copytree(built_index, index)
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", index),),
        llm=ScriptedChatModel(ROUTES),
        max_request_bytes=LIMIT,
        state_dir=index.parent / "state",
    )
    with running(settings) as client:
        yield client


def test_integers_past_their_bounds_are_refused_not_a_server_error(server):
    huge = "1088505444479717303386112"
    for path in (f"{BASE}/jobs", f"{BASE}/documents"):
        response = server.get(path, params={"offset": huge})
        assert response.status_code == 422, (path, response.text)
        assert "offset" in response.json()["detail"]
    response = server.post(f"{BASE}/retrieve", json={"query": "Babbage", "k": int(huge)})
    assert response.status_code == 422 and "k" in response.json()["detail"]
    options = {"question": QUESTION, "options": {"k": int(huge)}}
    assert server.post(f"{BASE}/answer", json=options).status_code == 400
    bounds = server.get("/openapi.json").json()["paths"][f"{BASE.replace('main', '{ws}')}/jobs"]
    offset = next(p for p in bounds["get"]["parameters"] if p["name"] == "offset")
    assert offset["schema"]["maximum"] == 2**31 - 1  # published, so clients know it


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (f"{BASE}/answer", {"question": QUESTION, "stream": 0}, "stream"),
        (f"{BASE}/answer", {"question": 7}, "question"),
        (f"{BASE}/retrieve", {"query": "Babbage", "k": "3"}, "k"),
        (f"{BASE}/retrieve", {"query": "Babbage", "k": True}, "k"),
        (f"{BASE}/graph/links", {"entities": [False], "chunk_ids": []}, "entities"),
        (f"{BASE}/documents", {"documents": [{"text": "ok", "title": 1}]}, "title"),
        (f"{BASE}/retrieve", {"query": " \t"}, "query: is blank"),
        (
            "/v1/chat/completions",
            {
                "model": "quillian-sa-rag",
                "messages": [{"role": "user", "content": "Q"}],
                "stream": 0,
            },
            "stream",
        ),
    ],
)
def test_a_value_of_another_type_is_refused(server, path, body, field):
    response = server.post(path, json=body)
    assert response.status_code == 422, response.text
    assert field in json.dumps(response.json())


def test_a_whole_number_written_as_a_float_is_an_integer(server):
    # JSON Schema's "integer" takes 3.0: so does the server
    response = server.post(f"{BASE}/retrieve", json={"query": "Babbage", "k": 3.0})
    assert response.status_code == 200 and len(response.json()["passages"]) == 3


def test_options_is_204_with_allow_and_another_method_405(server):
    response = server.options(f"{BASE}/documents")
    assert response.status_code == 204 and response.headers["allow"] == "GET, POST, OPTIONS"
    assert server.options(f"{BASE}/documents/files").headers["allow"] == "POST, OPTIONS"
    assert server.options(f"{BASE}/answer").headers["allow"] == "POST, OPTIONS"
    put = server.put(f"{BASE}/documents")
    assert put.status_code == 405 and put.headers["allow"] == "GET, POST, OPTIONS"
    assert put.json() == {"detail": "Method Not Allowed"}
    files = server.get(f"{BASE}/documents/files")  # not a document called "files"
    assert files.status_code == 405 and files.headers["allow"] == "POST, OPTIONS"
    assert server.options("/nowhere").status_code == 404
    assert server.get("/nowhere").status_code == 404  # not 405: OPTIONS is everywhere


def _stream_schema(schema: dict[str, Any], path: str, method: str) -> list[dict[str, Any]]:
    operation = schema["paths"][path][method]
    stream = operation["responses"]["200"]["content"]["text/event-stream"]["schema"]
    return stream.get("oneOf", [stream])


def _documented(
    schema: dict[str, Any], variants: list[dict[str, Any]], name: str | None, data: str
) -> bool:
    """Whether the event ``name`` with ``data`` is one the schema documents."""
    for variant in variants:
        props = variant["properties"]
        if props.get("event", {}).get("const") != name:
            continue
        if "const" in props["data"]:
            if data == props["data"]["const"]:
                return True
            continue
        assert props["data"]["contentMediaType"] == "application/json"
        content = {**props["data"]["contentSchema"], "components": schema["components"]}
        try:
            parsed = json.loads(data)
        except json.JSONDecodeError:
            continue
        if jsonschema_rs.validator_for(content).is_valid(parsed):
            return True
    return False


def test_streams_send_the_events_their_schema_documents(server):
    schema = server.get("/openapi.json").json()
    answer = _stream_schema(schema, "/api/workspaces/{ws}/answer", "post")
    assert {v["properties"]["event"]["const"] for v in answer} == {
        "retrieval",
        "step",
        "token",
        "final",
        "error",
    }
    streams: list[tuple[list[dict[str, Any]], list[tuple[str | None, str]]]] = []
    for body in ({"question": QUESTION}, {"question": QUESTION, "options": {"nope": 1}}):
        with server.stream("POST", f"{BASE}/answer", json={**body, "stream": True}) as response:
            streams.append((answer, sse_events(response.iter_lines())))
    names = [name for name, _ in streams[0][1]]
    assert names[0] == "retrieval" and "step" in names and names[-1] == "final"
    assert [name for name, _ in streams[1][1]] == ["error"]

    added = server.post(f"{BASE}/documents", json={"documents": [{"text": "Grace Hopper."}]})
    job = wait_for_job(server, added.headers["Location"])
    with server.stream("GET", f"{BASE}/jobs/{job['id']}/events") as response:
        jobs = _stream_schema(schema, "/api/workspaces/{ws}/jobs/{job_id}/events", "get")
        streams.append((jobs, sse_events(response.iter_lines())))
    assert [name for name, _ in streams[-1][1]] == ["done"]

    chat = _stream_schema(schema, "/v1/chat/completions", "post")
    for model in ("quillian-sa-rag", "quillian-kags"):  # an answer, then an error
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "Q?"}]}
        with server.stream("POST", "/v1/chat/completions", json=body) as response:
            streams.append((chat, sse_events(response.iter_lines())))
    assert streams[-1][1][-1] == (None, "[DONE]")
    assert "error" in json.loads(streams[-1][1][-2][1])

    for variants, events in streams:
        for name, data in events:
            assert _documented(schema, variants, name, data), (name, data[:300])


def test_method_options_given_as_text_are_parsed_and_checked(server):
    def ask(options: dict[str, Any]) -> httpx.Response:
        return server.post(f"{BASE}/answer", json={"question": QUESTION, "options": options})

    response = ask({"k": "abc"})
    assert response.status_code == 400
    assert response.json() == {"detail": "method 'sa-rag': option k: 'abc' is not an int"}
    assert ask({"k": True}).json()["detail"] == "method 'sa-rag': option k: True is not an int"
    assert ask({"k": "2"}).status_code == 200  # text is parsed as on the command line
    answered = ask({"k": 2}).json()
    assert len(answered["citations"]["passages"]) == 2


def _chunks(total: int, multipart: bool, size: int = 64 * 1024):
    """A body of ``total`` bytes in pieces: a text file's form part, or JSON text."""
    yield (
        b'--b\r\nContent-Disposition: form-data; name="files"; filename="big.txt"\r\n\r\n'
        if multipart
        else b'{"documents": [{"text": "'
    )
    sent = 0
    while sent < total:
        yield b"x" * min(size, total - sent)
        sent += size
    yield b"\r\n--b--\r\n" if multipart else b'"}]}'


@pytest.mark.parametrize(
    "path", [f"{BASE}/documents", f"{BASE}/documents/files", "/v1/chat/completions"]
)
def test_a_body_over_the_limit_without_a_length_is_413(server, path):
    # a generator body goes out chunked (Transfer-Encoding: chunked, no Content-Length)
    multipart = path.endswith("files")
    kind = "multipart/form-data; boundary=b" if multipart else "application/json"
    headers = {"content-type": kind}
    response = server.post(path, content=_chunks(3 * LIMIT, multipart), headers=headers)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413, response.text
    message = str(response.json().get("detail") or response.json()["error"]["message"])
    assert str(LIMIT) in message
    known = server.post(f"{BASE}/documents", content=b"x" * (2 * LIMIT), headers=headers)
    assert known.status_code == 413  # and with a Content-Length, before reading it


def test_a_missing_build_stage_is_one_409_with_the_command_and_no_path(server, built_index):
    answers = {
        method: server.post(f"{BASE}/answer", json={"question": QUESTION, "method": method})
        for method in ("kag", "kags", "know3-rag")
    }
    for method, response in answers.items():
        assert response.status_code == 409, (method, response.text)
        detail = response.json()["detail"]
        assert "quillian " in detail, detail  # the command that adds it
        assert "/" not in detail.replace("--for", ""), detail  # no server path
        assert str(built_index.parent) not in detail


def test_no_error_shows_a_path_of_the_server(built_index, tmp_path):
    index = tmp_path / "idx"
    shutil.copytree(built_index, index)
    (index / "kge").mkdir()
    (index / "kge" / "manifest.json").write_text("{not json")  # a damaged model
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", index),), llm=ScriptedChatModel(ROUTES)
    )
    with running(settings) as client:
        body = {"question": QUESTION, "method": "know3-rag"}
        response = client.post(f"{BASE}/answer", json=body)
    detail = response.json()["detail"]
    assert response.status_code == 400 and "unreadable model manifest" in detail
    assert detail.startswith("INDEX/kge/manifest.json: ")  # named, where it is
    assert str(tmp_path) not in detail and str(tmp_path.resolve()) not in detail
