"""Parsers of the papers' output formats: strict, never evaluating, raw text kept."""

import pytest

from quillian.components.generation.outputs import (
    parse_decomposition,
    parse_line,
    parse_reasoned_answer,
    parse_reasoning_step,
    parse_self_ask,
    parse_text,
    salvage_final_answer,
)
from quillian.components.llm.structured import ParseError


def test_short_lines_drop_labels_and_quotes():
    assert parse_line('\n  Answer: "Paris"\nbecause...') == "Paris"
    assert parse_line("New Query: birthplace of Babbage") == "birthplace of Babbage"
    with pytest.raises(ParseError, match="empty"):
        parse_line(" \n ")
    with pytest.raises(ParseError):
        parse_text("")


def test_reasoned_answer_accepts_numbers_and_rejects_empty_answers():
    assert parse_reasoned_answer('{"reasoning": "x", "final_answer": 1987}').final_answer == "1987"
    assert parse_reasoned_answer('```json\n{"final_answer": "Yes"}\n```').final_answer == "Yes"
    with pytest.raises(ParseError, match="final_answer"):
        parse_reasoned_answer('{"reasoning": "x", "final_answer": "  "}')
    with pytest.raises(ParseError, match="final_answer"):
        parse_reasoned_answer('{"reasoning": "x"}')


def test_reasoning_steps_must_be_consistent():
    ok = parse_reasoning_step(
        '{"provided_context": "c", "answer_possible": false, "final_answer": null,'
        ' "additional_question": "Where?"}'
    )
    assert ok.additional_question == "Where?" and ok.final_answer == ""
    with pytest.raises(ParseError, match="additional_question"):
        parse_reasoning_step('{"answer_possible": false, "additional_question": ""}')
    with pytest.raises(ParseError, match="final_answer"):
        parse_reasoning_step('{"answer_possible": true}')
    with pytest.raises(ParseError, match="answer_possible"):
        parse_reasoning_step('{"answer_possible": "perhaps", "final_answer": "x"}')


def test_decompositions_as_objects_strings_or_a_bare_list():
    plan = parse_decomposition(
        '{"original_question": "q", "subquestions": [{"id": 1, "question": "a?"}, "b?"]}'
    )
    assert [s.question for s in plan.subquestions] == ["a?", "b?"]
    assert [s.question for s in parse_decomposition('["a?"]').subquestions] == ["a?"]
    with pytest.raises(ParseError):
        parse_decomposition('{"subquestions": []}')


def test_salvage_reads_one_string_field_of_broken_json():
    assert salvage_final_answer('{"final_answer": "New \\"York\\"", "reasoning": "cut') == (
        'New "York"'
    )
    assert salvage_final_answer('{"reasoning": "cut off') == ""
    # small models write key-value lines instead of JSON
    assert salvage_final_answer("reasoning: x\nfinal_answer: West Virginia") == "West Virginia"
    assert salvage_final_answer('Final answer: "London",') == "London"
    assert salvage_final_answer("I am not sure") == ""


def test_self_ask_takes_the_first_follow_up_or_the_final_answer():
    step = parse_self_ask(
        "Are follow up questions needed here: Yes.\nFollow up: Who?\n"
        "Intermediate answer: made up\nSo the final answer is: wrong"
    )
    assert step.follow_up == "Who?" and step.final_answer == ""
    assert parse_self_ask("So the final answer is: Joseph Ball.").final_answer == "Joseph Ball"
    run_on = parse_self_ask("So the final answer is: Joseph P. Ball. He was born in 1905.")
    assert run_on.final_answer == "Joseph P. Ball"
    with pytest.raises(ParseError, match="Follow up"):
        parse_self_ask("I do not know")
