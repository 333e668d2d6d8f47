"""KG-Infused RAG's output parsers: triple selection keeps only given triples, in either
separator form; summaries and enhanced passages lose their label; the judge's JSON."""

import pytest

from quillian.components.generation.kg_outputs import (
    NONE,
    format_triples,
    parse_enhanced_passage,
    parse_judgement,
    parse_summary,
    parse_triple_selection,
)
from quillian.components.kg.base import KGTriple
from quillian.components.llm.structured import ParseError

MADE = KGTriple(0, "manufacturer", 1, "AAM-N-4 Oriole", "Martin Company")
KIND = KGTriple(0, "instance of", 2, "AAM-N-4 Oriole", "Air-to-air missile")
TEXAS = KGTriple(3, "located in", 4, "Paris, Texas", "Lamar County")
CANDIDATES = [MADE, KIND, TEXAS]


def test_format_triples_one_per_line_each_text_once():
    assert format_triples([MADE, KIND, MADE]) == (
        "<AAM-N-4 Oriole | manufacturer | Martin Company>\n"
        "<AAM-N-4 Oriole | instance of | Air-to-air missile>"
    )
    assert format_triples([]) == NONE


def test_selection_accepts_pipes_commas_case_and_spacing():
    raw = (
        "Selected Triples:\n"
        "<aam-n-4 oriole|manufacturer|  Martin   Company>\n"
        "- <Paris, Texas, located in, Lamar County>\n"
    )
    selection = parse_triple_selection(raw, CANDIDATES)
    assert selection.triples == (MADE, TEXAS)
    assert selection.unmatched == () and selection.repeated == 0


def test_selection_rejects_invented_triples_and_records_them():
    raw = "<AAM-N-4 Oriole | manufacturer | Martin Company>\n<AAM-N-4 Oriole | made of | steel>"
    selection = parse_triple_selection(raw, CANDIDATES)
    assert selection.triples == (MADE,)
    assert selection.unmatched == ("AAM-N-4 Oriole | made of | steel",)


def test_selection_of_only_invented_triples_is_a_parse_error_unless_lenient():
    raw = "<Martin Company | followed by | Martin Marietta>"
    with pytest.raises(ParseError) as caught:
        parse_triple_selection(raw, CANDIDATES, prompt="kg-infused.triple-select")
    assert caught.value.raw == raw and "none of the 1 triples" in str(caught.value)
    lenient = parse_triple_selection(raw, CANDIDATES, strict=False)
    assert lenient.triples == () and len(lenient.unmatched) == 1


@pytest.mark.parametrize("raw", ["", "None", "No relevant triples.", "<none>"])
def test_no_selection_is_valid(raw):
    selection = parse_triple_selection(raw, CANDIDATES)
    assert selection.triples == () and selection.unmatched == ()


def test_bare_lines_match_and_prose_is_ignored():
    raw = (
        "Here are the relevant triples, as requested, for the question:\n"
        "1. AAM-N-4 Oriole | instance of | Air-to-air missile\n"
        "2. (Paris, Texas, located in, Lamar County)\n"
    )
    selection = parse_triple_selection(raw, CANDIDATES)
    assert selection.triples == (KIND, TEXAS) and selection.unmatched == ()


def test_duplicates_and_previously_selected_triples_are_not_selected_again():
    raw = "<AAM-N-4 Oriole | manufacturer | Martin Company>\n" * 2 + (
        "<AAM-N-4 Oriole | instance of | Air-to-air missile>"
    )
    selection = parse_triple_selection(raw, [MADE], previous=[KIND])
    assert selection.triples == (MADE,)
    assert selection.repeated == 1 and selection.unmatched == ()


def test_two_candidates_with_the_same_text_are_both_selected():
    twin = KGTriple(9, "manufacturer", 1, "AAM-N-4 Oriole", "Martin Company")
    selection = parse_triple_selection(
        "<AAM-N-4 Oriole | manufacturer | Martin Company>", [MADE, twin]
    )
    assert selection.triples == (MADE, twin)


def test_summary_and_enhanced_passage_drop_their_label():
    assert parse_summary("Summary: Martin Marietta followed.") == "Martin Marietta followed."
    assert parse_enhanced_passage("Enhanced passage:\nThe Martin Company ...") == (
        "The Martin Company ..."
    )
    assert parse_enhanced_passage("Plain text.") == "Plain text."
    with pytest.raises(ParseError):
        parse_summary("  \n")


def test_judgement_reads_fenced_json_and_checks_ids():
    verdict = parse_judgement('```json\n{"best_id": 2, "worst_id": "5"}\n```', 6)
    assert (verdict.best_id, verdict.worst_id, verdict.is_tie) == (2, 5, False)
    assert parse_judgement('{"best_id": 1, "worst_id": 1}', 6).is_tie
    with pytest.raises(ParseError, match="worst_id 6 is not an output id"):
        parse_judgement('{"best_id": 0, "worst_id": 6}', 6)
    with pytest.raises(ParseError):
        parse_judgement("Output 3 is best.", 6)
