"""Per-stage token, time and cost accounting, over a real local server and a cache."""

import asyncio
import json

import pytest

from quillian.components.llm.accounting import (
    AccountingChatModel,
    Price,
    StageUsage,
    UsageLedger,
    stage_of,
)
from quillian.components.llm.base import ChatMessage, ChatModel, Usage
from quillian.components.llm.cache import CachedChatModel
from quillian.components.llm.openai_compat import OpenAIChatModel
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.errors import ConfigError, LLMAuthError
from quillian.testing.fake_openai import FakeOpenAIServer


def ask(text):
    return [ChatMessage("user", text)]


@pytest.fixture
def server():
    with FakeOpenAIServer(reply=lambda messages: "one two three") as fake:
        yield fake


def remote(server, api_key="test-key"):
    return OpenAIChatModel(server.base_url, "fake-model", api_key=api_key)


def test_stage_is_the_prompt_name_without_version():
    assert stage_of("sa-rag.answer@1") == "sa-rag.answer"
    assert stage_of("ner") == "ner"
    assert stage_of("") == "unnamed"


def test_stages_sum_tokens_calls_and_cost(server, tmp_path):
    prices = {"fake-model": Price(input_per_million=2.0, output_per_million=10.0)}
    with CachedChatModel(remote(server), tmp_path / "llm.sqlite") as cache:
        model = AccountingChatModel(cache, prices)
        assert isinstance(model, ChatModel) and model.model_id == "fake-model"

        async def run():
            await model.chat(ask("a b"), prompt="ner@1")
            await model.chat(ask("a b c"), prompt="ner@2")
            await model.chat(ask("a b"), prompt="ner@1")  # cached
            await model.chat(ask("q"), prompt="answer@1")
            await model.chat(ask("q"))

        asyncio.run(run())
    assert server.chat_requests == 4
    ledger = model.ledger()
    assert [s.stage for s in ledger.stages] == ["answer", "ner", "unnamed"]
    ner = ledger.stage("ner")
    assert (ner.calls, ner.cached_calls, ner.failed_calls) == (3, 1, 0)
    assert (ner.prompt_tokens, ner.completion_tokens) == (5, 6)
    assert (ner.cached_prompt_tokens, ner.cached_completion_tokens) == (2, 3)
    assert ner.cost == pytest.approx((5 * 2.0 + 6 * 10.0) / 1e6)
    assert ledger.stage("answer").total_tokens == 4 and ledger.stage("unnamed").calls == 1
    total = ledger.total
    assert total.stage == "total"
    assert (total.calls, total.cached_calls, total.prompt_tokens) == (5, 1, 7)
    assert total.completion_tokens == sum(s.completion_tokens for s in ledger.stages) == 12
    assert total.cost == pytest.approx((7 * 2.0 + 12 * 10.0) / 1e6)
    assert (
        total.seconds == pytest.approx(sum(s.seconds for s in ledger.stages)) and total.seconds > 0
    )
    data = json.loads(json.dumps(ledger.as_dict()))
    assert data["stages"]["ner"]["total_tokens"] == 11 and data["total"]["calls"] == 5
    assert ledger.stage("missing") == StageUsage("missing")


def test_failed_calls_are_counted_and_rethrown(server):
    model = AccountingChatModel(remote(server, api_key="wrong"))
    with pytest.raises(LLMAuthError):
        asyncio.run(model.chat(ask("x"), prompt="ner@1"))
    ner = model.ledger().stage("ner")
    assert (ner.calls, ner.failed_calls, ner.total_tokens) == (0, 1, 0)
    assert ner.seconds > 0


def test_cost_is_unknown_without_a_price():
    inner = ScriptedChatModel({}, default="ok")
    unpriced = AccountingChatModel(inner)
    asyncio.run(unpriced.chat(ask("x y"), prompt="a@1"))
    assert unpriced.ledger().total.cost is None
    other_model = AccountingChatModel(inner, {"gpt-4o-mini": (0.15, 0.6)})
    asyncio.run(other_model.chat(ask("x y"), prompt="a@1"))
    assert other_model.ledger().stage("a").cost is None


def test_a_shared_ledger_collects_several_models():
    ledger = UsageLedger({"scripted": (1.0, 1.0)})
    first = AccountingChatModel(ScriptedChatModel({}, default="one"), ledger=ledger)
    second = AccountingChatModel(ScriptedChatModel({}, default="one two"), ledger=ledger)
    asyncio.run(first.chat(ask("x"), prompt="a@1"))
    asyncio.run(second.chat(ask("x"), prompt="b@1"))
    ledger.record("c", Usage(10, 0), cached=True)
    snapshot = ledger.snapshot()
    assert first.ledger() == second.ledger() == snapshot
    assert snapshot.total.total_tokens == 5 and snapshot.total.cost == pytest.approx(5e-6)
    assert snapshot.stage("c").cached_prompt_tokens == 10
    with pytest.raises(ConfigError, match="shared UsageLedger"):
        AccountingChatModel(ScriptedChatModel({}), {"m": (1, 1)}, ledger=ledger)
    with pytest.raises(ConfigError, match="at least 0"):
        Price(-1.0, 0.0)
