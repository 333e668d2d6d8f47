"""A page's title without its qualifier names the page's entity in a question."""

from dataclasses import replace

import numpy as np
import pytest

from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.graph.builder import GraphBuilder
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.seeding import page_aliases, title_base
from quillian.stores.embedded.vectors import ExactVectorIndex

Q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
TITLES = [
    "L'Amour (music venue)",
    "Lilu (mythology)",
    "Lilu (ancient China)",
    "Mark King (musician)",
    "Level 42",
]


def test_title_base_strips_one_trailing_qualifier():
    assert title_base("L'Amour (music venue)") == "L'Amour"
    assert title_base("In Love and War (1987 film)") == "In Love and War"
    assert title_base("Level 42") is None
    assert title_base("(Untitled)") is None
    assert title_base("A (b) c") is None
    assert title_base(" L'Amour  (music venue)\n") == "L'Amour"  # surrounding space
    assert title_base("L'Amour (music venue) \t") == "L'Amour"
    assert title_base("L'Amour (music venue).") is None


def test_a_base_two_pages_share_is_no_alias():
    pages = [(0, "L'Amour (music venue)"), (1, "Lilu (mythology)"), (2, "Lilu (ancient China)")]
    assert page_aliases(pages) == [(0, ["L'Amour"])]


@pytest.fixture
def context(tmp_path) -> RetrievalContext:
    builder = GraphBuilder()
    for i, title in enumerate(TITLES):
        mentions = (ExtractedEntity("Mark King", "PERSON"),) if title == "Level 42" else ()
        entities = (ExtractedEntity(title, "ORG", is_topic=True), *mentions)
        builder.add(Extraction(f"c{i}", f"d{i}", entities))
    kg = builder.build([f"c{i}" for i in range(len(TITLES))])
    chunks = ExactVectorIndex(tmp_path / "chunks", 3)
    chunks.add(np.arange(len(TITLES)), [[1.0, 0.0, 0.0]] * len(TITLES))
    return RetrievalContext(
        kg=kg,
        embedder=HashEmbedder(3),
        chunk_vectors=chunks,
        text_vectors=ExactVectorIndex(tmp_path / "texts", 3),
        description_rows=np.zeros(0, dtype=np.int64),
        relation_rows=np.zeros(0, dtype=np.int64),
        chunk_titles=TITLES,
        chunk_texts=[""] * len(TITLES),
    )


def named(ctx: RetrievalContext, question: str) -> list[str]:
    return [s.name for s in ctx.seeds(question, Q, "lexical", 0)]


def test_each_chunk_knows_the_entity_it_is_about(context):
    names = [context.entity_name(int(e)) for e in context.page_entities]
    assert names == TITLES


def test_the_base_title_seeds_its_page_entity(context):
    assert named(context, "Which city hosted L'Amour?") == ["L'Amour (music venue)"]
    off = replace(context, title_aliases=False)
    assert named(off, "Which city hosted L'Amour?") == []


def test_an_ambiguous_base_seeds_nothing(context):
    assert named(context, "Who worshipped Lilu?") == []


def test_an_entity_of_that_very_name_keeps_the_name(context):
    # "Mark King" is an entity of its own (Level 42 mentions him): the name stays his
    assert named(context, "Which band did Mark King found?") == ["Mark King"]
