"""Versioned prompts: strict rendering and checked overrides."""

import json

import pytest

from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt, PromptRegistry
from quillian.errors import ConfigError, InputError

ANSWER = Prompt(
    "answer",
    1,
    (
        ChatMessage("system", 'Answer from the context. Reply as {{"answer": ...}}.'),
        ChatMessage("user", "Context: {context}\nQuestion: {question}"),
    ),
    frozenset({"context", "question"}),
)


def test_render_fills_placeholders_and_keeps_literal_braces():
    system, user = ANSWER.render(context="Paris is in France.", question="Where is Paris?")
    assert system.content == 'Answer from the context. Reply as {"answer": ...}.'
    assert user.content == "Context: Paris is in France.\nQuestion: Where is Paris?"
    assert ANSWER.key == "answer@1"


def test_missing_or_extra_variables_fail():
    with pytest.raises(ConfigError, match=r"missing variables \['question'\]"):
        ANSWER.render(context="c")
    with pytest.raises(ConfigError, match=r"unexpected variables \['k'\]"):
        ANSWER.render(context="c", question="q", k=3)


def test_declared_and_used_variables_must_agree():
    with pytest.raises(ConfigError, match="declared variables"):
        Prompt("p", 1, (ChatMessage("user", "{a} {b}"),), frozenset({"a"}))
    with pytest.raises(ConfigError, match="plain identifier"):
        Prompt("p", 1, (ChatMessage("user", "{a!r}"),), frozenset({"a"}))


def test_override_from_file(tmp_path):
    registry = PromptRegistry([ANSWER])
    good = {
        "name": "answer",
        "version": 2,
        "variables": ["context", "question"],
        "messages": [{"role": "user", "content": "{question} given {context}"}],
    }
    (tmp_path / "ok.json").write_text(json.dumps(good))
    registry.override_from_file(tmp_path / "ok.json")
    assert registry.get("answer").key == "answer@2"
    bad = {
        **good,
        "variables": ["question"],
        "messages": [{"role": "user", "content": "{question}"}],
    }
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="must use \\['context', 'question'\\]"):
        registry.override_from_file(tmp_path / "bad.json")
    assert registry.get("answer").key == "answer@2"  # the failed override changed nothing
    (tmp_path / "broken.json").write_text('{"name": "answer"}')
    with pytest.raises(InputError, match=r"broken\.json entry 0"):
        registry.override_from_file(tmp_path / "broken.json")
    with pytest.raises(ConfigError, match="unknown prompt 'nope'"):
        registry.get("nope")
