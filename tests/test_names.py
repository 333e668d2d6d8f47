"""One name normalisation for the whole project: :func:`quillian.types.normalize_name`.

The index keys its entities by it (``Entity.id``, the graph builder, query seeding), and
every graph looks names up by it: an imported graph's alias index, an index's document
graph, the in-memory test graph, and linking one graph to another. A name written with
a leading article or surrounding quotes (``"The Beatles"``, ``"'Paris'"``) therefore
finds the same entity on both sides.
"""

from __future__ import annotations

import re
import sys
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.base import ExtractedEntity
from quillian.components.graph.builder import GraphBuilder
from quillian.components.kg.document_graph import DocumentGraph
from quillian.components.kg.link import link_graphs
from quillian.components.kg.store import ImportedGraph, TextTable, build_alias_index, name_key
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions
from quillian.components.retrieval.seeding import EntityLexicon
from quillian.testing.corpus import tiny_index
from quillian.testing.kg import MemoryGraph
from quillian.types import Entity, normalize_name

#: Deterministic runs that write no example database into the working directory.
PROPERTY = settings(database=None, derandomize=True, max_examples=500, deadline=None)

#: Pieces that exercise every step of the normalisation: whitespace of every kind (tab,
#: newline, no-break, line separator, the C0 separators), the stripped quotes and
#: punctuation, articles, compatibility forms (NFKC) and case folds that change length.
FRAGMENTS = [
    *("the ", "The ", "a ", "A ", "an ", "AN ", "the", "a", "an", "theatre", "another"),
    *(" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u00a0", "\u2028"),
    *("\u3000", "\u200b", "'", '"', "`", "\u201c", "\u201d", "\u2018", "\u2019", "."),
    *(",", ";", ":", "!", "?", "(", ")", "[", "]", "{", "}", "-", "'s", "\u00ab"),
    *("\ufb01", "\u00df", "\u0130", "\u03a3", "\u0301", "e\u0301", "\u00e9", "\uff21"),
    *("\u2460", "\u00bd", "\u1e9e", "\u01f0", "Paris", "Beatles", "x"),
]
names = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=8).map(
    "".join
)

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = "\"'`\u201c\u201d\u2018\u2019.,;:!?()[]{}"


def reference_normalize_name(name: str) -> str:
    """``normalize_name`` as it was first written (every index's entity ids and every
    benchmark figure rest on it); the faster version must give the same key."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _SPACE.sub(" ", text).strip().strip(_EDGE_PUNCT).strip()
    for article in ("the ", "a ", "an "):
        if text.startswith(article) and len(text) > len(article):
            text = text[len(article) :]
            break
    return text


# --- normalize_name itself ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("The  Beatles.", "beatles"),
        ("the beatles", "beatles"),
        ("'Paris'", "paris"),
        ("\u201cParis\u201d", "paris"),
        ("Paris, Texas", "paris, texas"),
        ("\uff21da\u3000Lovelace", "ada lovelace"),  # full width (NFKC)
        ("  ada\tLOVELACE\n", "ada lovelace"),
        ("Stra\u00dfe", "strasse"),  # case folding, not lower()
        ("cafe\u0301", "caf\u00e9"),  # composed by NFKC
        ("A Tribe Called Quest", "tribe called quest"),
        ("The", "the"),  # an article alone is kept
        ("...", ""),
    ],
)
def test_normalize_name_examples(name, key):
    assert normalize_name(name) == key


@PROPERTY
@given(names)
def test_normalize_name_is_unchanged_from_the_reference(name):
    assert normalize_name(name) == reference_normalize_name(name)


def test_normalize_name_is_unchanged_for_every_space_punctuation_and_compatibility_char():
    """Every character that is whitespace, punctuation, a control or format character,
    or changed by NFKC, alone and between words, articles and edge punctuation."""
    chars = [
        ch
        for ch in map(chr, range(sys.maxunicode + 1))
        if ch.isspace()
        or unicodedata.category(ch)[0] in "ZP"
        or unicodedata.category(ch) in ("Cc", "Cf")
        or unicodedata.normalize("NFKC", ch) != ch
    ]
    assert len(chars) > 5000
    for ch in chars:
        for name in (ch, f"the{ch}x", f"{ch}a x{ch}", f"'{ch}an{ch}{ch}x.", f"x{ch} y"):
            assert normalize_name(name) == reference_normalize_name(name), ascii(name)


# --- the imported graph's alias index -----------------------------------------------------


def memory_table(rows: list[str]) -> TextTable:
    encoded = [r.encode("utf-8") for r in rows]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return TextTable(np.frombuffer(b"".join(encoded), np.uint8), offsets)


@settings(PROPERTY, max_examples=100)
@given(st.lists(st.lists(names.map(lambda n: n.replace("\t", " ")), min_size=1), max_size=5))
def test_alias_index_keys_are_normalize_name_keys(entities):
    """The writer's alias index holds exactly the ``normalize_name`` key of each of an
    entity's names (tab-separated in the names table), sorted."""
    rows = ["\t".join(entity) for entity in entities]
    keys, owners = build_alias_index(memory_table(rows), step=2)
    expected = {
        (name_key(key), e)
        for e, entity in enumerate(entities)
        for key in map(normalize_name, entity)
        if key
    }
    assert sorted(zip(keys.tolist(), owners.tolist(), strict=True)) == sorted(expected)
    assert len(keys) == len(expected) and bool(np.all(keys[:-1] <= keys[1:]))


# --- both sides agree ---------------------------------------------------------------------

#: Names as the graphs store them (one entity each), with aliases.
STORED = {
    "The Beatles": ["Fab Four"],
    "Paris": ["'City of Light'"],
    "Ada Lovelace": [],
    "Stra\u00dfe": [],
    "Caf\u00e9 de Flore": [],
    "A Tribe Called Quest": [],
}
#: ``(stored name, the name written otherwise, whether it is the same entity)``.
TRICKY = [
    ("The Beatles", "The Beatles", True),
    ("The Beatles", "beatles", True),
    ("The Beatles", "THE  BEATLES.", True),
    ("The Beatles", "\u201cthe Beatles\u201d", True),
    ("The Beatles", "the fab four", True),
    ("Paris", "'Paris'", True),
    ("Paris", "(Paris)", True),
    ("Paris", "city of light", True),
    ("Paris", "Paris, Texas", False),
    ("Paris", "Parisian", False),
    ("Ada Lovelace", "\uff21da\u3000Lovelace", True),
    ("Ada Lovelace", "  ada\tlovelace\n", True),
    ("Ada Lovelace", "Ada", False),
    ("Stra\u00dfe", "STRASSE", True),
    ("Caf\u00e9 de Flore", "cafe\u0301 de flore", True),
    ("A Tribe Called Quest", "Tribe Called Quest", True),
    ("A Tribe Called Quest", "The Tribe Called Quest!", True),
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    ids = {name: f"Q{i}" for i, name in enumerate(STORED, 1)}
    files = {
        "wikidata5m_entity.txt": "".join(
            "\t".join([ids[n], n, *aliases]) + "\n" for n, aliases in STORED.items()
        ),
        "wikidata5m_relation.txt": "P1\trelated to\n",
        "wikidata5m_all_triplet.txt": "Q1\tP1\tQ2\nQ2\tP1\tQ3\n",
        "wikidata5m_text.txt": "".join(f"{ids[n]}\t{n}, a thing\n" for n in STORED),
    }
    for name, text in files.items():
        (root / "w5m").mkdir(exist_ok=True)
        (root / "w5m" / name).write_text(text, encoding="utf-8")
    options = ImportOptions(preprocess=False, embedder_name="keyword")
    import_wikidata5m(root / "w5m", root / "kg", KeywordEmbedder(), options=options)
    with ImportedGraph.open(root / "kg", KeywordEmbedder()) as graph:
        yield graph, {name: graph.index_of(q) for name, q in ids.items()}


def index_corpus(names: list[str]) -> dict[str, str]:
    return {name: f"{name} is a thing." for name in names}


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    context = tiny_index(tmp_path_factory.mktemp("idx"), index_corpus(list(STORED)))
    graph = DocumentGraph(context)
    return graph, {graph.entity_name(e): e for e in range(len(graph))}


def expected(found: dict[str, int], stored: str, same: bool) -> list[int]:
    return [found[stored]] if same else []


@pytest.mark.parametrize(("stored", "written", "same"), TRICKY)
def test_index_side_keys_match_as_the_graphs_look_up(stored, written, same, imported, documents):
    aliases = STORED[stored]
    # the index: entity ids, the graph builder's merging, query seeding
    builder = GraphBuilder()
    entities = {n: builder.resolve(ExtractedEntity(n, aliases=tuple(a))) for n, a in STORED.items()}
    lexicon = EntityLexicon.from_names((entities[n], [n, *a]) for n, a in STORED.items())
    in_index = builder.entity_index(written)
    assert (in_index == entities[stored]) is same
    assert (lexicon.lookup(written) == entities[stored]) is same
    by_name = Entity(stored, aliases=tuple(aliases))
    assert bool(by_name.keys & Entity(written).keys) is same
    # the graphs: an imported graph's alias index, an index's document graph, the fake
    graph, in_graph = imported
    assert graph.lookup(written) == expected(in_graph, stored, same)
    memory = MemoryGraph({n: "" for n in STORED}, [], aliases=STORED)
    assert memory.lookup(written) == expected({n: memory.id(n) for n in STORED}, stored, same)
    if not aliases or written not in ("the fab four", "city of light"):
        doc_graph, in_documents = documents
        assert doc_graph.lookup(written) == expected(in_documents, stored, same)


def test_entity_ids_merge_what_every_lookup_merges():
    for stored, written, same in TRICKY:
        if written not in ("the fab four", "city of light"):
            assert (Entity(stored).id == Entity(written).id) is same, (stored, written)


def test_linking_matches_names_written_with_articles_and_quotes(tmp_path, imported):
    """An index that writes the names otherwise links each entity by name, not only by
    description (the old alias index missed "'Paris'" and "Beatles")."""
    graph, in_graph = imported
    written = {
        "Beatles": "The Beatles",
        "'Paris'": "Paris",
        "\uff21da Lovelace": "Ada Lovelace",
        "STRASSE": "Stra\u00dfe",
        "Tribe Called Quest": "A Tribe Called Quest",
    }
    context = tiny_index(tmp_path / "idx", index_corpus(list(written)))
    source = DocumentGraph(context)
    alignment = link_graphs(source, graph)
    rows = {source.entity_name(r["source"]): r for r in alignment.rows()}
    assert {n: r["target"] for n, r in rows.items()} == {
        n: in_graph[stored] for n, stored in written.items()
    }
    assert {r["kind"] for r in rows.values()} == {"name"}
    assert all(r["name_score"] == 1.0 for r in rows.values())


def test_lookup_of_an_empty_key_finds_nothing(imported, documents):
    graph, _ = imported
    for name in ("", "  ", "'...'"):
        assert graph.lookup(name) == []
        assert documents[0].lookup(name) == []
        assert MemoryGraph({"x": ""}, []).lookup(name) == []
