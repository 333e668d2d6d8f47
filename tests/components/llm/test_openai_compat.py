"""OpenAIChatModel against a real local HTTP server speaking the OpenAI wire format."""

import asyncio
import email.utils
import json
import logging
import socket
import time

import pytest

from quillian.components.llm.base import ChatMessage, ChatModel, Decoding, Usage, streaming_tokens
from quillian.components.llm.openai_compat import OpenAIChatModel, _retry_after
from quillian.errors import (
    ConfigError,
    LLMAuthError,
    LLMModelNotFoundError,
    LLMRequestError,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from quillian.testing.fake_openai import FakeOpenAIServer

HELLO = [ChatMessage("system", "be brief"), ChatMessage("user", "say hello world")]


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def make(server, **kwargs):
    options = {"api_key": "test-key", "base_delay": 0.001, "max_delay": 0.01, "timeout": 5.0}
    options.update(kwargs)
    model = options.pop("model", "fake-model")
    return OpenAIChatModel(options.pop("base_url", server.base_url), model, **options)


def chat(model, messages=HELLO, **kwargs):
    return asyncio.run(model.chat(messages, **kwargs))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_reply_usage_and_decoding_go_over_the_wire(server):
    model = make(server)
    assert isinstance(model, ChatModel) and model.model_id == "fake-model"
    reply = chat(model, decoding=Decoding(temperature=0.3, top_p=0.9, max_tokens=50))
    assert reply.text == "echo: say hello world"
    assert reply.usage == Usage(prompt_tokens=5, completion_tokens=4)
    assert (reply.cached, reply.truncated, reply.model) == (False, False, "fake-model")
    body = server.bodies[0]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "say hello world"},
    ]
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.9, 50)


def test_transient_failures_are_retried_until_success(server):
    server.fail_next(1, 500)
    server.fail_next(1, 503)
    assert chat(make(server, max_retries=3)).text == "echo: say hello world"
    assert server.chat_requests == 3


def test_retry_after_replaces_the_backoff(server):
    server.fail_next(1, 429, retry_after="0.3")
    start = time.perf_counter()
    chat(make(server))
    assert time.perf_counter() - start >= 0.3
    assert server.chat_requests == 2


def test_retry_after_header_forms():
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 < _retry_after({"retry-after": future}) <= 30
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


def test_exhausted_retries_raise_unavailable_with_the_endpoint_named(server):
    server.fail_next(10, 503)
    with pytest.raises(LLMUnavailableError) as err:
        chat(make(server, max_retries=2), prompt="qa.answer@1")
    assert server.chat_requests == 3
    message = str(err.value)
    assert server.base_url in message and "'fake-model'" in message and "qa.answer@1" in message
    assert "gave up after 3 attempts" in message and "HTTP 503" in message
    assert err.value.status == 503 and not isinstance(err.value, LLMTimeoutError)


def test_a_slow_server_times_out(server):
    server.delay = 1.0
    with pytest.raises(LLMTimeoutError, match=r"no answer within 0.1s") as err:
        chat(make(server, timeout=0.1, max_retries=1))
    assert server.chat_requests == 2
    assert err.value.base_url == server.base_url


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_is_not_retried(server, status):
    if status == 401:
        model = make(server, api_key="wrong")
    else:
        server.fail_next(1, 403)
        model = make(server)
    with pytest.raises(LLMAuthError, match="rejected the API key") as err:
        chat(model)
    assert server.chat_requests == 1 and err.value.status == status
    assert server.base_url in str(err.value)


def test_a_bad_request_is_not_retried(server):
    server.fail_next(1, 400)
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        chat(make(server))
    assert server.chat_requests == 1


SCHEMA = '{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}'


def test_a_json_schema_goes_as_a_response_format(server):
    chat(make(server), decoding=Decoding(max_tokens=20, json_schema=SCHEMA))
    chat(make(server), decoding=Decoding(max_tokens=20))
    with_schema, without = server.bodies
    assert with_schema["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": json.loads(SCHEMA), "strict": False},
    }
    assert "response_format" not in without


def test_a_server_that_refuses_schemas_is_asked_without_them(server, caplog):
    server.refuse_response_format = True
    model = make(server)
    schema = Decoding(json_schema=SCHEMA)
    with caplog.at_level(logging.WARNING):
        assert chat(model, decoding=schema).text == "echo: say hello world"
        assert chat(model, decoding=schema).text == "echo: say hello world"
    assert ["response_format" in b for b in server.bodies] == [True, False, False]
    assert model.schema_refused
    assert sum("refused a JSON-schema response format" in r.message for r in caplog.records) == 1


def test_a_bad_request_with_a_schema_is_not_blamed_on_the_schema(server):
    server.fail_next(2, 400)
    model = make(server)
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        chat(model, decoding=Decoding(json_schema=SCHEMA))
    assert server.chat_requests == 2 and not model.schema_refused


def test_an_unknown_model_lists_what_the_endpoint_serves(server):
    with pytest.raises(LLMModelNotFoundError) as err:
        chat(make(server, model="gpt-nope"))
    assert server.chat_requests == 1
    assert err.value.available == ("fake-model",)
    assert "does not serve model 'gpt-nope' (it serves: fake-model)" in str(err.value)


def test_an_unreachable_port_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = OpenAIChatModel(url, "m", max_retries=1, base_delay=0.001, max_delay=0.01)
    with pytest.raises(LLMUnavailableError, match="cannot connect") as err:
        chat(model)
    assert url in str(err.value) and "gave up after 2 attempts" in str(err.value)


def test_a_wrong_path_suggests_checking_the_base_url(server):
    with pytest.raises(LLMUnavailableError, match="usually serve under /v1"):
        chat(make(server, base_url=server.base_url.removesuffix("/v1")))


def test_length_stop_sets_truncated(server):
    reply = chat(make(server), decoding=Decoding(max_tokens=2))
    assert (reply.text, reply.truncated) == ("echo: say", True)
    server.finish_reason = "length"
    assert chat(make(server)).truncated


@pytest.mark.parametrize("content", ["", None])
def test_empty_content_is_empty_text(server, content):
    server.reply = lambda messages: content
    reply = chat(make(server))
    assert reply.text == "" and not reply.truncated


def test_a_malformed_body_is_a_response_error_with_the_raw_text(server):
    server.malformed = True
    with pytest.raises(LLMResponseError, match="malformed chat completion") as err:
        chat(make(server))
    assert err.value.raw.startswith('{"id": "chatcmpl-broken"')
    assert server.chat_requests == 1


def test_missing_usage_is_zero_and_warned_once(server, caplog):
    server.omit_usage = True
    model = make(server)
    with caplog.at_level(logging.WARNING, logger="quillian.components.llm.openai_compat"):
        replies = [chat(model), chat(model)]
    assert [r.usage for r in replies] == [Usage(), Usage()]
    assert model.calls_without_usage == 2
    assert sum("sent no token usage" in r.message for r in caplog.records) == 1


def test_concurrency_is_bounded(server):
    server.delay = 0.05
    model = make(server, max_concurrency=3)

    async def many():
        return await asyncio.gather(*(model.chat(HELLO) for _ in range(9)))

    assert len(asyncio.run(many())) == 9
    assert server.chat_requests == 9 and server.max_in_flight == 3


def test_check_lists_models_and_fails_early(server):
    assert asyncio.run(make(server).check()) == ("fake-model",)
    with pytest.raises(LLMModelNotFoundError, match="it serves: fake-model"):
        asyncio.run(make(server, model="other").check())
    with pytest.raises(LLMAuthError):
        asyncio.run(make(server, api_key="wrong").check())
    assert server.chat_requests == 0 and server.model_requests == 3
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMUnavailableError, match=url):
        asyncio.run(OpenAIChatModel(url, "m").check())


def test_one_model_serves_several_event_loops(server):
    model = make(server)
    assert chat(model).text == chat(model).text

    async def closed():
        async with model:
            return await model.chat(HELLO)

    assert asyncio.run(closed()).text == "echo: say hello world"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "localhost:8000"}, "base_url must start with http"),
        ({"model": ""}, "model must name"),
        ({"timeout": 0}, "timeout must be greater than 0"),
        ({"max_concurrency": 0}, "max_concurrency must be greater than 0"),
        ({"max_retries": -1}, "max_retries must be at least 0"),
        ({"base_delay": 2.0, "max_delay": 1.0}, "base_delay <= max_delay"),
    ],
)
def test_arguments_are_validated(kwargs, match):
    options = {"base_url": "http://localhost:8000/v1", "model": "m", **kwargs}
    with pytest.raises(ConfigError, match=match):
        OpenAIChatModel(options.pop("base_url"), options.pop("model"), **options)


def test_a_token_sink_gets_the_reply_as_it_streams(server):
    """Within streaming_tokens, the reply is streamed: each piece reaches the sink, the
    returned reply and its usage are the same as without streaming."""
    model = make(server)
    pieces: list[tuple[str, str]] = []

    async def go():
        with streaming_tokens(lambda prompt, text: pieces.append((prompt, text))):
            return await model.chat(HELLO, prompt="demo@1")

    reply = asyncio.run(go())
    assert reply.text == "echo: say hello world"
    assert reply.usage == Usage(prompt_tokens=5, completion_tokens=4)
    assert [text for _, text in pieces] == ["echo: ", "say ", "hello ", "world"]
    assert {prompt for prompt, _ in pieces} == {"demo@1"}
    assert server.bodies[0]["stream"] is True
    assert chat(model).text == reply.text and len(pieces) == 4  # no sink: no stream
    assert "stream" not in server.bodies[1]
