"""CachedChatModel over a real local OpenAI-compatible server: the server counts real calls."""

import asyncio
import sqlite3
import threading

import pytest

from quillian.components.llm.base import ChatMessage, ChatModel, Decoding, Usage
from quillian.components.llm.cache import CachedChatModel, CacheStats, chat_cache_key
from quillian.components.llm.openai_compat import OpenAIChatModel
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.errors import LLMAuthError, StoreError
from quillian.testing.fake_openai import FakeOpenAIServer

HELLO = [ChatMessage("user", "say hello")]


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def remote(server, **kwargs):
    return OpenAIChatModel(
        server.base_url,
        "fake-model",
        api_key="test-key",
        base_delay=0.001,
        max_delay=0.01,
        **kwargs,
    )


def chat(model, messages=HELLO, **kwargs):
    return asyncio.run(model.chat(messages, **kwargs))


def test_a_repeated_call_makes_no_request(server, tmp_path):
    with CachedChatModel(remote(server), tmp_path / "llm.sqlite") as cache:
        assert isinstance(cache, ChatModel) and cache.model_id == "fake-model"
        first = chat(cache, prompt="qa@1")
        second = chat(cache, prompt="qa@1")
        assert server.chat_requests == 1
        assert not first.cached and second.cached
        assert second.text == first.text == "echo: say hello"
        assert second.usage == first.usage == Usage(2, 3)
        assert second.model == "fake-model"
        assert cache.stats == CacheStats(hits=1, shared=0, misses=1)


def test_decoding_prompt_version_and_messages_are_part_of_the_key(server, tmp_path):
    with CachedChatModel(remote(server), tmp_path / "llm.sqlite") as cache:
        chat(cache, prompt="qa@1")
        chat(cache, prompt="qa@2")
        chat(cache, prompt="qa@1", decoding=Decoding(temperature=0.7))
        chat(cache, prompt="qa@1", messages=[ChatMessage("user", "say bye")])
        chat(cache, prompt="qa@1", decoding=Decoding())  # the default decoding: a hit
        assert server.chat_requests == 4
        assert cache.stats == CacheStats(hits=1, shared=0, misses=4)


def test_key_is_canonical():
    key = chat_cache_key("m", HELLO, Decoding(temperature=0), "p@1")
    assert key == chat_cache_key("m", HELLO, Decoding(temperature=0.0), "p@1")
    assert key != chat_cache_key("m2", HELLO, Decoding(), "p@1")
    assert key != chat_cache_key("m", [ChatMessage("system", "say hello")], Decoding(), "p@1")
    assert len(key) == 64


def test_a_reply_schema_keys_apart_and_no_schema_keys_as_before():
    schema, free = Decoding(json_schema='{"type": "object"}'), Decoding()
    assert chat_cache_key("m", HELLO, schema, "p@1") != chat_cache_key("m", HELLO, free, "p@1")
    # the key of a call without a schema is the one written before schemas existed
    assert chat_cache_key("m", HELLO, Decoding(), "p@1") == (
        "2dd91d0f261cbae69e1860f2ef43ae7fa7c4c3bfe0314acb8ad7a82312373808"
    )


def test_a_grammar_keys_apart_and_is_one_hold_at_a_time():
    grammar = Decoding(grammar='start: "yes" | "no"')
    assert chat_cache_key("m", HELLO, grammar, "p@1") != chat_cache_key(
        "m", HELLO, Decoding(), "p@1"
    )
    assert grammar.free() == Decoding()
    with pytest.raises(ValueError, match="json_schema or a grammar, not both"):
        Decoding(json_schema='{"type": "object"}', grammar='start: "yes"')


def test_the_cache_persists_across_reopening(server, tmp_path):
    path = tmp_path / "nested" / "llm.sqlite"
    with CachedChatModel(remote(server), path) as cache:
        first = chat(cache, decoding=Decoding(max_tokens=1))
    assert first.truncated
    with CachedChatModel(remote(server), path) as cache:
        again = chat(cache, decoding=Decoding(max_tokens=1))
    assert server.chat_requests == 1
    assert again.cached and again.truncated and again.text == first.text == "echo:"
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_concurrent_duplicates_make_one_request(server, tmp_path):
    server.delay = 0.2

    async def burst(cache):
        return await asyncio.gather(*(cache.chat(HELLO, prompt="qa@1") for _ in range(5)))

    with CachedChatModel(remote(server), tmp_path / "llm.sqlite") as cache:
        replies = asyncio.run(burst(cache))
        assert server.chat_requests == 1
        assert len({r.text for r in replies}) == 1
        assert sorted(r.cached for r in replies) == [False, True, True, True, True]
        assert cache.stats == CacheStats(hits=0, shared=4, misses=1)


def test_failed_calls_are_not_cached(server, tmp_path):
    with CachedChatModel(remote(server, max_retries=0), tmp_path / "llm.sqlite") as cache:
        server.fail_next(1, 401)
        with pytest.raises(LLMAuthError):
            chat(cache)
        assert not chat(cache).cached
        assert chat(cache).cached
        assert server.chat_requests == 2


def test_threads_with_their_own_loops_share_the_cache(tmp_path):
    inner = ScriptedChatModel({}, default="ok")
    with CachedChatModel(inner, tmp_path / "llm.sqlite") as cache:

        def work(i: int) -> None:
            for j in range(10):
                chat(cache, messages=[ChatMessage("user", f"{i % 2}-{j}")])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = cache.stats
    assert stats.hits + stats.shared + stats.misses == 40
    assert stats.misses >= 20 and len({c.messages for c in inner.calls}) == 20


def test_a_corrupted_database_names_its_path(tmp_path):
    path = tmp_path / "llm.sqlite"
    path.write_bytes(b"this is not an SQLite database, just bytes" * 100)
    with pytest.raises(StoreError, match="delete it") as err:
        CachedChatModel(ScriptedChatModel({}, default="ok"), path)
    assert str(path) in str(err.value)


def test_a_locked_database_names_its_path(tmp_path):
    path = tmp_path / "llm.sqlite"
    cache = CachedChatModel(ScriptedChatModel({}, default="ok"), path, busy_timeout=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked by another process") as err:
            chat(cache)
        assert str(path) in str(err.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
        cache.close()


def test_a_closed_cache_refuses_calls(tmp_path):
    cache = CachedChatModel(ScriptedChatModel({}, default="ok"), tmp_path / "llm.sqlite")
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(StoreError, match="is closed"):
        chat(cache)
