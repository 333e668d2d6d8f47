"""The graph tables database: what it stores reads back equal to the graph built in
memory, each text once, a row at a time from any thread; and an index of the JSON Lines
schema is refused at open and converted by indexing it again, without extracting."""

import json
import shutil
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.assemble import RELATED_TO
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.factories import make_retriever
from quillian.components.graph.builder import GraphBuilder, KnowledgeGraph
from quillian.components.retrieval import derived
from quillian.components.retrieval.seeding import EntityLexicon, page_aliases
from quillian.errors import IndexSchemaError
from quillian.index import build_index, open_index
from quillian.index.stages import unique_texts
from quillian.index.tables import (
    KEY_ARRAYS,
    TABLES_DB,
    DistinctTexts,
    load_tables,
    save_array,
    save_tables,
    stored_chunk_texts,
    unique_first,
)
from quillian.stores.packed import MIN_PACKED
from quillian.stores.snapshot import GraphSnapshot
from quillian.testing.corpus import LOVELACE, build_tiny
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.tables import (
    chunk_texts_in_texts,
    description_chunk_ids,
    relation_words_in_rows,
)
from quillian.types import Chunk, Document, Provenance, Triple, entity_id, key64

TEXT = "Ada Lovelace met Charles Babbage. Babbage was born in London."
SENTENCE = "Ada Lovelace met Charles Babbage."
METHODS = ("sa", "ppr", "dense", "bm25")


def chunks() -> list[Chunk]:
    return [
        Chunk("d1", 0, TEXT, 0, len(TEXT), "Ada Lovelace"),
        Chunk("d2", 0, "London (city) is the capital.", 0, 29, "London (city)"),
    ]


def graph() -> KnowledgeGraph:
    """Two chunks; one relation's sentence is its chunk's text between the offsets, one
    is not, and a description text is shared."""
    shared = "A person of note."
    in_chunk = Provenance("d1", "c1", 0, len(SENTENCE), SENTENCE)
    elsewhere = Provenance("d1", "c1", 34, 62, "Babbage, born in London.")
    builder = GraphBuilder()
    builder.add(
        Extraction(
            "c1",
            "d1",
            (
                ExtractedEntity("Ada Lovelace", "PERSON", ("Countess Lovelace",), shared, True),
                ExtractedEntity("Charles Babbage", "PERSON", ("Babbage",), shared),
                ExtractedEntity("1815"),
            ),
            (
                Triple("Ada Lovelace", "met", "Charles Babbage", SENTENCE, in_chunk),
                Triple("Charles Babbage", "born in", "London", "born in London", elsewhere),
                Triple("Ada Lovelace", "born", "1815"),
            ),
        )
    )
    builder.add(Extraction("c2", "d2", (ExtractedEntity("London", "GPE", is_topic=True),), ()))
    return builder.build(["c1", "c2"])


@pytest.fixture
def stored(tmp_path: Path) -> tuple[KnowledgeGraph, KnowledgeGraph, Path]:
    kg = graph()
    save_tables(tmp_path, kg, chunks())
    opened, _ = load_tables(tmp_path, kg.snapshot)
    return kg, opened, tmp_path


def test_the_last_builds_chunk_texts_are_read_by_id(
    stored: tuple[KnowledgeGraph, KnowledgeGraph, Path], tmp_path: Path
) -> None:
    """What an update reads of the chunks that went (their linked records are
    compressed against their texts): those the tables hold, by id, others left out."""
    _, _, directory = stored
    texts = {c.id: c.text for c in chunks()}
    assert stored_chunk_texts(directory, ["c2", "absent", "c1"]) == {
        "c1": TEXT,
        "c2": texts[chunks()[1].id],
    }
    assert stored_chunk_texts(directory, []) == {}
    assert stored_chunk_texts(tmp_path / "no-index", ["c1"]) == {}
    with sqlite3.connect(directory / TABLES_DB) as conn:  # keyed-1: bodies in ``texts``
        conn.execute("UPDATE meta SET value = 'keyed-1' WHERE key = 'layout'")
    assert stored_chunk_texts(directory, ["c1"]) == {}


def test_the_tables_read_back_as_built(stored: tuple[KnowledgeGraph, KnowledgeGraph, Path]) -> None:
    kg, opened, _ = stored
    assert list(opened.entities) == list(kg.entities)
    assert list(opened.descriptions) == list(kg.descriptions)
    assert list(opened.relations) == list(kg.relations)
    assert list(opened.chunk_ids) == list(kg.chunk_ids)
    assert opened.relations[-1] == kg.relations[-1]
    assert opened.entities[1:3] == list(kg.entities)[1:3]
    assert len(opened.relations) == 3 and opened.n_entities == kg.n_entities
    with pytest.raises(IndexError):
        opened.relations[3]
    assert np.array_equal(opened.relation_subject, kg.relation_subject)


def test_each_text_is_stored_once(stored: tuple[KnowledgeGraph, KnowledgeGraph, Path]) -> None:
    _, _, directory = stored
    with sqlite3.connect(directory / TABLES_DB) as conn:
        texts = [t for (t,) in conn.execute("SELECT text FROM texts")]
        refs = conn.execute("SELECT sentence FROM relations ORDER BY row").fetchall()
    assert len(texts) == len(set(texts))
    assert SENTENCE in texts  # the first relation's description ...
    assert texts.count("A person of note.") == 1  # ... and a shared description, once
    assert refs[0] == (-1,)  # the sentence is the chunk's text between the offsets
    assert "Babbage, born in London." in texts  # one that is not is stored as text


def _position_keyed(directory: Path, snapshot: GraphSnapshot) -> None:
    """Turn tables written by :func:`save_tables` into the layout before rows were keyed
    by ids: rows keyed by position, a source naming its chunk's position, no order
    arrays (and a chunk's text in ``texts``)."""
    chunk_texts_in_texts(directory, snapshot)
    order = np.load(directory / "tables" / "chunk_order.npy").tolist()
    conn = sqlite3.connect(directory / TABLES_DB)
    for table in ("entities", "descriptions", "relations"):
        conn.execute(f"ALTER TABLE {table} RENAME COLUMN row TO pos")
    for pos, row in enumerate(order):
        conn.execute("UPDATE chunks SET row = ? WHERE row = ?", (-1 - pos, row))
    conn.execute("UPDATE chunks SET row = -1 - row")
    conn.execute("ALTER TABLE chunks RENAME COLUMN row TO pos")
    conn.execute("ALTER TABLE sources ADD COLUMN chunk INTEGER")
    conn.execute(
        "UPDATE sources SET chunk = coalesce((SELECT pos FROM chunks c"
        " WHERE c.id = sources.chunk_id), -1)"
    )
    conn.execute("DELETE FROM meta WHERE key = 'layout'")
    conn.commit()
    conn.close()
    for name in ("chunk", "entity", "description", "relation"):
        (directory / "tables" / f"{name}_order.npy").unlink()
    (directory / "tables" / "entity_positions.npy").unlink()


def test_tables_keeping_chunk_texts_in_texts_read_as_before(tmp_path: Path) -> None:
    """Tables of layout ``keyed-1`` (a chunk's text among the texts) read the same, and
    a chunk's text is compressed in the layout written now."""
    kg = graph()
    text = TEXT + " She wrote the first published program for the Engine." * 8
    given = [Chunk("d1", 0, text, 0, len(text), "Ada Lovelace"), chunks()[1]]
    assert len(text) >= MIN_PACKED > len(given[1].text)
    save_tables(tmp_path, kg, given)
    conn = sqlite3.connect(tmp_path / TABLES_DB)
    stored = {
        i: (t, n) for i, t, n in conn.execute("SELECT id, typeof(body), length(body) FROM chunks")
    }
    conn.close()
    (kind, size), (short, _) = (stored[i] for i in kg.chunk_ids)
    assert kind == "blob" and size < len(text) / 3 and short == "text"
    want = load_tables(tmp_path, kg.snapshot)
    assert list(want[1].chunk_texts) == [c.text for c in given]
    chunk_texts_in_texts(tmp_path, kg.snapshot)
    opened, tables = load_tables(tmp_path, kg.snapshot)
    assert tables.keyed
    assert list(opened.relations) == list(kg.relations) == list(want[0].relations)
    assert opened.relations[0] == kg.relations[0]  # the sentence read from its chunk
    assert list(tables.chunk_texts) == [c.text for c in given]
    assert tables.graph_texts() == want[1].graph_texts()


def test_a_relation_keeps_only_the_words_its_entities_do_not_imply(tmp_path: Path) -> None:
    """A relation's row keeps NULL for a subject or object that is its entity's name and
    for the predicate ``related_to``; every read gives the words back. Tables of layout
    ``keyed-4`` (every relation's words in its row) read the same."""
    builder = GraphBuilder()
    builder.add(
        Extraction(
            "c1",
            "d1",
            (
                ExtractedEntity("Ada Lovelace", "PERSON"),
                ExtractedEntity("Charles Babbage", "PERSON", ("Babbage",)),
            ),
            (
                Triple("Ada Lovelace", RELATED_TO, "Charles Babbage"),
                Triple("Babbage", "met", "Ada Lovelace"),
            ),
        )
    )
    kg = builder.build(["c1"])
    save_tables(tmp_path, kg, chunks()[:1])
    with sqlite3.connect(tmp_path / TABLES_DB) as conn:
        rows = conn.execute("SELECT subject, predicate, object FROM relations ORDER BY row")
        assert rows.fetchall() == [(None, None, None), ("Babbage", "met", None)]
    opened, tables = load_tables(tmp_path, kg.snapshot)
    assert [(r.subject, r.predicate, r.object) for r in opened.relations] == [
        ("Ada Lovelace", RELATED_TO, "Charles Babbage"),
        ("Babbage", "met", "Ada Lovelace"),
    ]
    words = ["Ada Lovelace related_to Charles Babbage", "Babbage met Ada Lovelace"]
    assert tables.graph_texts()[1] == words
    assert unique_texts(opened).read(np.arange(2)) == words
    relation_words_in_rows(tmp_path)
    with sqlite3.connect(tmp_path / TABLES_DB) as conn:
        rows = conn.execute("SELECT subject, predicate, object FROM relations ORDER BY row")
        assert rows.fetchall()[0] == ("Ada Lovelace", RELATED_TO, "Charles Babbage")
    reopened, older = load_tables(tmp_path, kg.snapshot)
    assert list(reopened.relations) == list(opened.relations) == list(kg.relations)
    assert older.graph_texts()[1] == words


def test_tables_naming_each_description_chunk_by_id_read_as_before(tmp_path: Path) -> None:
    """Tables of layout ``keyed-2`` (a description's row holding its chunk's id beside
    its key, and its node id) read the same graph; the layout written now names the
    chunk by key alone and stores no node id."""
    kg = graph()
    save_tables(tmp_path, kg, chunks())
    conn = sqlite3.connect(tmp_path / TABLES_DB)
    columns = [c for _, c, *_ in conn.execute("PRAGMA table_info(descriptions)")]
    conn.close()
    assert "chunk" in columns and "chunk_id" not in columns and "node" not in columns
    want, _ = load_tables(tmp_path, kg.snapshot)
    assert list(want.descriptions) == list(kg.descriptions)
    description_chunk_ids(tmp_path, kg.snapshot)
    opened, tables = load_tables(tmp_path, kg.snapshot)
    assert tables.keyed
    assert list(opened.descriptions) == list(kg.descriptions)
    assert list(opened.relations) == list(kg.relations)
    assert list(tables.chunk_texts) == [c.text for c in chunks()]


def test_tables_keyed_by_position_read_as_before(tmp_path: Path) -> None:
    """An index written before rows were keyed by ids opens and reads the same graph."""
    kg = graph()
    save_tables(tmp_path, kg, chunks())
    _position_keyed(tmp_path, kg.snapshot)
    opened, tables = load_tables(tmp_path, kg.snapshot)
    assert not tables.keyed
    assert list(opened.entities) == list(kg.entities)
    assert list(opened.descriptions) == list(kg.descriptions)
    assert list(opened.relations) == list(kg.relations)
    assert opened.relations[0] == kg.relations[0]  # the sentence read from its chunk
    assert list(opened.chunk_ids) == list(kg.chunk_ids)
    assert list(tables.chunk_texts) == [c.text for c in chunks()]
    assert tables.names(False)("london") == (kg.find_entity(entity_id("London")),)
    assert opened.find_entity(entity_id("Countess Lovelace")) == 0
    assert tables.graph_texts() == (
        [d.text for d in kg.descriptions],
        [r.description or f"{r.subject} {r.predicate} {r.object}" for r in kg.relations],
    )
    _assert_same_texts(tables.distinct_texts(), unique_texts(kg))


def test_rows_and_positions_are_stored_in_32_bits_and_keys_in_64(tmp_path: Path) -> None:
    """Every integer array beside a built index's tables holds rows or positions in 32
    bits, but the keys (hashes of chunk ids and texts) in 64."""
    build_tiny(tmp_path / "idx", LOVELACE)
    widths = {
        path.stem: np.load(path, mmap_mode="r").dtype
        for path in (tmp_path / "idx" / "tables").glob("*.npy")
    }
    keys = {n: w for n, w in widths.items() if n in KEY_ARRAYS}
    assert keys == {n: np.dtype(np.int64) for n in ("chunk_order", "chunk_keys", "text_keys")}
    wide = [n for n, w in widths.items() if n not in keys and w.kind == "i" and w.itemsize > 4]
    assert not wide and len(widths) > 20
    # an array whose values do not fit in 32 bits is stored as it is
    save_array(tmp_path, "relation_order", np.array([0, 2**31], dtype=np.int64))
    assert np.load(tmp_path / "relation_order.npy").dtype == np.int64


def test_what_retrieval_derives_is_stored(
    stored: tuple[KnowledgeGraph, KnowledgeGraph, Path],
) -> None:
    kg, opened, _ = stored
    indexes = opened.indexes
    assert indexes is not None
    pages = derived.page_entities(kg)
    assert np.array_equal(indexes.array("page_entities"), pages)
    assert np.array_equal(indexes.array("literal_entities"), derived.literal_entities(kg))
    assert np.array_equal(indexes.array("description_entity"), derived.description_entities(kg))
    assert np.array_equal(indexes.array("entity_chunks"), derived.entity_chunks(kg))
    for name, array in derived.hop_arrays(kg, pages).items():
        assert np.array_equal(indexes.array(name), array), name
    # the lexicon's keys resolve as the lexicon built in memory does
    titles = [c.title for c in chunks()]
    names = [(i, [e.name, *e.aliases]) for i, e in enumerate(kg.entities)]
    titled = page_aliases([(int(e), titles[c]) for c, e in enumerate(pages) if e >= 0])
    for use_titles, pairs in ((False, names), (True, names + titled)):
        memory = EntityLexicon.from_names(pairs)
        resolve = indexes.names(use_titles)
        assert resolve is not None
        lexicon = EntityLexicon.over(resolve, max_words=EntityLexicon.MAX_WORDS)
        question = "Where did Countess Lovelace meet Babbage in London?"
        assert lexicon.match(question) == memory.match(question)
    assert lexicon.match("the London (city) area") == memory.match("the London (city) area")
    # an alias's id finds its entity
    alias = kg.entities[0].aliases[0]
    assert opened.find_entity(entity_id(alias)) == kg.find_entity(entity_id(alias)) == 0
    assert opened.find_entity("ent-none") is None


def test_rows_are_read_from_many_threads(
    stored: tuple[KnowledgeGraph, KnowledgeGraph, Path],
) -> None:
    kg, _, directory = stored
    expected = list(kg.relations)
    failures: list[str] = []

    def read() -> None:
        opened, _ = load_tables(directory, kg.snapshot)  # a cold cache per thread group
        for _ in range(200):
            for i, triple in enumerate(expected):
                if opened.relations[i] != triple or list(opened.relations) != expected:
                    failures.append(f"row {i}")

    threads = [threading.Thread(target=read) for _ in range(2)]
    shared, _ = load_tables(directory, kg.snapshot)

    def read_shared() -> None:
        for _ in range(300):
            for i in (2, 0, 1):
                if shared.relations[i] != expected[i] or shared.entities[i] != kg.entities[i]:
                    failures.append(f"shared row {i}")

    threads += [threading.Thread(target=read_shared) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_an_opened_index_reads_its_build_after_a_rebuild(tmp_path: Path) -> None:
    kg = graph()
    save_tables(tmp_path, kg, chunks())
    opened, _ = load_tables(tmp_path, kg.snapshot)
    assert opened.entities[0] == kg.entities[0]  # the connection is open
    other = GraphBuilder()
    other.add(Extraction("c1", "d1", (ExtractedEntity("Zed"),), ()))
    save_tables(tmp_path, other.build(["c1", "c2"]), chunks())  # tables/ replaced
    assert [e.name for e in opened.entities] == [e.name for e in kg.entities]
    assert list(opened.relations) == list(kg.relations)


def rankings(location: str) -> dict[str, list[list[str]]]:
    """Each method's top 5 chunk ids for two questions."""
    context = open_index(location, KeywordEmbedder()).context
    ask = ("Where was the collaborator of Ada Lovelace born?", "What is London?")
    return {
        m: [[p.chunk_id for p in make_retriever(context, m).retrieve(q, 5).passages] for q in ask]
        for m in METHODS
    }


def _make_old(index: Path) -> None:
    """Turn a built index into one of schema 1 (JSON Lines tables)."""
    shutil.rmtree(index / "tables")
    (index / "tables").mkdir()
    for name in ("entities", "descriptions", "relations", "chunks"):
        (index / "tables" / f"{name}.jsonl").write_text("{}\n")
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["schema_version"] = 1
    (index / "manifest.json").write_text(json.dumps(manifest))


def test_an_old_index_is_refused_then_converted_without_extracting(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    build_tiny(index, LOVELACE)
    clean = rankings(str(index))
    _make_old(index)
    with pytest.raises(IndexSchemaError) as info:
        rankings(str(index))
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"{index}: index schema version 1 is older than this Quillian reads (2); rerun "
        f"`quillian index CORPUS --out {index}` to convert it (its stored extractions "
        "are reused)"
    )
    extractor = TitleLinkExtractor(dict(LOVELACE))
    report = build_index(
        [Document(text, title) for title, text in LOVELACE.items()],
        index,
        chunker=PassageChunker(),
        extractor=extractor,
        embedder=KeywordEmbedder(),
    )
    assert extractor.calls == 0 and not report.reused  # rebuilt from stored extractions
    assert (index / TABLES_DB).is_file() and not (index / "tables" / "entities.jsonl").exists()
    assert json.loads((index / "manifest.json").read_text())["schema_version"] == 2
    assert rankings(str(index)) == clean
    assert set(clean) == set(METHODS)


def test_the_texts_to_embed_read_from_the_tables_equal_the_graph_s(
    stored: tuple[KnowledgeGraph, KnowledgeGraph, Path],
) -> None:
    kg, opened, _ = stored
    texts = _assert_same_texts(unique_texts(opened), unique_texts(kg))
    assert "Ada Lovelace born 1815" in texts  # a relation without a description: its ends
    # texts are read by position, only those asked for, in the order asked
    some = np.array([len(texts) - 1, 0])
    assert unique_texts(opened).read(some) == [texts[-1], texts[0]]


def _assert_same_texts(got: DistinctTexts, want: DistinctTexts) -> list[str]:
    """Both give the same distinct texts (their ids each text's key64) and rows; the texts."""
    everything = np.arange(len(want.ids))
    texts = want.read(everything)
    assert got.read(everything) == texts
    np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_array_equal(want.ids, [key64(t) for t in texts])
    np.testing.assert_array_equal(got.description_rows, want.description_rows)
    np.testing.assert_array_equal(got.relation_rows, want.relation_rows)
    return texts


@pytest.mark.parametrize("n", [0, 1, 2, 50, 3000])
def test_unique_first_is_numpys_unique_with_first_indexes_and_inverse(n: int) -> None:
    rng = np.random.default_rng(n)
    keys = rng.integers(-(2**62), 2**62, max(n // 3, 1))[rng.integers(0, max(n // 3, 1), n)]
    want = np.unique(keys, return_index=True, return_inverse=True)
    got = unique_first(keys)
    for a, b in zip(want, got, strict=True):
        assert a.reshape(-1).tolist() == b.tolist()
