"""Yes/no questions, yes/no answers, and the check that refuses the one to the other,
run through the task runner with a scripted model."""

import asyncio

import pytest

from quillian.components.generation.polar import asks_yes_or_no, is_yes_or_no, refusing_yes_or_no
from quillian.components.generation.tasks import ANSWER_SA, for_question
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.structured import ParseError
from quillian.components.llm.tasks import Task, TaskFailed, TaskRunner, Transcript
from quillian.components.prompts import default_registry

OPEN = "Where was Charles Babbage born?"


def answer(task, replies):
    model = ScriptedChatModel({task.prompt: replies})
    transcript = Transcript()
    runner = TaskRunner(model, default_registry())
    values = {"question": OPEN, "passages": "", "relationships": ""}
    return asyncio.run(runner.run(task, transcript, **values)), transcript


def test_yes_and_no_in_any_dress_but_not_a_name_that_opens_so():
    for text in ("yes", "No.", "[yes]", "**no**", '"Yes"', "yes. Both are.", " no "):
        assert is_yes_or_no(text), text
    for text in ("No Doubt", "Nope", "yes sir", "Yesterday", "London", ""):
        assert not is_yes_or_no(text), text
    assert asks_yes_or_no("Did Babbage meet Lovelace?")
    assert not asks_yes_or_no(OPEN) and not asks_yes_or_no("")


def test_a_json_answer_that_is_only_yes_is_refused_then_kept_if_repeated():
    task = for_question(ANSWER_SA, OPEN)
    value, transcript = answer(task, ['{"final_answer": "yes"}', '{"final_answer": "London"}'])
    assert value.final_answer == "London" and transcript.parse_failures == 1
    assert "does not ask yes or no" in transcript.calls[0].error
    value, transcript = answer(task, ['{"final_answer": "yes"}'])
    assert value.final_answer == "yes" and transcript.parse_failures == 2
    # a second reply that does not parse at all goes to the task's own salvage
    value, _ = answer(task, ['{"final_answer": "no"}', 'final_answer: "Lon'])
    assert value.final_answer == ANSWER_SA.fallback('final_answer: "Lon').final_answer
    assert for_question(ANSWER_SA, "Is it London?") is ANSWER_SA
    assert for_question(ANSWER_SA, OPEN, open_answers=False) is ANSWER_SA


def test_without_a_fallback_the_task_fails_as_it_would_without_the_check():
    def parse(raw: str) -> str:
        if not raw.strip():
            raise ParseError("empty", raw)
        return raw.strip()

    task = refusing_yes_or_no(Task("sa-rag.answer", parse), OPEN, lambda text: text)
    assert answer(task, ["yes", "yes"])[0] == "yes"  # refused twice, kept as written
    with pytest.raises(TaskFailed, match="empty"):
        answer(task, ["yes", "  "])
