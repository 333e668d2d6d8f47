"""The engine: the one seam the edges use. Retrieval and answering over a four-document
index with a scripted model, concurrency, the method table, exact deletion."""

import asyncio
import json
import threading
import time
from dataclasses import replace

import pytest

from quillian.components.factories import make_retriever
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.engine import Engine, IndexSettings, delete_documents, index_documents
from quillian.errors import ConfigError, InputError
from quillian.methods.steps import Note, Retrieval
from quillian.methods.table import METHODS
from quillian.testing.corpus import tiny_index
from quillian.testing.tables import table_rows
from quillian.types import Document

QUESTION = "Where was the collaborator of Ada Lovelace born?"


@pytest.fixture(scope="module")
def location(tmp_path_factory):
    path = tmp_path_factory.mktemp("idx")
    tiny_index(path)
    return path


def model(latency=0.0):
    def answer(messages):
        return "London" if "born in London" in messages[-1].content else "unknown"

    return ScriptedChatModel(
        {
            "kg-infused.passage-note": "Babbage, her collaborator, was born in London.",
            "kg-infused.answer": answer,
        },
        latency=latency,
    )


def test_retrieve_is_the_component_retriever(location):
    engine = Engine.open(location, embedder="keyword")
    result = engine.retrieve("Where was Charles Babbage born?", "dense", k=2)
    direct = make_retriever(engine.index.context, "dense").retrieve(
        "Where was Charles Babbage born?", 2
    )
    assert [p.chunk_id for p in result.passages] == [p.chunk_id for p in direct.passages]
    with pytest.raises(ConfigError, match="unknown retriever 'nope'"):
        engine.retrieve("q", "nope")
    with pytest.raises(ConfigError, match="the question is empty"):
        engine.retrieve("  ")


def test_answer_records_typed_steps(location):
    async def go():
        async with Engine.open(location, llm=model(), embedder="keyword") as engine:
            return await engine.answer(QUESTION, "vanilla-rag", k=3)

    result = asyncio.run(go())
    assert result.answer == "London"
    retrieval, note = result.steps
    assert isinstance(retrieval, Retrieval) and retrieval.retriever == "dense"
    assert isinstance(note, Note)
    assert result.as_dict()["steps"][0] == {
        "kind": "retrieval",
        "query": QUESTION,
        "retriever": "dense",
        "chunks": retrieval.chunks,
    }
    json.dumps(result.as_dict())  # serialisable as bench qa writes it


def test_two_questions_at_once_overlap(location):
    """Each question makes two model calls of 0.3 s: one after the other they take
    1.2 s; on one engine at once, about 0.6 s."""
    scripted = model(latency=0.3)

    async def go():
        async with Engine.open(location, llm=scripted, embedder="keyword") as engine:
            assert engine.index.context  # opened before timing
            start = time.perf_counter()
            results = await asyncio.gather(
                engine.answer(QUESTION, "vanilla-rag", k=3),
                engine.answer("Who worked with Charles Babbage?", "vanilla-rag", k=3),
            )
            return results, time.perf_counter() - start

    (first, second), seconds = asyncio.run(go())
    assert first.answer == "London" and not second.error
    assert len(scripted.calls) == 4
    assert seconds < 0.9, seconds


def test_retrieval_runs_off_the_event_loop(location):
    threads: list[str] = []

    async def go():
        async with Engine.open(location, llm=model(), embedder="keyword") as engine:
            retriever = engine.retriever("dense")
            inner = retriever.retrieve

            def spy(*args, **kwargs):
                threads.append(threading.current_thread().name)
                return inner(*args, **kwargs)

            retriever.retrieve = spy  # type: ignore[method-assign]
            await engine.answer(QUESTION, "vanilla-rag", k=3)
            await engine.aretrieve(QUESTION, "dense", 2)

    asyncio.run(go())
    assert len(threads) == 2
    assert all(name.startswith("quillian-cpu") for name in threads), threads


def test_empty_question_and_bad_options_fail_before_the_model(location):
    scripted = model()

    async def go(question, method="vanilla-rag", **options):
        async with Engine.open(location, llm=scripted, embedder="keyword") as engine:
            return await engine.answer(question, method, **options)

    with pytest.raises(ConfigError, match="the question is empty"):
        asyncio.run(go(" \n"))
    with pytest.raises(ConfigError, match=r"unknown option\(s\) kk; options are k, note"):
        asyncio.run(go(QUESTION, kk=3))
    with pytest.raises(ConfigError, match="needs a knowledge graph"):
        asyncio.run(go(QUESTION, "kg-infused-rag"))
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        asyncio.run(go(QUESTION, "nope"))
    assert scripted.calls == []


def test_answering_needs_a_model(location):
    async def go():
        async with Engine.open(location, embedder="keyword") as engine:
            return await engine.answer(QUESTION, "vanilla-rag")

    with pytest.raises(ConfigError, match="needs a model"):
        asyncio.run(go())


def test_every_method_in_the_table_declares_its_needs():
    for spec in METHODS.values():
        assert spec.summary and spec.cls.name == spec.name
        for option in spec.options:
            assert option.help, f"{spec.name}.{option.name} has no help text"
    assert METHODS["kg-infused-rag"].needs_graph and METHODS["kg-infused-rag"].aliases


CORPUS = [
    Document("Ada Lovelace worked with Charles Babbage.", "Ada Lovelace"),
    Document("Charles Babbage was born in London.", "Charles Babbage"),
    Document("London is the capital of England.", "London"),
]
EXTRACTIONS = [
    {
        "title": "Ada Lovelace",
        "text": CORPUS[0].text,
        "entities": ["Ada Lovelace", "Charles Babbage"],
        "triples": [["Ada Lovelace", "worked with", "Charles Babbage"]],
    },
    {
        "title": "Charles Babbage",
        "text": CORPUS[1].text,
        "entities": ["Charles Babbage", "London"],
        "triples": [["Charles Babbage", "born in", "London"]],
    },
    {
        "title": "London",
        "text": CORPUS[2].text,
        "entities": ["London", "England"],
        "triples": [["London", "capital of", "England"]],
    },
]


def _tables(path):
    """The graph tables' rows by position, each text once."""
    return table_rows(path)


def test_delete_leaves_the_index_built_without_the_document(tmp_path):
    extractions = tmp_path / "ex.jsonl"
    extractions.write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    settings = IndexSettings(extractor="precomputed", extractions=extractions, embedder="hash")
    index_documents(tmp_path / "all", CORPUS, settings)
    index_documents(tmp_path / "without", [CORPUS[0], CORPUS[2]], settings)
    report = delete_documents(tmp_path / "all", [CORPUS[1].id])
    assert report.deleted == [CORPUS[1].id] and report.counts["documents"] == 2
    assert _tables(tmp_path / "all") == _tables(tmp_path / "without")
    engine = Engine.open(tmp_path / "all")
    assert len(engine.index.context.chunk_texts) == 2
    with pytest.raises(InputError, match="no such document"):
        delete_documents(tmp_path / "all", ["doc-unknown"])
    assert Engine.open(tmp_path / "all").index.manifest["state"] == "complete"


def test_an_empty_corpus_is_refused(tmp_path):
    with pytest.raises(InputError, match="no documents"):
        index_documents(tmp_path / "idx", [], IndexSettings(embedder="hash"))
    assert not (tmp_path / "idx").exists()


def test_a_method_declares_its_own_build_stages(tmp_path, monkeypatch):
    """A method's stages run after the defaults when an index is built for it, and the
    manifest remembers them, so a later rebuild (a deletion) runs them again."""
    from quillian.methods.baselines.pipelines import VanillaRAG
    from quillian.methods.spec import MethodSpec
    from quillian.methods.table import METHODS

    seen: list[int] = []

    class CountChunks:
        name = "count-chunks"

        def run(self, state):
            seen.append(len(state.chunks))

    spec = MethodSpec("counting", VanillaRAG, "test", "dense", index_stages=(CountChunks(),))
    monkeypatch.setitem(METHODS, "counting", spec)
    extractions = tmp_path / "ex.jsonl"
    extractions.write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    settings = IndexSettings(
        extractor="precomputed", extractions=extractions, embedder="hash", methods=("counting",)
    )
    report = index_documents(tmp_path / "idx", CORPUS, settings)
    assert seen == [3] and "count-chunks" in report.seconds
    delete_documents(tmp_path / "idx", [CORPUS[0].id])
    assert seen == [3, 2]


def test_the_engine_adds_and_deletes_documents_and_sees_the_change(tmp_path):
    extractions = tmp_path / "ex.jsonl"
    extractions.write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    settings = IndexSettings(extractor="precomputed", extractions=extractions, embedder="hash")
    index_documents(tmp_path / "idx", CORPUS[:2], settings)
    engine = Engine.open(tmp_path / "idx")

    def matching() -> list[str]:  # bm25 fills k with the index's other passages, at 0
        return [p.title for p in engine.retrieve("London", "bm25", 8).passages if p.score > 0]

    assert len(matching()) == 1 and len(engine.retrieve("London", "bm25", 8).passages) == 2
    loaded = engine.index.context.embedder
    engine.add_documents([CORPUS[2]], settings)
    assert len(matching()) == 2
    # the newer build is opened with the embedder already loaded, not a fresh model
    assert engine.index.context.embedder is loaded
    engine.delete_documents([CORPUS[1].id])
    assert matching() == ["London"]


def test_an_index_keeps_its_embedder_unless_told(tmp_path):
    """A new index gets the default embedder; an update without --embedder keeps the
    index's own; an index from before the name was recorded was built with ``minilm``."""
    from quillian.components.embedding.factory import (
        DEFAULT_EMBEDDER,
        embedder_name,
        make_embedder,
    )

    assert embedder_name(None) == DEFAULT_EMBEDDER == "minilm-int8"
    assert embedder_name({"embedder": "sentence-transformers/all-MiniLM-L6-v2:norm"}) == "minilm"
    assert embedder_name({}) == "minilm"  # before the model id was recorded too
    # an index built with an embedder object records its model id, not a name
    for name in ("hash", "keyword", "minilm-int8"):
        assert embedder_name({"embedder": make_embedder(name).model_id}) == name
    extractions = tmp_path / "ex.jsonl"
    extractions.write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    built = IndexSettings(extractor="precomputed", extractions=extractions, embedder="keyword")
    index_documents(tmp_path / "idx", CORPUS[:2], built)
    index_documents(
        tmp_path / "idx", CORPUS, IndexSettings(extractor="precomputed", extractions=extractions)
    )
    engine = Engine.open(tmp_path / "idx")
    assert engine.index.manifest["config"]["embedder_name"] == "keyword"
    assert engine.embedder().model_id == engine.index.context.embedder.model_id
    with pytest.raises(ConfigError, match="was built with embedding model"):
        index_documents(
            tmp_path / "idx",
            CORPUS,
            IndexSettings(extractor="precomputed", extractions=extractions, embedder="hash"),
        )


def _stored_dtypes(location):
    return {
        p.parent.name: json.loads(p.read_text())["dtype"]
        for p in (location / "vectors").glob("*/index.json")
    }


def test_an_index_keeps_its_vector_dtype_unless_made_anew(tmp_path):
    """A new folder index stores int8 vectors; ``vector_dtype`` picks float16 or
    float32; an update keeps the index's own, and asking for another is refused before
    anything is written; an index from before the dtype was recorded holds float32 and
    keeps it."""
    from quillian.index.layout import read_manifest, write_manifest
    from quillian.index.storage import DEFAULT_VECTOR_DTYPE, check_vector_dtype, vector_dtype

    extractions = tmp_path / "ex.jsonl"
    extractions.write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    built = IndexSettings(extractor="precomputed", extractions=extractions, embedder="hash")
    index_documents(tmp_path / "i8", CORPUS[:2], built)
    assert _stored_dtypes(tmp_path / "i8") == {"chunks": "int8", "texts": "int8"}
    built = replace(built, vector_dtype="float16")
    index_documents(tmp_path / "new", CORPUS[:2], built)
    assert _stored_dtypes(tmp_path / "new") == {"chunks": "float16", "texts": "float16"}
    index_documents(tmp_path / "new", CORPUS, replace(built, vector_dtype=None))  # kept
    assert _stored_dtypes(tmp_path / "new") == {"chunks": "float16", "texts": "float16"}
    before = (tmp_path / "new" / "manifest.json").read_text()
    with pytest.raises(ConfigError, match="was built with vector dtype 'float16', not 'float32'"):
        index_documents(tmp_path / "new", CORPUS, replace(built, vector_dtype="float32"))
    assert (tmp_path / "new" / "manifest.json").read_text() == before
    # float16 ranks like float32 here: the same passages, scores within float16's rounding
    index_documents(tmp_path / "f32", CORPUS, replace(built, vector_dtype="float32"))
    assert _stored_dtypes(tmp_path / "f32") == {"chunks": "float32", "texts": "float32"}
    halves, wholes = (
        Engine.open(tmp_path / name).retrieve("Who founded London?", "dense", 3).passages
        for name in ("new", "f32")
    )
    assert [p.chunk_id for p in halves] == [p.chunk_id for p in wholes]
    assert [p.score for p in halves] == pytest.approx([p.score for p in wholes], abs=2e-3)
    # an index made before the dtype was recorded: float32, kept by an update
    index_documents(tmp_path / "old", CORPUS[:2], replace(built, vector_dtype="float32"))
    manifest = read_manifest(tmp_path / "old")
    del manifest["config"]["vector_dtype"]
    write_manifest(tmp_path / "old", manifest)
    index_documents(tmp_path / "old", CORPUS, replace(built, vector_dtype=None))
    assert _stored_dtypes(tmp_path / "old") == {"chunks": "float32", "texts": "float32"}
    assert read_manifest(tmp_path / "old")["config"]["vector_dtype"] == "float32"
    with pytest.raises(ConfigError, match="vector dtype must be one of"):
        vector_dtype("bfloat16", None)
    # int8: each vector its codes and scale, the same passages here
    index_documents(tmp_path / "i8", CORPUS, replace(built, vector_dtype=None))  # kept
    assert _stored_dtypes(tmp_path / "i8") == {"chunks": "int8", "texts": "int8"}
    quarters = Engine.open(tmp_path / "i8").retrieve("Who founded London?", "dense", 3).passages
    assert [p.chunk_id for p in quarters] == [p.chunk_id for p in wholes]
    assert [p.score for p in quarters] == pytest.approx([p.score for p in wholes], abs=2e-2)
    # a folder's default and a workspace's, which has no int8 (refused before connecting)
    assert vector_dtype(None, None) == vector_dtype(None, None, tmp_path) == "int8"
    assert DEFAULT_VECTOR_DTYPE == "int8"
    assert vector_dtype(None, None, "postgresql://127.0.0.1:9/x") == "float16"
    with pytest.raises(ConfigError, match="no int8 type"):
        check_vector_dtype("postgresql://127.0.0.1:9/x", "int8")
    check_vector_dtype(tmp_path / "i8", "int8")
    assert vector_dtype(None, {}) == "float32"  # an index made before the setting
    assert vector_dtype("float32", None) == "float32"
    assert vector_dtype(None, {"vector_dtype": "float16"}) == "float16"
