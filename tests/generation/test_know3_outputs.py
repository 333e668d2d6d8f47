"""Know3-RAG's parsers: triple lists (P4), verdicts (P5), chain-of-thought answers (P1)."""

import pytest

from quillian.components.generation.know3_outputs import (
    ExtractedTriple,
    parse_chain_answer,
    parse_reference,
    parse_triple_list,
    parse_verdict,
    salvage_chain_answer,
)
from quillian.components.llm.structured import ParseError


def test_triple_list_json_none_and_objects_in_prose():
    parsed = parse_triple_list(
        'Here: [{"subject": "Albert Einstein", "predicate": "was born in", "object": "Ulm"}]'
    )
    assert parsed.triples == (ExtractedTriple("Albert Einstein", "was born in", "Ulm"),)
    assert parse_triple_list("None").triples == ()
    assert parse_triple_list("None.").triples == ()
    loose = parse_triple_list(
        '{"subject": "Ulm", "predicate": "is in", "object": "Germany"} and '
        '{"subject": "Ulm", "predicate": "on", "object": "the Danube"}'
    )
    assert [t.object for t in loose.triples] == ["Germany", "the Danube"]


def test_triple_list_drops_generic_incomplete_and_reflexive_items_and_expands_lists():
    parsed = parse_triple_list(
        '[{"subject": "She", "predicate": "is a member of", "object": "the organization"},'
        ' {"subject": "Ulm", "predicate": "is in"},'
        ' {"subject": "Ulm", "predicate": "is", "object": "ulm"},'
        ' {"subject": ["Ulm", "Munich"], "predicate": "are in", "object": "Germany"},'
        ' {"subject": "Ulm", "predicate": "are in", "object": "Germany"}, 7]'
    )
    assert parsed.triples == (
        ExtractedTriple("Ulm", "are in", "Germany"),
        ExtractedTriple("Munich", "are in", "Germany"),
    )
    reasons = " | ".join(parsed.dropped)
    assert "generic or pronoun 'She'" in reasons
    assert "missing subject" in reasons and "subject equals object" in reasons
    assert "not an object" in reasons


def test_malformed_triple_list_raises_with_the_raw_text():
    with pytest.raises(ParseError, match="neither None nor a JSON list") as caught:
        parse_triple_list("Einstein -> Ulm")
    assert caught.value.raw == "Einstein -> Ulm"


def test_verdict_is_strict_and_the_last_one_counts():
    assert parse_verdict("... The reliability of the passage is yes.") is True
    assert parse_verdict("The reliability of the passage is [no].") is False
    assert (
        parse_verdict(
            "Not 'The reliability of the passage is yes'. The reliability of the passage is no."
        )
        is False
    )
    with pytest.raises(ParseError, match="verdict"):
        parse_verdict("The passage looks fine to me.")


def test_chain_answer_takes_the_text_after_the_last_answer_is():
    parsed = parse_chain_answer("The answer is not obvious. So the answer is **Milwaukee**.")
    assert parsed.answer == "Milwaukee" and parsed.reasoning.startswith("The answer is not")
    assert parse_chain_answer("Thus the answer is [yes].").answer == "yes"
    with pytest.raises(ParseError):
        parse_chain_answer("I do not know.")
    assert salvage_chain_answer("Reasoning...\nMilwaukee.").answer == "Milwaukee"
    assert parse_reference('"[A paragraph.]"') == "A paragraph."
    with pytest.raises(ParseError):
        parse_reference("  ")
