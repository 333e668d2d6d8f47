"""The corpus-level filter that drops ambiguous single-word names."""

import itertools

from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.extraction.filters import ambiguous_names, drop_ambiguous_names
from quillian.types import Triple


def extraction(doc_id, *entities, topic=None):
    ents = [ExtractedEntity(name, type_) for name, type_ in entities]
    if topic:
        ents.insert(0, ExtractedEntity(topic, "TITLE", is_topic=True))
    names = [e.name for e in ents]
    triples = [Triple(a, "related_to", b) for a, b in itertools.pairwise(names)]
    return Extraction(f"chunk-{doc_id}", doc_id, tuple(ents), tuple(triples))


def names(x):
    return [e.name for e in x.entities]


def test_single_names_in_many_documents_are_dropped_with_their_links():
    corpus = [
        extraction(f"d{i}", ("John", "PERSON"), ("Paris", "GPE"), ("Mary Smith", "PERSON"))
        for i in range(4)
    ]
    assert ambiguous_names(corpus, max_docs=3) == {"john"}
    filtered = drop_ambiguous_names(corpus, max_docs=3)
    assert [names(x) for x in filtered] == [["Paris", "Mary Smith"]] * 4
    assert all(("John" not in (t.subject, t.object)) for x in filtered for t in x.triples)
    assert [(t.subject, t.object) for t in filtered[0].triples] == [("Paris", "Mary Smith")]
    assert drop_ambiguous_names(filtered, max_docs=3) == filtered  # idempotent
    assert drop_ambiguous_names(corpus, max_docs=4) == corpus
    assert drop_ambiguous_names(corpus, max_docs=0) == corpus


def test_chunks_of_one_document_count_once():
    corpus = [extraction("d1", ("John", "PERSON")) for _ in range(5)]
    assert ambiguous_names(corpus, max_docs=3) == frozenset()


def test_titles_places_and_multi_word_names_are_never_ambiguous():
    corpus = [
        extraction(f"d{i}", ("Gundobad", "PERSON"), ("France", "GPE"), ("Mary Smith", "PERSON"))
        for i in range(5)
    ]
    assert ambiguous_names(corpus, max_docs=3) == {"gundobad"}
    titled = [*corpus, extraction("g", topic="Gundobad")]
    assert ambiguous_names(titled, max_docs=3) == frozenset()
    assert ambiguous_names(corpus, max_docs=3, protected=["Gundobad"]) == frozenset()
