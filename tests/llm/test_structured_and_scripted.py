"""Structured output parsing and the scripted chat model."""

import asyncio
import json

import pytest
from pydantic import BaseModel, Field

from quillian.components.llm.base import ChatMessage, ChatModel, Decoding, Usage
from quillian.components.llm.scripted import ScriptedChatModel, UnscriptedPromptError
from quillian.components.llm.structured import (
    SHORT_ANSWER,
    ParseError,
    extract_json,
    json_schema_of,
    parse_json_as,
)


class Entities(BaseModel):
    named_entities: list[str]


def test_json_in_a_fence_or_in_prose():
    assert extract_json('Sure!\n```json\n{"a": 1}\n```\nDone.') == {"a": 1}
    assert extract_json('The answer is {"a": [1, "}"]} as asked.') == {"a": [1, "}"]}
    assert extract_json("list: [1, 2] then {bad} ") == [1, 2]


def test_nothing_is_evaluated_and_failures_keep_the_raw_text():
    raw = "{'a': __import__('os').getcwd()}"  # Python, not JSON: never evaluated
    with pytest.raises(ParseError) as err:
        extract_json(raw, prompt="ner@1")
    assert err.value.raw == raw and err.value.prompt == "ner@1"
    assert "ner@1: no JSON object or array found" in str(err.value)
    with pytest.raises(ParseError, match="empty model output"):
        extract_json("   ")


def test_truncated_output_is_a_parse_error():
    with pytest.raises(ParseError, match="no JSON"):
        extract_json('{"named_entities": ["Paris", "Lon')


def test_validation_names_the_field():
    assert parse_json_as('{"named_entities": ["Paris"]}', Entities).named_entities == ["Paris"]
    with pytest.raises(ParseError, match=r"does not match Entities \(named_entities"):
        parse_json_as('{"named_entities": "Paris"}', Entities)


def test_scripted_model_routes_by_prompt_and_records_calls():
    model = ScriptedChatModel(
        {
            "sa-rag.ner": '{"named_entities": ["Paris"]}',
            "answer": ["first", "second"],
            "Echo:": lambda messages: messages[-1].content.upper(),
        }
    )
    assert isinstance(model, ChatModel)
    msgs = [ChatMessage("system", "be brief"), ChatMessage("user", "Text: Paris")]

    async def run():
        ner = await model.chat(msgs, prompt="sa-rag.ner@1")
        a1 = await model.chat([ChatMessage("user", "q")], prompt="answer@2")
        a2 = await model.chat([ChatMessage("user", "q")], prompt="answer@2")
        a3 = await model.chat([ChatMessage("user", "q")], prompt="answer@2")
        echo = await model.chat([ChatMessage("user", "Echo: hi")], decoding=Decoding(0.7))
        return ner, a1, a2, a3, echo

    ner, a1, a2, a3, echo = asyncio.run(run())
    assert parse_json_as(ner.text, Entities).named_entities == ["Paris"]
    assert (a1.text, a2.text, a3.text) == ("first", "second", "second")
    assert echo.text == "ECHO: HI"
    assert ner.usage == Usage(prompt_tokens=4, completion_tokens=2)  # whitespace tokens
    assert [c.prompt for c in model.calls][:2] == ["sa-rag.ner@1", "answer@2"]
    assert model.calls[-1].decoding.temperature == 0.7


def test_unscripted_prompt_is_an_error_unless_a_default_is_given():
    with pytest.raises(UnscriptedPromptError, match="no scripted answer for prompt 'x@1'"):
        asyncio.run(ScriptedChatModel({}).chat([ChatMessage("user", "hi")], prompt="x@1"))
    fallback = ScriptedChatModel({}, default="ok")
    assert asyncio.run(fallback.chat([ChatMessage("user", "hi")])).text == "ok"


def test_decoding_and_roles_are_validated():
    with pytest.raises(ValueError, match="top_p"):
        Decoding(top_p=0.0)
    with pytest.raises(ValueError, match="unknown chat role 'bot'"):
        ChatMessage("bot", "hi")  # type: ignore[arg-type]


class _Step(BaseModel):
    reasoning: str = ""
    answer: str
    sources: list[int] = []


def test_a_reply_schema_requires_every_field_in_order_and_no_other():
    schema = json.loads(json_schema_of(_Step))
    assert list(schema["properties"]) == ["reasoning", "answer", "sources"]
    assert schema["required"] == ["reasoning", "answer", "sources"]
    assert schema["additionalProperties"] is False
    listed = json.loads(json_schema_of(list[_Step]))
    assert listed["type"] == "array"
    assert listed["$defs"]["_Step"]["required"] == ["reasoning", "answer", "sources"]
    capped = json.loads(json_schema_of(_Step, max_chars=50))["properties"]
    assert capped["reasoning"]["maxLength"] == capped["answer"]["maxLength"] == 25
    assert "maxLength" not in capped["sources"]


class _Answered(BaseModel):
    reasoning: str = ""
    final_answer: str = Field(json_schema_extra=SHORT_ANSWER)
    note: str = ""


def test_a_short_answer_keeps_its_cap_and_the_other_fields_share_the_rest():
    capped = json.loads(json_schema_of(_Answered, max_chars=768))["properties"]
    assert capped["final_answer"]["maxLength"] == SHORT_ANSWER["maxLength"] == 120
    assert capped["reasoning"]["maxLength"] == capped["note"]["maxLength"] == (768 - 120) // 2
    free = json.loads(json_schema_of(_Answered))["properties"]
    assert free["final_answer"]["maxLength"] == 120 and "maxLength" not in free["reasoning"]
    # the cap is the schema's, not the parser's: a free reply's long answer is read
    long = "x" * 300
    assert parse_json_as(json.dumps({"final_answer": long}), _Answered).final_answer == long


def test_a_decoding_schema_must_be_a_json_object():
    assert Decoding(json_schema='{"type": "object"}').free() == Decoding()
    for bad, message in (("{", "not JSON"), ("[1]", "JSON object")):
        with pytest.raises(ValueError, match=message):
            Decoding(json_schema=bad)
