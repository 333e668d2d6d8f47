"""The build as stages: the graph goes through the graph store, methods add stages, and
server locations are refused clearly."""

import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass

import numpy as np
import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.graph.builder import GraphBuilder
from quillian.components.retrieval.context import endpoint_text
from quillian.engine import IndexSettings, delete_documents, index_documents, stages_for
from quillian.errors import StoreError
from quillian.index import (
    DEFAULT_STAGES,
    BuildState,
    build_index,
    open_index,
    open_storage,
    read_manifest,
)
from quillian.stores.embedded._sqlite import SqliteStore
from quillian.testing.corpus import LOVELACE, build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Chunk, Document

ARRAYS = ("kinds", "indptr", "indices", "weights", "edge_kinds", "edge_relations")


def _extractions():
    chunks = [
        Chunk(doc_id=f"d{i}", index=0, text=text, start=0, end=len(text), title=title)
        for i, (title, text) in enumerate(LOVELACE.items())
    ]
    return chunks, TitleLinkExtractor(list(LOVELACE)).extract(chunks)


def test_the_graph_store_snapshot_equals_the_in_memory_one(tmp_path):
    chunks, extractions = _extractions()
    in_memory = GraphBuilder()
    in_memory.add_all(extractions)
    expected = in_memory.build([c.id for c in chunks]).snapshot
    stored = GraphBuilder()
    stored.add_all(extractions)
    with open_storage(tmp_path, create=True) as storage:
        store = storage.graph(fresh=True)
        got = stored.build([c.id for c in chunks], store=store).snapshot
        store.close()
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), name)
    assert got.ids.ids_of(range(got.n_nodes)) == expected.ids.ids_of(range(expected.n_nodes))


@dataclass
class CountChunks:
    """A method's own stage: here it records how many chunks it saw."""

    name: str = "count"
    seen: int = -1

    def run(self, state: BuildState) -> None:
        assert state.kg is not None  # the default stages ran first
        self.seen = len(state.chunks)
        state.counts["counted"] = self.seen


def test_a_method_stage_runs_after_the_defaults_and_is_reported(tmp_path):
    stage = CountChunks()
    report = build_index(
        [Document(text, title) for title, text in LOVELACE.items()],
        tmp_path / "idx",
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(list(LOVELACE)),
        embedder=KeywordEmbedder(),
        stages=(*DEFAULT_STAGES, stage),
    )
    assert stage.seen == 4 and report.counts["counted"] == 4
    assert set(report.seconds) == {
        "ingest_extract",
        "graph",
        "embed",
        "bm25",
        "count",
    }


def test_endpoint_texts_are_an_option_embedded_after_the_chunks(tmp_path):
    embedder = KeywordEmbedder()
    stages = stages_for((), endpoint_texts=True)
    assert [s.name for s in stages] == ["graph", "embed", "endpoint_texts", "bm25"]
    assert [s.name for s in stages_for(())] == ["graph", "embed", "bm25"]
    build_index(
        [Document(text, title) for title, text in LOVELACE.items()],
        tmp_path / "idx",
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(list(LOVELACE)),
        embedder=embedder,
        stages=stages,
    )
    ctx = open_index(tmp_path / "idx", embedder).context
    assert ctx.endpoint_vectors is not None and len(ctx.endpoint_vectors) == len(ctx.kg.relations)
    expected = embedder.embed([endpoint_text(r) for r in ctx.kg.relations])
    stored = ctx.endpoint_vectors.get(np.arange(len(expected)))
    np.testing.assert_allclose(stored, expected, atol=1e-6)
    q = embedder.embed(["Ada Lovelace"])[0]
    assert len(ctx.top_relations(q, 2, "endpoints")) == 2
    # an index built without the stage opens, and seeds no triples on endpoint texts
    shutil.rmtree(tmp_path / "idx" / "vectors" / "endpoints")
    old = open_index(tmp_path / "idx", embedder).context
    assert old.endpoint_vectors is None
    assert old.top_relations(q, 2, "endpoints") == []
    assert len(old.top_relations(q, 2, "sentence")) == 2


def test_an_index_keeps_its_endpoint_texts_until_told_otherwise(tmp_path):
    docs = [Document(text, title) for title, text in LOVELACE.items()]
    out = tmp_path / "idx"
    on = IndexSettings(embedder="keyword", endpoint_texts=True)
    assert "endpoint_texts" in index_documents(out, docs, on).seconds
    # rerun without the flag: nothing new, the same stages, nothing rebuilt
    again = index_documents(out, docs, IndexSettings(embedder="keyword"))
    assert again.reused and read_manifest(out)["stages"][2] == "endpoint_texts"
    # a new document rebuilds with the index's own stages
    more = [Document("Charles Babbage designed the Analytical Engine.", "Babbage")]
    assert "endpoint_texts" in index_documents(out, more, IndexSettings(embedder="keyword")).seconds
    assert open_index(out, KeywordEmbedder()).context.endpoint_vectors is not None
    # turned off: the stage goes, and the vectors left on disk are not read
    off = index_documents(out, [], IndexSettings(embedder="keyword", endpoint_texts=False))
    assert "endpoint_texts" not in off.seconds
    assert "endpoint_texts" not in read_manifest(out)["stages"]
    assert open_index(out, KeywordEmbedder()).context.endpoint_vectors is None
    # a delete rebuilds with the index's own choice
    index_documents(out, [], IndexSettings(embedder="keyword", endpoint_texts=True))
    assert "endpoint_texts" in delete_documents(out, [more[0].id]).seconds
    assert open_index(out, KeywordEmbedder()).context.endpoint_vectors is not None


def test_an_unreachable_server_location_is_refused_clearly(tmp_path):
    # the PostgreSQL backend itself is tested against a real server in tests/stores/postgres;
    # a deadline of 1 s, not the default 30 s of retries (the same error, sooner)
    with pytest.raises(StoreError, match="unreachable"):
        open_storage("postgresql://quillian@127.0.0.1:1/kg?workspace=a&deadline=1")


def test_a_build_with_nothing_new_and_the_same_stages_runs_none(tmp_path):
    docs = [Document(text, title) for title, text in LOVELACE.items()]

    def build(stage: CountChunks, documents=docs, stages=None):
        return build_index(
            documents,
            tmp_path / "idx",
            chunker=PassageChunker(),
            extractor=TitleLinkExtractor(list(LOVELACE)),
            embedder=KeywordEmbedder(),
            stages=stages or (*DEFAULT_STAGES, stage),
        )

    first = build(CountChunks())
    again = CountChunks()
    report = build(again)
    # the index on disk is complete and the settings are the same: no stage runs, and
    # the report and manifest keep the complete build's counts
    assert report.reused and again.seen == -1
    assert report.counts == first.counts and set(report.seconds) == {"ingest_extract"}
    assert read_manifest(tmp_path / "idx")["state"] == "complete"
    # other stages, or a new document, rebuild
    other = CountChunks(name="other")
    assert not build(other).reused and other.seen == 4
    more = CountChunks(name="other")
    extra = Document("Ada Byron was her name at birth.", "Ada Byron")
    assert not build(more, [*docs, extra]).reused and more.seen == 5


def test_a_first_build_packs_the_store_and_an_update_does_not(tmp_path, monkeypatch):
    """A build that wrote every chunk leaves the store's pages full (a ``VACUUM`` of a
    copy takes no page off); one that adds a document does not rewrite the store."""
    packed = []
    pack = SqliteStore.pack
    monkeypatch.setattr(SqliteStore, "pack", lambda self: (packed.append(1), pack(self)))
    titles = list(LOVELACE)
    build_tiny(tmp_path / "idx", LOVELACE, titles=titles[:-1])
    assert packed == [1]
    copy = tmp_path / "copy.sqlite"
    with closing(sqlite3.connect(tmp_path / "idx" / "store.sqlite")) as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"VACUUM INTO '{copy}'")
    with closing(sqlite3.connect(copy)) as conn:
        assert conn.execute("PRAGMA page_count").fetchone() == pages
    build_tiny(tmp_path / "idx", LOVELACE)
    assert packed == [1]


def test_a_build_gives_back_the_space_its_emptied_caches_held(tmp_path):
    """The embedding cache is emptied once the vectors are in their collections, and
    the pages it held go back to the file system, not to the database's free list."""
    build_tiny(tmp_path / "idx", LOVELACE)
    db = tmp_path / "idx" / "store.sqlite"
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # incremental
        assert conn.execute(
            "SELECT count(*) FROM kv WHERE namespace = 'embeddings'"
        ).fetchone() == (0,)
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)


def test_writes_left_on_their_way_are_waited_for_and_their_errors_raised():
    """``run_stages`` waits for every write a stage left pending, counts the wait in
    that stage's seconds and raises the first write's error; a stage's own error goes
    first, the writes still waited for."""
    import threading
    import time
    from concurrent.futures import Future

    from quillian.index.stages import run_stages

    def later(error=None, seconds=0.05):
        future = Future()

        def finish():
            time.sleep(seconds)
            future.set_exception(error) if error else future.set_result(None)

        threading.Thread(target=finish).start()
        return future

    @dataclass
    class Leaves:
        name: str
        error: BaseException | None = None
        raises: BaseException | None = None

        def run(self, state):
            state.pending.append((self.name, later(self.error)))
            if self.raises is not None:
                raise self.raises

    @dataclass
    class State:
        pending: list

    state = State([])
    seconds = run_stages(state, [Leaves("graph"), Leaves("embed")])
    assert state.pending == [] and seconds["graph"] >= 0.04  # the two waited for at once
    with pytest.raises(OSError, match="disk full"):
        run_stages(state, [Leaves("graph", OSError("disk full")), Leaves("embed")])
    assert state.pending == []
    failing = [Leaves("graph", OSError("disk full")), Leaves("embed", raises=ValueError("stage"))]
    with pytest.raises(ValueError, match="stage"):
        run_stages(state, failing)
    assert state.pending == []  # waited for and cleared though a stage raised
