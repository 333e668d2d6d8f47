"""Links made from a chunk's mentions, without a model."""

import pytest

from quillian.components.extraction.assemble import (
    Mention,
    Passage,
    group_mentions,
    link_triples,
    topic_draft,
)
from quillian.components.extraction.text import split_sentences
from quillian.types import Chunk


def triples(text, index, title="Frederic Chopin", names=("Paris", "Victor Hugo")):
    chunk = Chunk("doc-1", index, text, 0, len(text), title)
    mentions = [Mention(n, "PERSON", text.index(n), text.index(n) + len(n)) for n in names]
    drafts = group_mentions(mentions, topic_draft(chunk, {}))
    passage = Passage(chunk, split_sentences(text))
    found = link_triples(passage, drafts, max_per_sentence=10, link_topic=True)
    return {frozenset((t.subject, t.object)) for t in found}


PAIRS = {frozenset(("Paris", "Victor Hugo"))}
TOPIC = {frozenset(("Frederic Chopin", "Paris")), frozenset(("Frederic Chopin", "Victor Hugo"))}


@pytest.mark.parametrize("index", [0, 3])
def test_a_chunk_naming_its_topic_links_it_to_its_names(index):
    text = "Frederic Chopin settled in France. He met Victor Hugo in Paris."
    assert triples(text, index) == PAIRS | TOPIC


def test_a_documents_first_chunk_links_its_topic_by_pronoun():
    assert triples("He settled in Paris and met Victor Hugo.", 0) == PAIRS | TOPIC


def test_a_later_chunk_not_naming_the_topic_does_not_link_it():
    # a long file's title (its file name) is named nowhere in its text: no hub
    assert triples("He settled in Paris and met Victor Hugo.", 3) == PAIRS
    assert triples("She settled in Paris and met Victor Hugo.", 1, title="notes") == PAIRS
