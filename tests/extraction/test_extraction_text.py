"""Sentence, name, title and date helpers shared by the extractors."""

import itertools
import random

import pytest

from quillian.components.extraction.text import (
    Surfaces,
    TitleIndex,
    clean_name,
    describe,
    find_dates,
    find_name,
    lead_description,
    parse_title,
    sentence_of,
    split_long,
    split_sentences,
    title_aliases,
)


def sentences(text):
    return [text[s:e] for s, e in split_sentences(text)]


@pytest.mark.parametrize(
    "text",
    [
        "Marie Curie was born in Warsaw. She moved to Paris in 1891.",
        "  Leading space. Trailing space.  ",
        "No boundary at all",
        'He wrote " What is God?" first published in 1989. It sold.',
        "He met John F. Kennedy in the U.S. in 1960. Then he left!",
        "Teutberga( died 11 November 875) was a queen. She was a daughter of Boso.",
    ],
)
def test_sentence_spans_index_the_text(text):
    spans = split_sentences(text)
    assert spans, "every non-empty text has a sentence"
    for start, end in spans:
        sentence = text[start:end]
        assert sentence == sentence.strip() and sentence
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)


def test_sentences_respect_initials_abbreviations_and_acronyms():
    text = "He met John F. Kennedy at St. Mary's in the U.S. in 1960. Then he left."
    assert sentences(text) == [
        "He met John F. Kennedy at St. Mary's in the U.S. in 1960.",
        "Then he left.",
    ]


def test_lower_case_fragment_is_glued_to_previous_sentence():
    text = 'His book " What is God?" was published in 1989. It sold well.'
    assert sentences(text) == [
        'His book " What is God?" was published in 1989.',
        "It sold well.",
    ]


def test_a_paragraph_break_ends_a_sentence():
    # glosses separated by blank lines: no full stop before the break, and a paragraph
    # starting in lower case is not glued to the one before it
    text = (
        "cabinetmaking, joinery. the craft of a joiner\n\n"
        "Junoesque, statuesque. suggestive of a statue \n \t\n"
        "Waldenses. a sect founded c.\n\n(Old Testament) king of Judah"
    )
    assert sentences(text) == [
        "cabinetmaking, joinery. the craft of a joiner",
        "Junoesque, statuesque. suggestive of a statue",
        "Waldenses. a sect founded c.",
        "(Old Testament) king of Judah",
    ]


def test_a_single_line_break_does_not_end_a_sentence():
    text = "Marie Curie was born\nin Warsaw. She moved\nto Paris.\n\n\n"
    assert sentences(text) == ["Marie Curie was born\nin Warsaw.", "She moved\nto Paris."]
    assert split_sentences("\n\n \n") == []


def test_sentence_of_finds_the_containing_sentence():
    text = "One. Two two. Three."
    spans = split_sentences(text)
    assert [sentence_of(spans, p) for p in (0, 5, 9, 14, 19)] == [0, 1, 1, 2, 2]


def test_describe_keeps_first_sentence_and_respects_limit():
    text = "Alpha is here. Beta is there. Gamma is everywhere."
    spans = split_sentences(text)
    assert describe(text, spans, [2, 0, 2], limit=1) == "Alpha is here."
    assert describe(text, spans, [2, 0], limit=100) == "Alpha is here. Gamma is everywhere."
    assert lead_description(text, spans, limit=30) == "Alpha is here. Beta is there."


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("Theodred's", "Theodred"),
        ("Marie Curie’s", "Marie Curie"),
        ("the House of Lords", "House of Lords"),
        ('" O Valencia!"', "O Valencia"),
        ("(Warsaw),", "Warsaw"),
        ("Noah Beery, Jr.", "Noah Beery, Jr."),
        ("German-", "German"),
        ("The Beatles", "The Beatles"),
    ],
)
def test_clean_name(raw, name):
    cleaned = clean_name(raw, 0, len(raw))
    assert cleaned is not None
    text, start, end = cleaned
    assert text == name == raw[start:end]


def test_clean_name_rejects_punctuation_only():
    assert clean_name('" - "', 0, 5) is None


def test_find_name_whole_words_case_and_hyphen_spacing():
    text = "Person - centered therapy; Personal Person-centered. the Beatles"
    assert find_name(text, "Person-centered therapy") == [(0, 25)]
    assert find_name(text, "Person") == [(0, 6), (36, 42)]
    assert find_name(text, "beatles") == []
    assert find_name(text, "The Beatles", ignore_case=True) == [(53, 64)]


@pytest.mark.parametrize(
    ("title", "base", "alias"),
    [
        ("Marie Curie", "Marie Curie", ""),
        ("Coney Island Baby (film)", "Coney Island Baby", "Coney Island Baby"),
        ("Theodred II (Bishop of Elmham)", "Theodred II", ""),
        ("Jet Li (actor)", "Jet Li", "Jet Li"),  # "Li" is no regnal number
        ("Henry Percy 1st (baron)", "Henry Percy 1st", ""),
        ("Lloyd (film)", "Lloyd", ""),
        ("The Bat (1959 film)", "The Bat", ""),
        ("The Birth of a Nation (disambiguation)", "The Birth of a Nation", ""),
        ("Lambert, Margrave of Tuscany", "Lambert", ""),
        ("Au Gres Township, Michigan", "Au Gres Township", ""),
        ("Albert Thompson (footballer, born 1912)", "Albert Thompson", "Albert Thompson"),
    ],
)
def test_parse_title_alias_rule(title, base, alias):
    names = parse_title(title)
    assert (names.base, names.alias) == (base, alias)
    assert names.local_names[0] == title and base in names.local_names


def test_title_aliases_drop_aliases_shared_by_other_titles():
    titles = [
        "Dark River (1990 film)",
        "Dark River (2017 film)",
        "Hamlet Smith (actor)",
        "Hamlet Smith",
        "Coney Island Baby (film)",
        "Coney Island Baby (film)",  # two chunks of one passage share their title
        "Lambert, Margrave of Tuscany",
    ]
    assert title_aliases(titles) == {"Coney Island Baby (film)": "Coney Island Baby"}


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("Teutberga( died 11 November 875) was", ["11 November 875"]),
        ("(March 23, 1886 – November 24, 1949)", ["March 23, 1886", "November 24, 1949"]),
        ("released in July 1967 and in 1968", ["July 1967"]),
        ("born 1950, in the 1930s, before 17 October, between 995 and 997", []),
    ],
)
def test_find_dates_only_specific_dates(text, dates):
    assert [text[s:e] for s, e in find_dates(text)] == dates


def test_title_index_finds_other_passages_titles():
    titles = [
        "Conchobar mac Nessa",
        "Conchobar",  # one word: not indexed
        "Ulster Cycle",
        "Ulster Cycle Tales",
        "Christian August, Prince of Anhalt-Zerbst",  # comma title: not indexed
        "Coney Island Baby (film)",
    ]
    index = TitleIndex(titles, title_aliases(titles))
    assert len(index) == 4
    text = (
        "Mugain married Conchobar mac Nessa. The Ulster Cycle Tales mention Christian "
        "August. Conchobar saw Coney Island Baby. Ulster Cycles differ."
    )
    assert [(text[s:e], title) for s, e, title in index.find(text)] == [
        ("Conchobar mac Nessa", "Conchobar mac Nessa"),
        ("Ulster Cycle Tales", "Ulster Cycle Tales"),  # the longest match wins
        ("Coney Island Baby", "Coney Island Baby (film)"),  # an alias names its title
    ]


@pytest.mark.parametrize("seed", range(8))
def test_surfaces_changed_in_place_find_what_an_index_made_anew_finds(seed):
    """Surfaces put and taken out one by one, some sharing first words and lengths (the
    index made before the changes, or after some of them): a text finds what an index
    made of the surfaces after finds."""
    rng = random.Random(seed)
    words = ["Ulster", "Cycle", "Tales", "Coney", "Island", "Baby", "Dark", "River", "Mac"]

    def surface() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))

    surfaces = Surfaces({surface(): f"T{i}" for i in range(rng.randint(0, 12))})
    for step in range(30):
        if step == rng.randint(0, 29):
            surfaces.index()  # made midway: patched from then on
        if surfaces and rng.random() < 0.4:
            surfaces.put(rng.choice(list(surfaces)), None)
        else:
            surfaces.put(surface(), f"T{rng.randint(0, 99)}")
    made = TitleIndex.of_surfaces(dict(surfaces))
    assert dict(surfaces) == made.surfaces
    for _ in range(20):
        text = " ".join(rng.choice([*words, "and", "the"]) for _ in range(40))
        assert surfaces.index().find(text) == made.find(text)


def test_split_long_cuts_at_paragraphs_then_sentences_then_spaces():
    text = "First para one. Two.\n\nSecond para here. More words follow"
    pieces = split_long(text, 30)
    assert "".join(text[a:b] for a, b in pieces) == text
    assert all(b - a <= 30 for a, b in pieces)
    assert text[slice(*pieces[0])] == "First para one. Two.\n\n"
    assert split_long("Sentence one. Sentence two goes on", 20)[0] == (0, 14)
    assert split_long("aaaa bbbb cccc dddd", 12)[0] == (0, 10)
    assert split_long("x" * 25, 10) == [(0, 10), (10, 20), (20, 25)]
    assert split_long("short", 10) == [(0, 5)] and split_long("", 3) == [(0, 0)]
    with pytest.raises(ValueError):
        split_long("text", 0)


@pytest.mark.parametrize("limit", [1, 2, 7, 64])
def test_split_long_pieces_cover_any_text_within_the_limit(limit):
    text = "Ab. cd\n\nef gh.  \u2028ij\x85kl\U0001f600 " * 9
    pieces = split_long(text, limit)
    assert "".join(text[a:b] for a, b in pieces) == text
    assert all(0 < b - a <= limit for a, b in pieces)
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(pieces))
