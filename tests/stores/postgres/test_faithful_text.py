"""Any text a JSON string can hold, NUL included, round-trips through a PostgreSQL
workspace exactly: ``quillian index`` stores it, retrieval returns it, and a document
holding NUL no longer fails the build (PostgreSQL's text columns refuse the 0x00 byte;
issue 51). A real server; marked ``postgres``."""

from __future__ import annotations

import itertools
import json
import uuid
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quillian.cli.main import main
from quillian.engine import Engine
from quillian.index import open_storage
from quillian.stores.protocols import DocStatus
from quillian.stores.snapshot import NodeKind
from quillian.testing.postgres import PostgresServer
from quillian.types import Chunk, Document

pytest.importorskip("psycopg")
from quillian.stores.postgres.textcodec import ADAPTERS, MARK

pytestmark = pytest.mark.postgres

#: Characters that are easy to lose: NUL, the codec's marker, separators, controls, a
#: BOM, astral characters.
AWKWARD = [
    *"\x00\x00\u2028\u2029\x85\x0b\x0c\x1c\x1f\r\n\x01\x7f\ufeff\t ",
    MARK,
    "0",
    "\\",
    "😀",
    "\U0010ffff",
]
#: Any text a JSON string can hold but a lone surrogate, rich in the awkward characters.
TEXT = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(AWKWARD)), max_size=30
)
PLAIN = {"title": "Ada Lovelace", "text": "Ada Lovelace wrote the first program."}

_runs = itertools.count()


def _index(run: Path, out: str, corpus: list[dict[str, str]], extractions: list[dict]) -> int:
    (run / "corpus.json").write_text(json.dumps(corpus))
    (run / "ex.jsonl").write_text("\n".join(json.dumps(e) for e in extractions) + "\n")
    argv = ["index", str(run / "corpus.json"), "--out", out, "--embedder", "hash"]
    return main([*argv, "--extractions", str(run / "ex.jsonl")])


def _passage(engine: Engine, marker: str) -> str:
    (found,) = engine.retrieve(marker, method="bm25", k=1).passages
    return found.text


@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=2))
def test_any_text_round_trips_through_a_postgres_index(
    postgres_server: PostgresServer, tmp_path: Path, capsys, texts
):
    """Each document is stored with its title and text exactly (NUL included, which
    stopped the whole build), next to a plain one, and retrieval returns its text."""
    run = tmp_path / f"run{next(_runs)}"
    run.mkdir()
    workspace = f"t_{uuid.uuid4().hex[:12]}"
    location = postgres_server.url(workspace, run / "cache")
    docs = [Document(PLAIN["text"], PLAIN["title"])] + [
        Document(f"{before} qmark{i}q {after}", title)
        for i, (title, before, after) in enumerate(texts)
    ]
    corpus = [{"title": d.title, "text": d.text} for d in docs]
    entities = [{**c, "entities": [c["title"]] if c["title"].strip() else []} for c in corpus]
    try:
        code = _index(run, location, corpus, entities)
        assert code == 0, capsys.readouterr()
        assert f"documents: {len(set(docs))} new, 0 already indexed, 0 failed" in (
            capsys.readouterr().out
        )
        engine = Engine.open(location)
        try:
            for i, doc in enumerate(docs):
                stored = engine.document(doc.id)
                assert stored is not None and stored.info.status == "processed"
                assert (stored.info.title, stored.text) == (doc.title, doc.text)
                if i:
                    assert _passage(engine, f"qmark{i - 1}q") == doc.text.strip()
            assert _passage(engine, "Lovelace") == PLAIN["text"]
        finally:
            engine.close()
    finally:
        postgres_server.execute(f'DROP SCHEMA IF EXISTS "{workspace}" CASCADE')


def test_a_document_holding_nul_is_indexed_with_the_others(
    postgres_url: str, tmp_path: Path, capsys
):
    """A NUL in a document (its text, title and an entity named in it) failed the
    batch's insert and stopped ``quillian index`` with its index incomplete; now every
    document is stored, the NUL one exactly, and its entity is in the graph."""
    nul = {"title": "Null\x00Title", "text": "Grace\x00Hopper wrote a compiler.\x00"}
    corpus = [PLAIN, nul, {"title": "Babbage", "text": "Charles Babbage built engines."}]
    extractions = [
        {**PLAIN, "entities": ["Ada Lovelace"], "triples": []},
        {**nul, "entities": ["Grace\x00Hopper"], "triples": [["Grace\x00Hopper", "wrote", "a"]]},
        {**corpus[2], "entities": ["Charles Babbage"], "triples": []},
    ]
    assert _index(tmp_path, postgres_url, corpus, extractions) == 0, capsys.readouterr()
    assert "documents: 3 new, 0 already indexed, 0 failed" in capsys.readouterr().out
    engine = Engine.open(postgres_url)
    try:
        for doc in corpus:
            stored = engine.document(Document(doc["text"], doc["title"]).id)
            assert stored is not None and stored.info.status == "processed"
            assert (stored.info.title, stored.text) == (doc["title"], doc["text"])
        assert _passage(engine, "compiler") == nul["text"].strip()
        names = {e.name for e in engine.index.context.kg.entities}
        assert {"Grace\x00Hopper", "Ada Lovelace", "Charles Babbage"} <= names
        relations = {(r.subject, r.predicate, r.object) for r in engine.index.context.kg.relations}
        assert ("Grace\x00Hopper", "wrote", "a") in relations
    finally:
        engine.close()


ODD = ["a\x00b", "\x00", MARK, MARK + "0", MARK + "\x00", "x" + MARK + "E", "\\N", "tab\there"]


def test_every_store_keeps_nul_and_the_marker(postgres_url: str) -> None:
    """Documents, chunks, statuses, key-value keys, graph node ids and workspace
    metadata each hold text with NUL and the codec's marker, and give it back."""
    docs = [Document(text=t, title=t, source=t, metadata={"m": t}) for t in ODD]
    with open_storage(postgres_url, create=True) as storage:
        storage.documents.put_documents(docs)
        chunks = [Chunk(d.id, 0, d.text, 0, len(d.text), d.title) for d in docs]
        storage.documents.put_chunks(chunks)
        assert storage.documents.get_documents([d.id for d in docs]) == docs
        assert [d.metadata for d in storage.documents.get_documents([d.id for d in docs])] == [
            d.metadata for d in docs
        ]
        assert storage.documents.get_chunks([c.id for c in chunks]) == chunks
        assert sorted(storage.documents.iter_chunks(), key=lambda c: c.id) == sorted(
            chunks, key=lambda c: c.id
        )
        assert storage.documents.chunks_of(docs[0].id) == [chunks[0]]
        storage.status.set_status(ODD, DocStatus.FAILED, error="bad\x00 " + MARK, source="s\x00")
        records = storage.status.get_status(ODD)
        assert sorted(records) == sorted(ODD)
        assert {(r.error, r.source) for r in records.values()} == {("bad\x00 " + MARK, "s\x00")}
        assert sorted(r.doc_id for r in storage.status.with_status(DocStatus.FAILED)) == sorted(ODD)
        storage.kv.put_many("ns\x00", {k: k.encode() for k in ODD})
        assert storage.kv.get_many("ns\x00", ODD) == [k.encode() for k in ODD]
        assert sorted(storage.kv.keys("ns\x00")) == sorted(ODD)
        storage.kv.delete_many("ns\x00", ODD[:2])
        assert storage.kv.get_many("ns\x00", ODD[:3]) == [None, None, ODD[2].encode()]
        graph = storage.graph()
        nodes = [f"{o}." for o in ODD]  # the snapshot's id map drops a trailing NUL
        graph.add_nodes(nodes, NodeKind.ENTITY)
        graph.add_nodes(nodes[:2], NodeKind.ENTITY)  # known ids are recognised
        graph.add_edges(nodes[:1], nodes[1:2], 0)
        snapshot = graph.snapshot()
        assert sorted(snapshot.ids.ids_of(range(snapshot.n_nodes))) == sorted(nodes)
        assert snapshot.n_edges == 1
        storage.workspace.set_meta("odd\x00", MARK + "\x00")
        assert storage.workspace.meta("odd\x00") == MARK + "\x00"


def test_text_without_nul_is_stored_as_it_was(
    postgres_url: str, postgres_server: PostgresServer
) -> None:
    """Plain text is stored unchanged, as SQL sees it, and a row written before the
    escape existed reads as it was written."""
    plain = Document(text="Ada \u2028 Lovelace\t😀", title="Ada", metadata={"k": "v"})
    nul = Document(text="Ada\x00", title="Nul")
    with open_storage(postgres_url, create=True) as storage:
        storage.documents.put_documents([plain, nul])
        schema = storage.workspace.schema
        rows = postgres_server.execute(
            f'SELECT id, title, text, metadata FROM "{schema}".documents ORDER BY title'
        )
        assert rows[0] == (plain.id, "Ada", plain.text, '{"k": "v"}')
        assert rows[1][2] != nul.text and "\x00" not in rows[1][2]
        postgres_server.execute(
            f'INSERT INTO "{schema}".documents VALUES (%s, %s, %s, %s, %s)',
            ("old", "Old", "written by hand", "", "{}"),
        )
        assert storage.documents.get_documents(["old"]) == [
            Document(text="written by hand", title="Old")
        ]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_the_codec_reads_both_formats_and_both_types(
    postgres_server: PostgresServer, binary: bool
) -> None:
    """Values sent and read back through the workspace's adapters, in psycopg's text
    and binary formats, as ``text`` and as ``varchar``: NUL and the marker come back,
    plain text comes back as it is, and SQL NULL stays None."""
    import psycopg

    values = [*ODD, "plain", ""]
    with psycopg.connect(postgres_server.uri, context=ADAPTERS) as conn:
        cursor = conn.cursor(binary=binary)
        for cast in ("text", "varchar"):
            for value in values:
                row = cursor.execute(f"SELECT %s::{cast}, NULL::{cast}", (value,)).fetchone()
                assert row == (value, None)


def test_a_sql_ascii_database_reads_text_as_bytes(postgres_server: PostgresServer) -> None:
    """In a database whose encoding is SQL_ASCII, psycopg gives text as bytes, and the
    codec leaves them as they are (decoding only ever applies to a str)."""
    import psycopg

    name = f"ascii_{uuid.uuid4().hex[:8]}"
    postgres_server.execute(
        f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'"
        " TEMPLATE template0"
    )
    try:
        url = postgres_server.uri.replace("/postgres?", f"/{name}?", 1)
        with psycopg.connect(url, context=ADAPTERS) as conn:
            assert conn.execute("SELECT 'caf' || 'e'::text").fetchone() == (b"cafe",)
    finally:
        postgres_server.execute(f"DROP DATABASE {name}")


def test_long_texts_written_as_their_zlib_stream_read_back(postgres_url: str) -> None:
    """From ``d35b690`` until its fix, a long document's or chunk's text went to
    PostgreSQL as its zlib stream (SQLite's compressed form), which the text column
    kept as the stream's hex: such rows read back as the texts they hold, a text
    written now is stored as it is, and one that only looks like such a row reads as
    it is."""
    from quillian.stores.postgres import PgDocumentStore

    text = "Quillian invented semantic networks in 1966. " * 40 + "Ünïcode ✓."
    doc = Document(text=text, title="T")
    chunk = Chunk(doc_id=doc.id, index=0, text=text, start=0, end=len(text), title="T")
    stream = zlib.compress(text.encode(), 6)
    looks_so = Document(text="\\x789c is how a zlib stream's hex begins", title="Odd")
    with PgDocumentStore(postgres_url) as store:
        with store._conn("write as d35b690 did") as conn:
            conn.execute(
                "INSERT INTO documents (id, title, text, source, metadata)"
                " VALUES (%s, 'T', %s, '', '{}')",
                (doc.id, stream),
            )
            conn.execute(
                "INSERT INTO chunks (id, doc_id, idx, text, char_start, char_end, title)"
                " VALUES (%s, %s, 0, %s, 0, %s, 'T')",
                (chunk.id, doc.id, stream, len(text)),
            )
            (stored,) = conn.execute("SELECT text FROM chunks").fetchone()
        assert stored.startswith("\\x789c")  # as those versions left it
        assert store.get_documents([doc.id]) == [doc]
        assert store.get_chunks([chunk.id]) == [chunk] == store.chunks_of(doc.id)
        assert list(store.iter_chunks()) == [chunk]
        store.put_documents([doc, looks_so])
        store.put_chunks([chunk])
        with store._conn("read back") as conn:
            texts = {r[0] for r in conn.execute("SELECT text FROM documents")}
            assert texts == {text, looks_so.text}
            assert conn.execute("SELECT text FROM chunks").fetchone() == (text,)
        assert store.get_documents([looks_so.id]) == [looks_so]


def test_a_long_passage_is_indexed_and_retrieved_as_it_is(
    postgres_url: str, tmp_path: Path, capsys
) -> None:
    """A passage long enough for the embedded store to compress is stored, chunked,
    extracted and retrieved as its text on PostgreSQL (from ``d35b690`` until its fix,
    the workspace kept such texts as the hex of their zlib stream and indexed that)."""
    text = (
        "Ada Lovelace wrote the first program for the Analytical Engine. "
        + "Charles Babbage designed the engine and corresponded with her at length. " * 8
        + "The quillmark note ends here."
    )
    long = {"title": "Ada Lovelace", "text": text}
    corpus = [long, {"title": "Babbage", "text": "Charles Babbage built engines."}]
    extractions = [
        {**long, "entities": ["Ada Lovelace", "Analytical Engine"], "triples": []},
        {**corpus[1], "entities": ["Charles Babbage"], "triples": []},
    ]
    assert len(text.encode()) > 256
    assert _index(tmp_path, postgres_url, corpus, extractions) == 0, capsys.readouterr()
    engine = Engine.open(postgres_url)
    try:
        stored = engine.document(Document(text, long["title"]).id)
        assert stored is not None and stored.text == text
        assert _passage(engine, "quillmark") == text
        names = {e.name for e in engine.index.context.kg.entities}
        assert {"Ada Lovelace", "Analytical Engine", "Charles Babbage"} <= names
    finally:
        engine.close()
