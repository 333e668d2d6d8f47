"""Index directories: build, reopen, resume, and refuse what cannot be trusted."""

import json

import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import HashEmbedder, KeywordEmbedder
from quillian.components.factories import make_retriever
from quillian.errors import IndexIncompleteError, IndexMissingError, IndexSchemaError, InputError
from quillian.index import SCHEMA_VERSION, build_index, open_index, read_manifest
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document

CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a proposed mechanical computer.",
    "London": "London is the capital of England.",
}


def docs(titles=None):
    return [
        Document(text, title) for title, text in CORPUS.items() if titles is None or title in titles
    ]


def build(path, documents, extractor=None, embedder=None):
    return build_index(
        documents,
        path,
        chunker=PassageChunker(),
        extractor=extractor or TitleLinkExtractor(CORPUS),
        embedder=embedder or KeywordEmbedder(),
    )


def test_build_open_and_retrieve_two_hops(tmp_path):
    report = build(tmp_path / "idx", docs())
    assert report.counts["documents"] == 4 and report.counts["chunks"] == 4
    assert (
        report.counts["entities"] == 4 and report.counts["relations"] == 4
    )  # A-CB, A-AE, CB-L, CB-AE
    index = open_index(tmp_path / "idx", KeywordEmbedder())
    assert index.manifest["schema_version"] == SCHEMA_VERSION
    result = make_retriever(index.context, "sa").retrieve(
        "Where was the collaborator of Ada Lovelace born?", 3
    )
    got = [p.title for p in result.passages]
    assert got[0] == "Ada Lovelace" and "Charles Babbage" in got
    assert result.trace.seeds[0].name == "Ada Lovelace"
    assert {r.subject for r in result.trace.relations} <= set(CORPUS)
    for method in ("sa-paper", "ppr", "dense", "bm25"):
        assert (
            len(make_retriever(index.context, method).retrieve("Charles Babbage", 2).passages) == 2
        )


def test_rebuild_skips_indexed_documents_and_adds_new(tmp_path):
    extractor = TitleLinkExtractor(CORPUS)
    build(tmp_path / "idx", docs(["Ada Lovelace", "London"]), extractor)
    report = build(tmp_path / "idx", docs(), extractor)
    assert (report.ingest.new, report.ingest.skipped) == (2, 2)
    assert report.counts["documents"] == 4
    assert len(open_index(tmp_path / "idx", KeywordEmbedder()).context.chunk_texts) == 4


def test_failed_extraction_marks_document_failed_and_keeps_the_rest(tmp_path):
    extractor = TitleLinkExtractor(CORPUS, fail_on={"London"})
    report = build(tmp_path / "idx", docs(), extractor)
    assert report.ingest.failed == 1
    assert "extraction failed for 'London'" in report.ingest.failures[0].error
    assert report.counts["chunks"] == 3
    # a fixed extractor on rerun retries the failed document only
    report = build(tmp_path / "idx", docs(), TitleLinkExtractor(CORPUS))
    assert (report.ingest.new, report.ingest.skipped) == (1, 3)
    assert report.counts["chunks"] == 4


def test_interrupted_build_refuses_to_open_then_resumes(tmp_path):
    class Boom(KeywordEmbedder):
        def embed(self, texts):
            raise KeyboardInterrupt  # a kill during the embedding stage

    with pytest.raises(KeyboardInterrupt):
        build(tmp_path / "idx", docs(), embedder=Boom())
    with pytest.raises(IndexIncompleteError, match=r"incomplete.*rerun"):
        open_index(tmp_path / "idx", KeywordEmbedder())
    extractor = TitleLinkExtractor(CORPUS)
    report = build(tmp_path / "idx", docs(), extractor)
    assert report.ingest.skipped == 4 and extractor.calls == 0  # extractions were kept
    assert len(open_index(tmp_path / "idx", KeywordEmbedder()).context.chunk_texts) == 4


def test_changing_the_chunker_is_refused_without_touching_the_index(tmp_path):
    from quillian.components.chunking.chunkers import WordWindowChunker
    from quillian.errors import ConfigError

    build(tmp_path / "idx", docs())
    with pytest.raises(ConfigError, match="built with chunker 'passage'"):
        build_index(
            docs(),
            tmp_path / "idx",
            chunker=WordWindowChunker(50, 10),
            extractor=TitleLinkExtractor(CORPUS),
            embedder=KeywordEmbedder(),
        )
    assert len(open_index(tmp_path / "idx", KeywordEmbedder()).context.chunk_texts) == 4


def test_missing_newer_and_foreign_indexes_are_refused(tmp_path):
    with pytest.raises(IndexMissingError, match="no such index directory"):
        open_index(tmp_path / "nope", KeywordEmbedder())
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexMissingError, match="not a Quillian index"):
        open_index(tmp_path / "empty", KeywordEmbedder())
    build(tmp_path / "idx", docs())
    with pytest.raises(InputError, match="built with embedder 'keyword-1024'"):
        open_index(tmp_path / "idx", HashEmbedder())
    manifest = read_manifest(tmp_path / "idx")
    manifest["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "idx" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexSchemaError, match="newer than this Quillian supports"):
        open_index(tmp_path / "idx", KeywordEmbedder())
    with pytest.raises(IndexSchemaError):  # and a build does not overwrite it
        build(tmp_path / "idx", docs())
    # the refused build left the manifest as it was
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())["schema_version"] == (
        SCHEMA_VERSION + 1
    )
