from quillian.components.kg.predicates import FoldedPredicates, relation_key


def test_spellings_of_one_relation_share_a_key():
    # ReVerb's normalisation: auxiliaries, determiners and adverbs go, inflection is stemmed
    assert relation_key("is located in") == relation_key("located in") == "locat in"
    assert relation_key("is also known as") == relation_key("known as")
    assert relation_key("was a member of") == relation_key("member of")
    assert relation_key("stars") == relation_key("starring") == relation_key("starred")
    assert relation_key("Born  In") == relation_key("was born in")


def test_what_tells_relations_apart_is_kept():
    assert relation_key("born in") != relation_key("born on")
    assert relation_key("written by") != relation_key("wrote")
    assert relation_key("is largest city of") != relation_key("is city of")  # adjectives stay
    assert relation_key("did not win") != relation_key("won")  # so does negation


def test_a_predicate_of_auxiliaries_only_keeps_its_verb():
    assert relation_key("is") == relation_key("was a") == relation_key("were") == "be"
    assert relation_key("has") == relation_key("had") == "have"
    assert relation_key("") == relation_key(" ... ") == "related to"


def test_words_in_any_script_are_kept():
    assert relation_key("dirigé par") != relation_key("écrit par")
    assert relation_key("出生于") == "出生于" != relation_key("位于")


def test_folded_relations_are_named_by_their_most_frequent_spelling():
    folded = FoldedPredicates(
        ["is located in", "located in", "Located  in", "stars", "is", "starring", "was"]
    )
    assert folded.ids == [0, 0, 0, 1, 2, 1, 2]
    assert folded.names == ("located in", "stars", "is")  # ties: the first seen
    assert folded.keys == ("locat in", "star", "be")
