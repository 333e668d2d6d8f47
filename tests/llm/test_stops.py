"""Stop rules: registered by name, carried by a decoding, and applied by the task
runner to every reply whatever its backend (the local backend's early stop is tested
with its fake model in tests/components/llm/test_local.py)."""

from __future__ import annotations

import asyncio

import pytest

from quillian.components.kag import tasks as kag_tasks
from quillian.components.kag.schema import default_schema
from quillian.components.llm.base import Decoding
from quillian.components.llm.cache import chat_cache_key
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.stops import cut_reply, register_stop, stop_rule
from quillian.components.llm.tasks import TaskRunner, Transcript
from quillian.components.prompts import default_registry
from quillian.errors import ConfigError


def never(text: str, complete: bool) -> int | None:
    return None


def test_rules_are_found_by_name_and_a_name_is_taken_once() -> None:
    register_stop("test.never", never)
    register_stop("test.never", never)  # the same rule again is fine
    assert stop_rule("test.never") is never
    with pytest.raises(ConfigError, match="registered already"):
        register_stop("test.never", lambda text, complete: 0)
    with pytest.raises(ConfigError, match=r"unknown stop rule 'test\.nope'"):
        stop_rule("test.nope")
    assert cut_reply("", "anything") == "anything"  # no rule: the reply whole
    assert cut_reply("test.never", "anything") == "anything"


def test_the_rule_is_part_of_the_cache_key() -> None:
    plain, stopped = Decoding(), Decoding(stop="test.never")
    assert chat_cache_key("m", [], plain, "p@1") != chat_cache_key("m", [], stopped, "p@1")


REPEATING_PLAN = (
    "Step1: Who directed Alien?\nAction1: Retrieval(s=s1:Work[Alien], p=p1:director, o=o1:Person)\n"
    "Step2: Who is the director's mother?\nAction2: Retrieval(s=o1, p=p2:mother, o=o2:Person)\n"
    "Step3: Who is the director's mother?\nAction3: Retrieval(s=o1, p=p3:mother, o=o3:Person)\n"
    "Step4: Who is the director's mother?\nAction4: Retrieval(s=o1, p=p4:mother, o=o4:Person)\n"
    "Step5: Output the mother.\nAction5: Output(o3)"
)


def test_the_runner_ends_a_plan_before_its_first_repeated_step_and_records_it() -> None:
    """Step 3 asks step 2's question with its own aliases renumbered: the plan ends
    after step 2, whichever model wrote it; the call says the rule ended it."""
    model = ScriptedChatModel({"kag.plan": REPEATING_PLAN})
    transcript = Transcript()
    plan = asyncio.run(
        TaskRunner(model, default_registry()).run(
            kag_tasks.PLAN,
            transcript,
            schema=default_schema().prompt_types(),
            question="Who was the mother of the director of Alien?",
        )
    )
    assert [s.question for s in plan.steps] == [
        "Who directed Alien?",
        "Who is the director's mother?",
    ]
    (call,) = transcript.calls
    assert call.stopped and not call.truncated and not call.error
    assert call.as_dict()["stopped"] is True
    assert model.calls[0].decoding.stop == kag_tasks.PLAN_STOP
