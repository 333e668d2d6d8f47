"""KAG's task parsers: strict on structure, each failure a ParseError with the raw text."""

from __future__ import annotations

import pytest

from quillian.components.kag import tasks
from quillian.components.llm.structured import ParseError
from quillian.testing.grammar import grammar_accepts


def test_selection_judge_and_final_answer() -> None:
    assert tasks.parse_selection('["0", 3]') == [0, 3]
    assert tasks.parse_judge("Yes, it does.") is True
    assert tasks.parse_judge("**No** - missing") is False
    assert tasks.parse_final('{"thought": "t", "answer": "22 times"}').answer == "22 times"
    for bad, parse in (
        ('["x"]', tasks.parse_selection),
        ("Maybe", tasks.parse_judge),
        ('{"answer": ""}', tasks.parse_final),
    ):
        with pytest.raises(ParseError) as err:
            parse(bad)
        assert err.value.raw == bad


def test_broken_final_answers_are_salvaged_or_unknown() -> None:
    assert tasks.salvage_answer('{"thought": "cut off", "answer": "Venice"').answer == "Venice"
    assert tasks.salvage_answer("[{}]").answer == "UNKNOWN"


def test_triples_and_entities() -> None:
    assert tasks.parse_triples('{"triples": [["a", "b", "c"]]}') == [("a", "b", "c")]
    with pytest.raises(ParseError, match="triple 0 is not three"):
        tasks.parse_triples('{"triples": [["a", "b"]]}')
    (entity,) = tasks.parse_ner('{"output": [{"name": "Ada", "category": "Person"}]}')
    assert entity.name == "Ada"
    with pytest.raises(ParseError, match="category"):
        tasks.parse_ner('[{"name": "Ada"}]')
    assert (
        tasks.is_unknown("I don't know.")
        and tasks.is_unknown("UNKNOWN")
        and not tasks.is_unknown("22")
    )


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [("Yes", True), ("No.", False), ("Yes, the memory names him.", True), ("No: not yet.", False)],
)
def test_the_judge_grammar_lets_through_what_the_parser_reads(reply: str, verdict: bool) -> None:
    pytest.importorskip("llguidance")
    assert grammar_accepts(tasks.JUDGE.decoding.grammar, reply)
    assert tasks.parse_judge(reply) is verdict


@pytest.mark.parametrize("reply", ["Maybe.", "The memory answers it.", "**Yes**", "Yes\nBecause"])
def test_the_judge_grammar_refuses_a_reply_with_no_verdict_first(reply: str) -> None:
    pytest.importorskip("llguidance")
    assert not grammar_accepts(tasks.JUDGE.decoding.grammar, reply)
