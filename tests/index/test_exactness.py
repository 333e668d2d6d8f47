"""An index equals a clean build of the documents it holds, however it got there: by a
delete, or by indexing in several runs. Each test runs on every storage backend of
``index_location`` (see conftest.py)."""

import json

import pytest

from quillian.cli.main import main
from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.engine import IndexSettings, delete_documents, index_documents
from quillian.errors import InputError
from quillian.index import build_index
from quillian.index import delete_documents as delete_from_index
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document

#: Shared entities (Charles Babbage, the Analytical Engine), a document that only one
#: other mentions (London), and one nobody mentions (Lord Byron's daughter).
CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a proposed mechanical computer.",
    "London": "London is the capital of England. Charles Babbage lived in London.",
    "Difference Engine": "Charles Babbage built the Difference Engine first.",
    "Allegra Byron": "Allegra Byron was a daughter of the poet Lord Byron.",
}
QUERIES = ("Where was Charles Babbage born?", "the Analytical Engine", "capital of England")
EMBEDDINGS = "embeddings"


def documents(leave_out=()):
    return [Document(text, title) for title, text in CORPUS.items() if title not in leave_out]


def doc_id(title):
    return Document(CORPUS[title], title).id


def build(location, docs):
    return build_index(
        docs,
        location,
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
    )


def delete(location, titles):
    return delete_from_index(
        location,
        [doc_id(t) for t in titles],
        extractor=TitleLinkExtractor(CORPUS),
        embedder=KeywordEmbedder(),
    )


NAMESPACES = ("extraction:title-link", EMBEDDINGS)


@pytest.mark.parametrize(
    "gone",
    [("Charles Babbage",), ("London",), ("Allegra Byron",), ("Ada Lovelace", "London")],
)
def test_delete_equals_a_build_without_the_documents(index_location, same_index, gone):
    build(index_location("full"), documents())
    report = delete(index_location("full"), gone)
    assert report.deleted == [doc_id(t) for t in gone]
    build(index_location("without"), documents(gone))
    same_index(
        index_location("full"), index_location("without"), KeywordEmbedder(), QUERIES, NAMESPACES
    )


def test_deleting_everything_then_adding_back_equals_a_clean_build(index_location, same_index):
    build(index_location("idx"), documents())
    delete(index_location("idx"), list(CORPUS)[:3])
    delete(index_location("idx"), list(CORPUS)[3:])
    build(index_location("idx"), documents())
    build(index_location("clean"), documents())
    same_index(
        index_location("idx"), index_location("clean"), KeywordEmbedder(), QUERIES, NAMESPACES
    )


def test_an_unknown_id_is_refused_and_changes_nothing(index_location, same_index):
    build(index_location("idx"), documents())
    build(index_location("copy"), documents())
    with pytest.raises(InputError, match=r"no such document.*nope"):
        delete_from_index(
            index_location("idx"),
            [doc_id("London"), "nope"],
            extractor=TitleLinkExtractor(CORPUS),
            embedder=KeywordEmbedder(),
        )
    same_index(
        index_location("idx"), index_location("copy"), KeywordEmbedder(), QUERIES, NAMESPACES
    )


# --- the spaCy extractor through the engine and the CLI ----------------------------------

#: Titles that earlier documents mention ("Conchobar mac Nessa", "Clio Barnard") arrive
#: with the second half, and "Dark River (2017 film)" makes the alias "Dark River" of
#: the first half's 1990 film unsafe.
SAGA = {
    "Fergus mac Róich": "Fergus mac Róich was a king of Ulster. He lost the throne of "
    "Ulster to Conchobar mac Nessa, his stepson, who ruled from Emain Macha.",
    "Dark River (1990 film)": "Dark River is a 1990 drama film directed by Mary Smith. "
    "It was shot in Wales.",
    "Emain Macha": "Emain Macha was the royal seat of Conchobar mac Nessa in County Armagh.",
    "The Trespasser": "The Trespasser is a short film by Clio Barnard about Dark River.",
    "Conchobar mac Nessa": "Conchobar mac Nessa was a legendary king of Ulster who ruled "
    "from Emain Macha. His stepfather Fergus mac Róich was king before him.",
    "Dark River (2017 film)": "Dark River is a 2017 British drama film directed by "
    "Clio Barnard, starring Ruth Wilson.",
    "Clio Barnard": "Clio Barnard is a British film director. She directed Dark River in 2017.",
}
SAGA_QUERIES = ("Who ruled from Emain Macha?", "Who directed Dark River?", "king of Ulster")
SPACY = IndexSettings(extractor="spacy", embedder="keyword")
SPACY_NAMESPACES = ("mentions:spacy", EMBEDDINGS)


def saga(titles):
    return [Document(SAGA[t], t) for t in titles]


@pytest.mark.model
def test_an_index_built_in_two_halves_equals_one_built_at_once(index_location, same_index):
    titles = list(SAGA)
    index_documents(index_location("halves"), saga(titles[:4]), SPACY)
    index_documents(index_location("halves"), saga(titles[4:]), SPACY)
    index_documents(index_location("once"), saga(titles), SPACY)
    same_index(
        index_location("halves"),
        index_location("once"),
        KeywordEmbedder(),
        SAGA_QUERIES,
        SPACY_NAMESPACES,
    )


@pytest.mark.model
def test_the_cli_deletes_exactly_and_refuses_unknown_ids(
    index_location, same_index, tmp_path, capsys
):
    def index(location, titles):
        corpus = tmp_path / f"{len(titles)}.json"
        corpus.write_text(json.dumps([{"title": t, "text": SAGA[t]} for t in titles]))
        flags = ["--extractor", "spacy", "--embedder", "keyword"]
        assert main(["index", str(corpus), "--out", location, *flags]) == 0

    gone = "Conchobar mac Nessa"
    index(index_location("full"), list(SAGA))
    index(index_location("without"), [t for t in SAGA if t != gone])
    index(index_location("copy"), list(SAGA))
    capsys.readouterr()
    assert main(["delete", index_location("copy"), "doc-nope"]) == 2
    assert "no such document(s) in the index: doc-nope" in capsys.readouterr().err
    same_index(
        index_location("copy"),
        index_location("full"),
        KeywordEmbedder(),
        SAGA_QUERIES,
        SPACY_NAMESPACES,
    )
    assert main(["delete", index_location("full"), Document(SAGA[gone], gone).id]) == 0
    same_index(
        index_location("full"),
        index_location("without"),
        KeywordEmbedder(),
        SAGA_QUERIES,
        SPACY_NAMESPACES,
    )


@pytest.mark.model
def test_the_engine_delete_relinks_the_rest_without_the_model(index_location, same_index):
    titles = list(SAGA)
    index_documents(index_location("full"), saga(titles), SPACY)
    delete_documents(index_location("full"), [Document(SAGA[titles[-1]], titles[-1]).id])
    index_documents(index_location("without"), saga(titles[:-1]), SPACY)
    same_index(
        index_location("full"),
        index_location("without"),
        KeywordEmbedder(),
        SAGA_QUERIES,
        SPACY_NAMESPACES,
    )


def test_a_document_that_failed_to_index_can_be_deleted(index_location, same_index):
    failing = TitleLinkExtractor(CORPUS, fail_on={"London"})
    build_index(
        documents(),
        index_location("idx"),
        chunker=PassageChunker(),
        extractor=failing,
        embedder=KeywordEmbedder(),
    )
    delete(index_location("idx"), ["London"])
    build(index_location("clean"), documents(["London"]))
    same_index(
        index_location("idx"), index_location("clean"), KeywordEmbedder(), QUERIES, NAMESPACES
    )


def test_the_cli_delete_without_a_model(index_location, same_index, tmp_path, capsys):
    """``quillian delete`` on an index of the fake extractor: the stored extractions
    are all it needs."""

    def build_for_cli(location, docs):
        build_index(
            docs,
            location,
            chunker=PassageChunker(),
            extractor=TitleLinkExtractor(CORPUS),
            embedder=KeywordEmbedder(),
            config={"embedder_name": "keyword"},
        )

    build_for_cli(index_location("idx"), documents())
    build_for_cli(index_location("without"), documents(["London"]))
    capsys.readouterr()
    assert main(["delete", str(tmp_path / "nowhere"), doc_id("London")]) == 2
    assert "no such index directory" in capsys.readouterr().err
    assert main(["delete", index_location("idx"), doc_id("London"), "doc-nope"]) == 2
    assert "no such document(s) in the index: doc-nope" in capsys.readouterr().err
    assert main(["delete", index_location("idx"), doc_id("London")]) == 0
    assert f"removed 1 documents: {doc_id('London')}" in capsys.readouterr().out
    same_index(
        index_location("idx"), index_location("without"), KeywordEmbedder(), QUERIES, NAMESPACES
    )


def test_a_graph_write_that_fails_fails_the_update_and_a_rerun_equals_a_clean_build(
    index_location, same_index, monkeypatch
):
    """The snapshot is written in a thread of its own (on PostgreSQL while the later
    stages run): its failure fails the update, which leaves the index to be built
    again, and the rerun equals a clean build."""
    from quillian.stores.embedded.graph import CSRGraphStore

    try:
        from quillian.stores.postgres.graph import PgGraphStore
    except ImportError:  # without the server extra: the embedded store only
        PgGraphStore = CSRGraphStore
    first = documents(("London", "Allegra Byron"))
    build(index_location("idx"), first)

    def full(self, snapshot):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        for store in {CSRGraphStore, PgGraphStore}:
            patched.setattr(store, "write_snapshot", full)
        with pytest.raises(OSError, match="No space left"):
            build(index_location("idx"), documents())
    build(index_location("idx"), documents())
    build(index_location("clean"), documents())
    same_index(
        index_location("idx"), index_location("clean"), KeywordEmbedder(), QUERIES, NAMESPACES
    )
