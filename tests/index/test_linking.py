"""What an index caches per chunk depends on the chunk alone; what depends on the corpus
(title links, safe title aliases) is recomputed over every chunk at each rebuild."""

import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction, LinkingExtractor
from quillian.components.extraction.filters import settle_title_aliases
from quillian.components.extraction.serde import (
    extraction_from_json,
    extraction_to_json,
    uncompressed,
)
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.index import open_storage
from quillian.index.build import (
    build_index,
    cache_namespace,
    extract_cached,
    linked_extractions,
)
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Chunk, Document


def chunk(title, text, doc_id="d1"):
    return Chunk(doc_id=doc_id, index=0, text=text, start=0, end=len(text), title=title)


def topic(title, aliases=()):
    return Extraction("c1", "d1", (ExtractedEntity(title, "TITLE", aliases, is_topic=True),))


def test_a_topic_keeps_its_title_alias_exactly_while_it_is_safe():
    film = "Dark River (1990 film)"
    [alone] = settle_title_aliases([topic(film)], [film, "Clio Barnard"])
    assert alone.entities[0].aliases == ("Dark River",)
    # a later title makes the alias ambiguous: it goes, the model's own aliases stay
    [shared] = settle_title_aliases(
        [topic(film, ("Dark River", "Rivière sombre"))], [film, "Dark River (2017 film)"]
    )
    assert shared.entities[0].aliases == ("Rivière sombre",)
    # a title without an alias candidate, and a mention, are left alone
    plain = Extraction("c1", "d1", (ExtractedEntity("Dark River", "WORK_OF_ART", ("DR",)),))
    assert settle_title_aliases([plain, topic("London")], [film]) == [plain, topic("London")]


def test_the_cache_namespace_says_what_is_stored():
    assert isinstance(SpacyExtractor(), LinkingExtractor)
    assert not isinstance(TitleLinkExtractor([]), LinkingExtractor)
    assert cache_namespace(SpacyExtractor()) == "mentions:spacy"
    assert cache_namespace(TitleLinkExtractor([])) == "extraction:title-link"


SAGA = [
    chunk(
        "Fergus mac Róich",
        "Fergus mac Róich lost the throne of Ulster to Conchobar mac Nessa.",
        "d1",
    ),
    chunk("Conchobar mac Nessa", "Conchobar mac Nessa ruled from Emain Macha.", "d2"),
]


@pytest.mark.model
def test_spacy_extract_is_link_over_its_local_mentions():
    extractor = SpacyExtractor()
    local = extractor.extract_local(SAGA)
    assert all(not e.triples and not any(x.is_topic for x in e.entities) for e in local)
    assert extractor.extract(SAGA) == extractor.link(SAGA, local, [c.title for c in SAGA])
    # the first chunk alone does not know the second's title; linked over both, it does
    [alone] = extractor.link(SAGA[:1], local[:1], [SAGA[0].title])
    [linked, _] = linked_extractions(SAGA, extractor, local)
    assert "Conchobar mac Nessa" in {e.name for e in linked.entities}
    assert {e.name for e in alone.entities} != {e.name for e in linked.entities}
    with pytest.raises(ValueError, match="given for chunk"):
        extractor.link(SAGA, local[::-1], [])


@pytest.mark.model
def test_the_index_caches_mentions_not_links(tmp_path):
    build_index(
        [Document(c.text, c.title) for c in SAGA],
        tmp_path / "idx",
        chunker=PassageChunker(),
        extractor=SpacyExtractor(),
        embedder=KeywordEmbedder(),
    )
    with open_storage(tmp_path / "idx") as storage:
        assert list(storage.kv.keys("extraction:spacy")) == []
        assert len(list(storage.kv.keys("mentions:spacy"))) == 2


@pytest.mark.model
def test_a_rebuild_drops_the_linked_extractions_older_versions_cached(tmp_path):
    docs = [Document(c.text, c.title) for c in SAGA]
    settings = {"chunker": PassageChunker(), "embedder": KeywordEmbedder()}
    build_index(docs[:1], tmp_path / "idx", extractor=SpacyExtractor(), **settings)
    with open_storage(tmp_path / "idx") as storage:  # as an index built before linking
        storage.kv.put_many("extraction:spacy", {"chunk-old": b"{}"})
    build_index(docs, tmp_path / "idx", extractor=SpacyExtractor(), **settings)
    with open_storage(tmp_path / "idx") as storage:
        assert list(storage.kv.keys("extraction:spacy")) == []


@pytest.mark.model
def test_a_build_extracts_again_and_stores_results_of_an_older_version(tmp_path):
    """Mentions stored before dependency parses (as an index built before predicates
    holds them) are extracted again by the next build and stored in their place: the
    build after that reads them back as they are."""
    from dataclasses import replace

    docs = [Document(c.text, c.title) for c in SAGA]
    settings = {"chunker": PassageChunker(), "embedder": KeywordEmbedder()}
    build_index(docs[:1], tmp_path / "idx", extractor=SpacyExtractor(), **settings)
    with open_storage(tmp_path / "idx") as storage:
        [(key, raw)] = [
            (k, storage.kv.get_many("mentions:spacy", [k])[0])
            for k in storage.kv.keys("mentions:spacy")
        ]
        old = replace(extraction_from_json(uncompressed(raw)), parse=None)
        storage.kv.put_many("mentions:spacy", {key: extraction_to_json(old)})
    build_index(docs, tmp_path / "idx", extractor=SpacyExtractor(), **settings)
    with open_storage(tmp_path / "idx") as storage:
        stored = storage.kv.get_many("mentions:spacy", list(storage.kv.keys("mentions:spacy")))
    assert len(stored) == 2
    assert not any(
        SpacyExtractor().stale(extraction_from_json(uncompressed(raw))) for raw in stored
    )


def test_extractions_are_stored_compressed_and_ones_stored_plain_are_read(tmp_path):
    """Results are stored compressed; one stored as plain JSON (before compression) is
    read back as it is, not extracted again."""
    docs = [Document(c.text, c.title) for c in SAGA]
    settings = {"chunker": PassageChunker(), "embedder": KeywordEmbedder()}
    titles = [c.title for c in SAGA]
    build_index(docs, tmp_path / "idx", extractor=TitleLinkExtractor(titles), **settings)
    namespace = "extraction:title-link"
    with open_storage(tmp_path / "idx") as storage:
        keys = sorted(storage.kv.keys(namespace))
        stored = storage.kv.get_many(namespace, keys)
        assert len(stored) == 2 and not any(raw is None or raw[:1] == b"{" for raw in stored)
        plain = {k: uncompressed(raw) for k, raw in zip(keys, stored, strict=True) if raw}
        assert all(extraction_from_json(raw).chunk_id == k for k, raw in plain.items())
        storage.kv.put_many(namespace, plain)
        chunks = list(storage.documents.iter_chunks())
        again = TitleLinkExtractor(titles)
        read = extract_cached(chunks, again, storage.kv)
    assert again.calls == 0
    assert read == TitleLinkExtractor(titles).extract(chunks)
