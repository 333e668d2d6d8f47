"""LLM specs, sessions over a real (fake) OpenAI-compatible HTTP server, and the CLI's
errors for an unreachable endpoint, a wrong key and an unknown model."""

import asyncio
import json
import socket

import pytest

from quillian.cli.main import main
from quillian.components.llm import spec as spec_module
from quillian.components.llm.base import ChatMessage, ChatResponse, Decoding
from quillian.components.llm.spec import LLMSession, LLMSpec, parse_llm_spec
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.errors import ConfigError, LLMAuthError, LLMModelNotFoundError
from quillian.methods.table import method_spec
from quillian.testing.fake_openai import FakeOpenAIServer


def test_specs():
    assert parse_llm_spec("local") == LLMSpec("local")
    assert parse_llm_spec("local:/m/x.gguf") == LLMSpec("local", path="/m/x.gguf")
    assert parse_llm_spec("openai:gpt-4o-mini") == LLMSpec(
        "openai", model="gpt-4o-mini", base_url="https://api.openai.com/v1"
    )
    assert parse_llm_spec("http://h:8000/v1/#qwen") == LLMSpec(
        "openai", model="qwen", base_url="http://h:8000/v1"
    )
    for bad in ("", "openai:", "http://h:8000/v1", "gpt-4", "local:", "local?x=1", "?schema=off"):
        with pytest.raises(ConfigError, match="cannot read LLM spec"):
            parse_llm_spec(bad)
    assert parse_llm_spec("local-int8?schema=off") == LLMSpec("local", dtype="int8", schema=False)
    assert parse_llm_spec("http://h:8000/v1#qwen?schema=off").schema is False
    assert parse_llm_spec("openai:gpt-4o-mini?schema=on").schema is True
    both = parse_llm_spec("local-int8?schema=off&prefix-cache=0")
    assert both == LLMSpec("local", dtype="int8", schema=False, prefix_cache_mb=0)
    assert parse_llm_spec("local?prefix-cache=64").prefix_cache_mb == 64
    for bad in ("openai:m?prefix-cache=8", "local?prefix-cache=-1", "local?schema=on&x"):
        with pytest.raises(ConfigError, match=f"cannot read LLM spec.*{bad.split('?')[1][:6]}"):
            parse_llm_spec(bad)


def test_a_local_spec_passes_its_prefix_cache_on():
    model = LLMSession("local-int8?prefix-cache=0").backend
    assert (model.dtype, model.prefix_cache) == ("int8", None)
    assert LLMSession("local?prefix-cache=8").backend.prefix_cache.budget_bytes == 8 << 20


class _Recording:
    model_id = "recording"

    def __init__(self):
        self.decodings = []

    async def chat(self, messages, *, prompt="", decoding=None):
        self.decodings.append(decoding)
        return ChatResponse('{"answer": "Paris"}')


@pytest.mark.parametrize(("suffix", "held"), [("", True), ("?schema=off", False)])
@pytest.mark.parametrize("hold", [{"json_schema": '{"type": "object"}'}, {"grammar": 'start: "a"'}])
def test_schema_off_asks_the_model_with_no_reply_schema(suffix, held, hold, monkeypatch):
    recording = _Recording()
    monkeypatch.setattr(spec_module, "_scripted", lambda path: recording)
    schema = Decoding(max_tokens=9, **hold)

    async def go():
        async with LLMSession(f"scripted:routes.json{suffix}") as session:
            await session.model.chat([ChatMessage("user", "hi")], decoding=schema)

    asyncio.run(go())
    assert recording.decodings == [schema if held else Decoding(max_tokens=9)]


def ask(session_args, question="Capital of France?"):
    async def go():
        async with LLMSession(**session_args) as session:
            runner = TaskRunner(session.model, default_registry())
            result = await method_spec("no-retrieval").build(runner, None).answer(question)
            return result, session.ledger()

    return asyncio.run(go())


def test_session_over_http_caches_and_accounts(tmp_path):
    with FakeOpenAIServer(reply=lambda m: "Paris", models=("m1",)) as server:
        args = {
            "spec": f"{server.base_url}#m1",
            "api_key": "test-key",
            "cache_path": tmp_path / "c.sqlite",
        }
        result, ledger = ask(args)
        assert result.answer == "Paris"
        assert ledger.stage("kg-infused.answer-closed").calls == 1
        before = server.chat_requests
        result, ledger = ask(args)  # same question: served by the cache
        assert result.answer == "Paris" and server.chat_requests == before
        assert result.transcript.calls[0].cached


def test_session_errors_are_clear(tmp_path):
    with FakeOpenAIServer(models=("m1",)) as server:
        with pytest.raises(LLMAuthError):
            ask({"spec": f"{server.base_url}#m1", "api_key": "wrong"})
        with pytest.raises(LLMModelNotFoundError, match="m1"):
            ask({"spec": f"{server.base_url}#nope", "api_key": "test-key"})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_reports_an_unreachable_endpoint_without_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("QUILLIAN_LLM_API_KEY", "k")
    url = f"http://127.0.0.1:{free_port()}/v1"
    code = main(["ask", str(tmp_path), "q", "--method", "no-retrieval", "--llm", f"{url}#m",
                 "--no-cache"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "127.0.0.1" in err
    assert "Traceback" not in err


def test_cli_uses_the_key_from_the_environment(tmp_path, capsys, monkeypatch):
    with FakeOpenAIServer(reply=lambda m: "Paris", models=("m1",)) as server:
        monkeypatch.setenv("QUILLIAN_LLM_API_KEY", "test-key")
        code = main(["ask", str(tmp_path), "Capital of France?", "--method", "no-retrieval",
                     "--llm", f"{server.base_url}#m1", "--no-cache", "--json"])  # fmt: skip
        assert code == 0 and json.loads(capsys.readouterr().out)["answer"] == "Paris"
        monkeypatch.setenv("QUILLIAN_LLM_API_KEY", "bad")
        code = main(["ask", str(tmp_path), "q", "--method", "no-retrieval",
                     "--llm", f"{server.base_url}#m1", "--no-cache"])  # fmt: skip
        assert code == 2 and "key" in capsys.readouterr().err.lower()


class LoadingModel:
    """A chat model that must be loaded before it answers, as the local one is."""

    model_id = "loading"

    def __init__(self) -> None:
        from quillian.components.llm.scripted import ScriptedChatModel

        self.loads = 0
        self._inner = ScriptedChatModel({}, default="Paris")

    async def load(self) -> None:
        self.loads += 1

    async def chat(self, messages, *, prompt="", decoding=None):
        if not self.loads:
            await self.load()  # the first call loads it, like LocalChatModel._ensure
        return await self._inner.chat(messages, prompt=prompt, decoding=decoding)


def test_a_lazy_session_loads_its_model_only_when_the_cache_misses(tmp_path):
    from quillian.components.llm.base import ChatMessage

    async def ask(model, **options):
        async with LLMSession(model, cache_path=tmp_path / "c.sqlite", **options) as session:
            loaded_on_entry = model.loads
            reply = await session.model.chat([ChatMessage("user", "Capital?")], prompt="p")
        return loaded_on_entry, reply.text, model.loads

    assert asyncio.run(ask(LoadingModel(), lazy=True)) == (0, "Paris", 1)  # a miss loads it
    assert asyncio.run(ask(LoadingModel(), lazy=True)) == (0, "Paris", 0)  # cached: never
    assert asyncio.run(ask(LoadingModel())) == (1, "Paris", 1)  # eager: loaded on entry
    uncached = LLMSession(LoadingModel(), lazy=True)
    assert not uncached.lazy  # without a cache every call reaches the model: load at once
