"""Lexical entity linking in questions."""

from quillian.components.retrieval.seeding import EntityLexicon, initials_spelled

LEX = EntityLexicon.from_names(
    [
        (0, ["Abdul-Aziz bin Muhammad"]),
        (1, ["Muhammad bin Saud"]),
        (2, ["Muhammad"]),
        (3, ["Theodred II (Bishop of Elmham)", "Theodred II"]),
        (4, ["The Beatles"]),
        (5, ["Film"]),
    ]
)


def names(text):
    return [(m.entity, m.surface) for m in LEX.match(text)]


def test_longest_match_wins_and_possessive_is_stripped():
    assert names("Where did Abdul-Aziz Bin Muhammad's father die?") == [
        (0, "Abdul-Aziz Bin Muhammad's")
    ]


def test_alias_and_article_normalisation():
    assert names("Who was Theodred II?") == [(3, "Theodred II")]
    assert names("When did The Beatles split?") == [(4, "The Beatles")]


def test_several_entities_left_to_right_without_overlap():
    assert names("Was Muhammad bin Saud older than Muhammad?") == [
        (1, "Muhammad bin Saud"),
        (2, "Muhammad"),
    ]


def test_question_words_never_seed():
    assert names("Which film came out first?") == []
    assert len(LEX) == 7


def test_lowercase_spans_do_not_link_in_cased_text():
    lex = EntityLexicon.from_names([(0, ["border with"]), (1, ["Johnnycake"]), (2, ["1955"])])
    assert [m.entity for m in lex.match("What county shares a border with Johnnycake?")] == [1]
    assert [m.entity for m in lex.match("Who was born in 1955?")] == [2]
    # without any case information every span may link
    assert [m.entity for m in lex.match("what shares a border with johnnycake")] == [0, 1]


def test_dates_and_numbers_are_literals_names_are_not():
    from quillian.components.retrieval.seeding import is_literal

    for value in ("4 December 1934", "March 13, 1891", "1990s", "1,200", "3rd", "1729"):
        assert is_literal(value), value
    for name in ("Apollo 11", "World War II", "2007 FIFA U-20 World Cup", "U-20", "May"):
        assert not is_literal(name), name
    # the extractor's type decides when it has one; an untyped name is judged by itself
    assert is_literal("the summer", "DATE")
    assert not is_literal("Paris", "GPE")


def test_initials_match_with_or_without_spaces():
    lexicon = EntityLexicon.from_names([(0, ["D. P. Varma"]), (1, ["J.R.R. Tolkien"])])
    found = lexicon.match("Did D.P. Varma read J. R. R. Tolkien?")
    assert [(m.entity, m.surface) for m in found] == [(0, "D.P. Varma"), (1, "J. R. R. Tolkien")]


def test_initials_spelled_leaves_other_names_alone():
    assert initials_spelled("A. Smith") == ["A. Smith"]
    assert initials_spelled("Paris") == ["Paris"]
    assert initials_spelled("M.M. Srilekha") == ["M.M. Srilekha", "M. M. Srilekha"]
