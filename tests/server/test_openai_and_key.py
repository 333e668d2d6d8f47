"""The OpenAI-compatible endpoints through the official ``openai`` client, and the API
key: required everywhere but /healthz, compared in constant time, never logged."""

from __future__ import annotations

import logging

import httpx
import openai
import pytest

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.methods.table import METHODS
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import QUESTION, ROUTES, running

KEY = "s3cret-key-for-tests"


@pytest.fixture(scope="module")
def server(built_index, tmp_path_factory):
    other = built_index  # the same index served twice, as a second workspace
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", built_index), WorkspaceSpec("copy", other)),
        llm=ScriptedChatModel(ROUTES),
        api_key=KEY,
    )
    with running(settings) as client:
        yield client


def openai_client(server) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{str(server.base_url).rstrip('/')}/v1", api_key=KEY, max_retries=0
    )


def test_models_one_per_method_and_workspace(server):
    ids = [m.id for m in openai_client(server).models.list()]
    assert ids[: len(METHODS)] == [f"quillian-{name}" for name in METHODS]
    assert "quillian-sa-rag@copy" in ids and len(ids) == 2 * len(METHODS)


def test_chat_completion_with_citations_in_an_extra_field(server):
    completion = openai_client(server).chat.completions.create(
        model="quillian-sa-rag",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": QUESTION},
        ],
    )
    assert completion.choices[0].message.content == "London"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    extra = completion.model_extra["quillian"]
    assert extra["citations"]["passages"] and extra["retrievals"][0]["subgraph"]["seeds"]
    assert extra["citations"]["paths"] and extra["retrievals"][0]["paths"]
    assert [s["kind"] for s in extra["steps"]] == ["retrieval", "answer-reasoning"]


def test_streamed_chat_completion_ends_with_done(server):
    stream = openai_client(server).chat.completions.create(
        model="quillian-sa-rag@copy",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
    )
    chunks = list(stream)  # the client stops at data: [DONE]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "London"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["quillian"]["citations"]["passages"]
    assert chunks[-1].model_extra["quillian"]["citations"]["paths"]
    with server.stream(
        "POST",
        "/v1/chat/completions",
        json={
            "model": "quillian-sa-rag",
            "stream": True,
            "messages": [{"role": "user", "content": QUESTION}],
        },
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"


def test_unknown_model_is_a_clear_error(server):
    with pytest.raises(openai.NotFoundError, match="unknown model") as raised:  # as at OpenAI
        openai_client(server).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert raised.value.code == "not_found" and raised.value.type == "invalid_request_error"
    with pytest.raises(openai.NotFoundError, match="nowhere"):
        openai_client(server).chat.completions.create(
            model="quillian-sa-rag@nowhere", messages=[{"role": "user", "content": "hi"}]
        )


def test_the_key_is_required_everywhere_but_health_and_never_logged(server, caplog):
    base = str(server.base_url)
    caplog.set_level(logging.DEBUG)
    with httpx.Client(base_url=base) as anonymous:
        assert anonymous.get("/healthz").status_code == 200
        for path in ("/api/workspaces", "/metrics", "/openapi.json"):
            response = anonymous.get(path)
            assert response.status_code == 401, path
            assert response.json() == {"detail": "an API key is required (X-API-Key)"}
        response = anonymous.get("/v1/models")  # OpenAI's error object, under /v1
        assert response.status_code == 401
        assert response.json()["error"]["message"] == "an API key is required (X-API-Key)"
        wrong = anonymous.get("/api/workspaces", headers={"X-API-Key": "not-the-key"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "wrong API key"}
        bearer = anonymous.get("/api/workspaces", headers={"Authorization": f"Bearer {KEY}"})
        assert bearer.status_code == 200
        assert anonymous.get("/api/workspaces", headers={"X-API-Key": KEY}).status_code == 200
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"status": 401' in logged  # the refusals are in the access log...
    assert "not-the-key" not in logged and KEY not in logged  # ...the keys are not


def test_every_v1_error_is_openais_error_object_which_its_client_shows(server):
    base = f"{str(server.base_url).rstrip('/')}/v1"
    wrong = openai.OpenAI(base_url=base, api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        wrong.models.list()
    assert str(raised.value) == "Error code: 401 - wrong API key"  # the message, shown
    assert (
        raised.value.code == "invalid_api_key" and raised.value.body["message"] == "wrong API key"
    )
    with pytest.raises(openai.UnprocessableEntityError, match="messages"):
        openai_client(server).chat.completions.create(model="quillian-sa-rag", messages=[])
    with pytest.raises(openai.BadRequestError) as raised:  # one line naming the field
        openai_client(server).chat.completions.create(
            model="quillian-sa-rag",
            messages=[{"role": "user", "content": QUESTION}],
            extra_body={"quillian": {"retriever": 5}},
        )
    assert (
        raised.value.body["message"] == "invalid request: retriever: Input should be a valid string"
    )
    with pytest.raises(openai.ConflictError, match="quillian index"):  # no KAGS stage
        openai_client(server).chat.completions.create(
            model="quillian-kags", messages=[{"role": "user", "content": QUESTION}]
        )
    for response in (
        server.get("/v1/nowhere"),
        server.put("/v1/models"),
        server.post("/v1/chat/completions", content=b"{"),
    ):
        error = response.json()["error"]
        assert response.status_code >= 400 and set(error) == {"message", "type", "param", "code"}
        assert "detail" not in response.json()
    assert server.put("/v1/models").headers["allow"] == "GET, OPTIONS"
