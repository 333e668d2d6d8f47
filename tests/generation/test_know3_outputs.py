"""Know3-RAG's parsers: triple lists (P4), verdicts (P5), chain-of-thought answers (P1)."""

import pytest

from quillian.components.generation.know3_outputs import (
    ANSWER_GRAMMAR,
    VERDICT_GRAMMAR,
    ExtractedTriple,
    parse_chain_answer,
    parse_reference,
    parse_triple_list,
    parse_verdict,
    repeats_examples,
    salvage_chain_answer,
)
from quillian.components.generation.polar import asks_yes_or_no
from quillian.components.llm.structured import ParseError
from quillian.components.prompts.know3 import ANSWER, RELEVANCE
from quillian.methods.know3.tasks import answer_task
from quillian.testing.grammar import grammar_accepts


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
    # the fallback is kept, and said: a JSON list has no note, loose objects one
    assert parsed.notes == ()
    assert loose.notes == ("not a JSON list: read 2 loose {...} object(s)",)
    broken = parse_triple_list('{"subject": "Ulm", "predicate": "in", "object": "X"} {"a": ,}')
    assert broken.notes == ("not a JSON list: read 1 loose {...} object(s), 1 unreadable skipped",)


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
    # the placeholder's name, copied before the paragraph by a small model
    assert parse_reference("[reference_paragraph] Simon was born in Milwaukee.") == (
        "Simon was born in Milwaukee."
    )
    assert parse_reference("Reference paragraph: [Simon was born.]") == "Simon was born."
    with pytest.raises(ParseError):
        parse_reference("[reference_paragraph]")
    with pytest.raises(ParseError):
        parse_reference("  ")


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("The answer is Alan Turing. The question asks who founded it.", "Alan Turing"),
        ("So the answer is D. P. Varma. He wrote it in 1902.", "D. P. Varma"),
        ("The answer is the U.S. Army. It was formed in 1775.", "the U.S. Army"),
        ("The answer is St. Louis, Missouri.", "St. Louis, Missouri"),
        ("The answer is 1.5 million. That is the count.", "1.5 million"),
        ("The answer is yes. Both are American.", "yes"),
    ],
)
def test_chain_answer_ends_with_its_sentence(reply, answer):
    """The local model runs on after its answer on the same line; the answer is the
    first sentence, and initials, abbreviations and acronyms do not end it."""
    assert parse_chain_answer(reply).answer == answer


def test_the_prompts_own_replies_pass_their_grammar_and_parse():
    """Every few-shot reply of P5 and P1 is one a held model may write, and the parser
    reads it."""
    pytest.importorskip("llguidance")
    shots = [m.content for m in RELEVANCE.messages if m.role == "assistant"]
    assert len(shots) == 4 and all(grammar_accepts(VERDICT_GRAMMAR, r) for r in shots)
    assert [parse_verdict(r) for r in shots] == [True, False, False, True]
    answers = [m.content for m in ANSWER.messages if m.role == "assistant"]
    assert len(answers) == 3 and all(grammar_accepts(ANSWER_GRAMMAR, r) for r in answers)
    assert all(parse_chain_answer(r).answer for r in answers)


@pytest.mark.parametrize(
    ("grammar", "reply"),
    [
        (VERDICT_GRAMMAR, "The passage is about apples."),  # no verdict
        (VERDICT_GRAMMAR, "The reliability of the passage is maybe."),
        (VERDICT_GRAMMAR, "x" * 481 + " The reliability of the passage is yes."),  # too long
        (VERDICT_GRAMMAR, "The reliability of the passage is yes. And more."),  # not last
        (ANSWER_GRAMMAR, "Paris is the capital."),  # no answer sentence
        (ANSWER_GRAMMAR, "The answer is Paris.\nBecause it is."),  # the answer line ends it
        (ANSWER_GRAMMAR, "x" * 1201 + "The answer is Paris."),  # too long
    ],
)
def test_a_held_reply_ends_in_its_verdict_or_answer_within_bounds(grammar, reply):
    pytest.importorskip("llguidance")
    assert not grammar_accepts(grammar, reply)


@pytest.mark.parametrize(
    ("question", "polar"),
    [
        ("Are both magazines, the Woman's Viewpoint and Pick Me Up, British?", True),
        ("Did Alan Turing study at Princeton?", True),
        ("  'Is it in Paris?'", True),
        ("Which band was formed first, The Exies or Circus Diablo?", False),
        ('"Wonderland by Night" is a song on which album?', False),
        ("If Gallu is a demon Lilu is what?", False),
        ("Isabella of France was the mother of whom?", False),  # a name, not "Is"
        ("", False),
    ],
)
def test_a_yes_or_no_question_opens_with_an_auxiliary_verb(question, polar):
    assert asks_yes_or_no(question) is polar


#: P1's parse for a question that does not ask yes or no (a yes or a no is refused).
parse_open_chain_answer = answer_task("Where was Herbert Simon born?").parse


def test_an_open_question_is_not_answered_yes_or_no():
    for reply in ("So.\n\nThe answer is yes.", "The answer is No", "The answer is yes. Both are."):
        with pytest.raises(ParseError, match="does not ask yes or no"):
            parse_open_chain_answer(reply)
    for answer in ("Paris", "No Doubt", "Nope", "Yesterday (song)", "1746"):
        assert parse_open_chain_answer(f"So.\n\nThe answer is {answer}.").answer == answer
    with pytest.raises(ParseError, match="The answer is"):
        parse_open_chain_answer("Paris.")


def test_the_parser_refuses_a_yes_or_no_in_any_dress_but_not_a_name_that_opens_so():
    for reply in (
        "x The answer is yes",
        "The answer is No.",
        "The answer is [yes]",
        "The answer is **no**",
        'The answer is "Yes"',
        "The answer is yes. Both are.",
    ):
        with pytest.raises(ParseError, match="does not ask yes or no"):
            parse_open_chain_answer(reply)
    for reply in ("x The answer is No Doubt.", "The answer is Nope", "The answer is yes sir"):
        assert parse_open_chain_answer(reply).answer == reply.split("is ", 1)[1].rstrip(".")


EXAMPLES = (
    "Question: In which year was the university where Alan Turing earned his doctorate "
    "founded?\nAlan Turing earned his PhD at Princeton University in 1938. Princeton "
    "University was founded in 1746.\n\nThe answer is 1746.\nThe answer is no."
)


def test_an_answer_taken_from_the_examples_is_one_they_hold_and_the_question_does_not():
    asking = "Reference 1: Herbert Simon studied in Chicago.\nQuestion: Where was Simon born?"
    for answer in ("Alan Turing", "alan  TURING.", "The Princeton University", "1746"):
        assert repeats_examples(answer, EXAMPLES, asking)
    # not in the examples, or only some of its words in their order
    for answer in ("Milwaukee", "Turing Princeton", "Alan Turing's father", ""):
        assert not repeats_examples(answer, EXAMPLES, asking)
    # a yes or a no is the question's concern, not a copy
    assert not repeats_examples("no", EXAMPLES, asking)
    # the question or a reference names it: an answer, not a copy
    assert not repeats_examples("Alan Turing", EXAMPLES, "Question: Who taught Alan Turing?")
    assert not repeats_examples("1746", EXAMPLES, "Reference 1: founded in 1746.")
    # words, not letters: "Turing" is in the examples, "Turin" is not a word of them
    assert not repeats_examples("Turin", EXAMPLES, asking)


def test_masks_decide_what_a_grammar_accepts():
    """The harness checks each byte against the mask computed before it, as generation
    does: a negated lexeme with \\W passed when bytes were only consumed, yet its masks
    allowed nothing but the end after "yes", where the reply cannot end."""
    pytest.importorskip("llguidance")
    negated = (
        "start: REPLY\nREPLY: /The answer is / ANSWER\n"
        "ANSWER: /[^\\n]{1,40}/ & ~/(?i:(yes|no)(\\W*|[.,;:!][^\\n]*))/\n"
    )
    assert not grammar_accepts(negated, "The answer is No Doubt")
    assert grammar_accepts(negated, "The answer is Paris")
    assert grammar_accepts(ANSWER_GRAMMAR, "The answer is yes sir")
