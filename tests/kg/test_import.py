"""Importing pre-existing knowledge graphs: readers, preprocessing, bad input, the store."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from quillian.cli.main import main
from quillian.components.embedding.hashed import HashEmbedder, KeywordEmbedder
from quillian.components.kg.base import ExternalGraph, KGTriple
from quillian.components.kg.staging import RaggedFile, lookup_sorted
from quillian.components.kg.store import ImportedGraph, TextTable
from quillian.components.kg.wikidata5m import Wikidata5MFiles, import_wikidata5m
from quillian.components.kg.wordnet import import_wordnet
from quillian.components.kg.writer import ImportOptions, build_rows
from quillian.errors import ConfigError, IndexIncompleteError, IndexMissingError, InputError

ENTITIES = """\
Q1\tDouglas Adams\tDNA\tDouglas Noel Adams
Q2\tLondon
Q3\tEngland
Q4\tCambridge
Q5\tNowhere
Q6\tOrphan
Q7\tLeaf
"""
RELATIONS = "P1\teducated at\nP2\tlives in\nP3\tlocated in\nP4\tcapital\n"
TRIPLES = """\
Q1\tP1\tQ4
Q1\tP2\tQ2
Q1\tP2\tQ3
Q2\tP3\tQ3
Q3\tP4\tQ2
Q4\tP3\tQ3
Q5\tP3\tQ3
Q7\tP3\tQ6
Q1\tP1\tQ4
"""
DESCRIPTIONS = """\
Q1\tEnglish writer and humorist
Q2\tcapital city of England
Q3\tcountry in Europe
Q4\tuniversity town in England
Q6\ta place nobody goes from
Q7\ta leaf that points at the orphan
"""


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def release(root: Path, **override: str | bytes) -> Path:
    """A tiny Wikidata5M release in ``root``; keyword arguments replace files."""
    files = {
        "wikidata5m_entity.txt": ENTITIES,
        "wikidata5m_relation.txt": RELATIONS,
        "wikidata5m_all_triplet.txt": TRIPLES,
        "wikidata5m_text.txt": DESCRIPTIONS,
    }
    names = {"entities": "wikidata5m_entity.txt", "triples": "wikidata5m_all_triplet.txt"}
    names |= {"descriptions": "wikidata5m_text.txt", "relations": "wikidata5m_relation.txt"}
    for key, content in override.items():
        files[names[key]] = content
    for name, content in files.items():
        write(root / name, content)
    return root


def do_import(root: Path, out: Path, embedder=None, **options) -> object:
    return import_wikidata5m(
        root, out, embedder or KeywordEmbedder(), options=ImportOptions(**options)
    )


@pytest.fixture
def graph(tmp_path):
    do_import(release(tmp_path / "w5m"), tmp_path / "kg")
    with ImportedGraph.open(tmp_path / "kg", KeywordEmbedder()) as g:
        yield g


def by_id(graph: ImportedGraph, entity_id: str) -> int:
    index = graph.index_of(entity_id)
    assert index >= 0, entity_id
    return index


# --- Wikidata5M and the paper's preprocessing -------------------------------------------


def test_preprocessing_drops_entities_without_description_or_outgoing_triple(tmp_path):
    report = do_import(release(tmp_path / "w5m"), tmp_path / "kg")
    assert report.read == {"entities": 7, "triples": 9, "descriptions": 6, "relations": 4}
    dropped = report.dropped
    assert dropped.no_description == 1 and dropped.examples_no_description == ["Q5"]
    # Q6 heads no triple; Q7's only triple points at Q6, so it goes in the second round
    assert dropped.no_outgoing_triple == 2
    assert dropped.examples_no_outgoing_triple == ["Q6", "Q7"]
    assert dropped.rounds == 2
    assert dropped.triples == 2  # Q5 -> Q3 and Q7 -> Q6
    assert report.final == {"entities": 4, "relations": 4, "triples": 6}
    assert any("1 repeated triples" in note for note in report.notes)
    assert not report.issues.problems()
    saved = json.loads((tmp_path / "kg" / "report.json").read_text())
    assert saved["dropped"]["examples_no_description"] == ["Q5"]


def test_no_preprocess_keeps_every_entity(tmp_path):
    report = do_import(release(tmp_path / "w5m"), tmp_path / "kg", preprocess=False)
    assert report.dropped is None
    assert report.final["entities"] == 7
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    assert graph.description(by_id(graph, "Q5")) == ""
    assert graph.degree(by_id(graph, "Q6")) == 0


def test_explicit_files_and_missing_release_file(tmp_path):
    root = release(tmp_path / "w5m")
    files = Wikidata5MFiles(
        entities=root / "wikidata5m_entity.txt",
        triples=(root / "wikidata5m_all_triplet.txt",),
        descriptions=root / "wikidata5m_text.txt",
    )
    report = import_wikidata5m(files, tmp_path / "kg", KeywordEmbedder())
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    # without a relations file, relation ids are their own names
    assert sorted(graph.relation_names) == ["P1", "P2", "P3", "P4"]
    assert "unknown-relation" not in report.issues.counts
    (root / "wikidata5m_text.txt").unlink()
    with pytest.raises(InputError, match="no descriptions file"):
        Wikidata5MFiles.from_directory(root)


def test_gzipped_release_files_are_read(tmp_path):
    root = release(tmp_path / "w5m")
    for name in ("wikidata5m_all_triplet.txt", "wikidata5m_text.txt"):
        data = (root / name).read_bytes()
        (root / name).unlink()
        write(root / f"{name}.gz", gzip.compress(data))
    report = do_import(root, tmp_path / "kg")
    assert report.final["triples"] == 6


# --- bad input: counted, with line numbers ----------------------------------------------


def test_malformed_lines_are_counted_with_line_numbers(tmp_path):
    triples = TRIPLES.replace("Q1\tP2\tQ3\n", "Q1\tP2\n") + "this is not a triple\n\n"
    report = do_import(release(tmp_path / "w5m", triples=triples), tmp_path / "kg")
    malformed = report.issues.examples["malformed"]
    assert report.issues.counts["malformed"] == 2
    assert [i.line for i in malformed] == [3, 10]
    assert malformed[0].path.endswith("wikidata5m_all_triplet.txt")
    assert "expected head<TAB>relation<TAB>tail" in malformed[1].detail
    text = "\n".join(report.summary_lines())
    assert "wikidata5m_all_triplet.txt:3: malformed" in text


def test_triple_naming_an_unknown_entity_is_reported_and_dropped(tmp_path):
    triples = TRIPLES + "Q1\tP1\tQ99\nQ98\tP1\tQ2\n"
    report = do_import(release(tmp_path / "w5m", triples=triples), tmp_path / "kg")
    issues = report.issues.examples["unknown-entity"]
    assert [(i.line, i.detail) for i in issues] == [
        (10, "unknown tail Q99; triple dropped"),
        (11, "unknown head Q98; triple dropped"),
    ]
    assert report.final["triples"] == 6


def test_unknown_relation_is_named_by_its_id_and_reported_once(tmp_path):
    triples = TRIPLES + "Q1\tP77\tQ3\nQ2\tP77\tQ4\n"
    report = do_import(release(tmp_path / "w5m", triples=triples), tmp_path / "kg")
    assert report.issues.counts["unknown-relation"] == 1
    assert report.issues.examples["unknown-relation"][0].line == 10
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    assert "P77" in graph.relation_names


def test_duplicate_entity_ids_keep_the_first_and_are_reported(tmp_path):
    entities = ENTITIES + "Q2\tLondinium\n"
    report = do_import(release(tmp_path / "w5m", entities=entities), tmp_path / "kg")
    issue = report.issues.examples["duplicate-entity"][0]
    assert (issue.line, issue.detail) == (8, "Q2 already on line 2; the first is kept")
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    assert graph.names(by_id(graph, "Q2")) == ["London"]
    assert graph.lookup("Londinium") == []


def test_duplicate_descriptions_keep_the_first(tmp_path):
    descriptions = DESCRIPTIONS + "Q2\ta second description\n"
    report = do_import(release(tmp_path / "w5m", descriptions=descriptions), tmp_path / "kg")
    assert report.issues.examples["duplicate-description"][0].line == 7
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    assert graph.description(by_id(graph, "Q2")) == "capital city of England"


def test_truncated_last_line_is_malformed(tmp_path):
    triples = TRIPLES.rstrip("\n") + "\nQ4\tP"  # cut in the middle of line 10
    report = do_import(release(tmp_path / "w5m", triples=triples), tmp_path / "kg")
    assert [i.line for i in report.issues.examples["malformed"]] == [10]


def test_mixed_encoding_lines_are_decode_errors(tmp_path):
    latin1 = "Q4\tville universitaire très ancienne\n".encode("latin-1")
    descriptions = DESCRIPTIONS.replace("Q4\tuniversity town in England\n", "").encode() + latin1
    report = do_import(release(tmp_path / "w5m", descriptions=descriptions), tmp_path / "kg")
    issue = report.issues.examples["decode-error"][0]
    assert issue.line == 6 and issue.path.endswith("wikidata5m_text.txt")
    assert "not UTF-8" in issue.detail
    # Cambridge lost its description, so the paper's filter drops it
    assert report.dropped.examples_no_description == ["Q4", "Q5"]


def test_truncated_gzip_file_is_an_error(tmp_path):
    root = release(tmp_path / "w5m")
    data = gzip.compress((root / "wikidata5m_all_triplet.txt").read_bytes() * 50)
    (root / "wikidata5m_all_triplet.txt").unlink()
    write(root / "wikidata5m_all_triplet.txt.gz", data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated or corrupt compressed file"):
        do_import(root, tmp_path / "kg")
    assert not (tmp_path / "kg").exists()


def test_description_file_of_another_graph_is_refused(tmp_path):
    other = "".join(f"X{i}\tsomething else entirely\n" for i in range(1500))
    with pytest.raises(InputError, match="another graph") as caught:
        do_import(release(tmp_path / "w5m", descriptions=other), tmp_path / "kg")
    assert "wikidata5m_text.txt" in str(caught.value)


def test_a_small_wrong_file_is_refused_at_its_end(tmp_path):
    other = "X1\tfoo\nX2\tbar\n"
    with pytest.raises(InputError, match="only 0 of the first 2 descriptions"):
        do_import(release(tmp_path / "w5m", descriptions=other), tmp_path / "kg")


def test_too_many_bad_lines_stop_the_import(tmp_path):
    triples = TRIPLES + "".join(f"garbage {i}\n" for i in range(5))
    with pytest.raises(InputError, match="more than 2 malformed lines") as caught:
        do_import(release(tmp_path / "w5m", triples=triples), tmp_path / "kg", max_bad_lines=2)
    assert "wikidata5m_all_triplet.txt:10: malformed" in str(caught.value)


# --- atomic writes --------------------------------------------------------------------


def test_interrupted_import_leaves_no_graph(tmp_path):
    def interrupt(stage, done, total):
        if stage == "embed" and done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_wikidata5m(
            release(tmp_path / "w5m"), tmp_path / "kg", KeywordEmbedder(), progress=interrupt
        )
    assert not (tmp_path / "kg").exists()
    assert not list(tmp_path.glob(".kg.importing-*"))


def test_interrupted_overwrite_keeps_the_old_graph(tmp_path):
    root = release(tmp_path / "w5m")
    do_import(root, tmp_path / "kg")

    def interrupt(stage, done, total):
        if stage == "build" and done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_wikidata5m(
            root,
            tmp_path / "kg",
            KeywordEmbedder(),
            progress=interrupt,
            options=ImportOptions(overwrite=True, preprocess=False),
        )
    assert len(ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())) == 4


def test_killed_import_leaves_a_directory_that_cannot_be_opened(tmp_path):
    root = release(tmp_path / "w5m")
    script = textwrap.dedent(f"""
        import os
        from quillian.components.kg.wikidata5m import import_wikidata5m
        from quillian.components.embedding.hashed import KeywordEmbedder

        def die(stage, done, total):
            if stage == "embed":
                os._exit(9)  # like SIGKILL: no cleanup runs

        import_wikidata5m({str(root)!r}, {str(tmp_path / "kg")!r}, KeywordEmbedder(),
                          progress=die)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert result.returncode == 9, result.stderr.decode()
    assert not (tmp_path / "kg").exists()
    (leftover,) = tmp_path.glob(".kg.importing-*")
    manifest = json.loads((leftover / "manifest.json").read_text())
    assert manifest["state"] == "building"
    with pytest.raises(IndexIncompleteError, match="did not finish"):
        ImportedGraph.open(leftover)


def test_existing_output_is_not_replaced_unless_asked(tmp_path):
    root = release(tmp_path / "w5m")
    do_import(root, tmp_path / "kg")
    with pytest.raises(ConfigError, match="already exists"):
        do_import(root, tmp_path / "kg")
    report = do_import(root, tmp_path / "kg", overwrite=True, preprocess=False)
    assert report.final["entities"] == 7
    assert len(ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())) == 7
    write(tmp_path / "notes" / "keep.txt", "mine")
    with pytest.raises(ConfigError, match="not a knowledge graph directory"):
        do_import(root, tmp_path / "notes", overwrite=True)
    assert (tmp_path / "notes" / "keep.txt").exists()


def test_open_refuses_missing_and_foreign_directories(tmp_path):
    with pytest.raises(IndexMissingError):
        ImportedGraph.open(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexIncompleteError, match=r"no manifest\.json"):
        ImportedGraph.open(tmp_path / "empty")


# --- the store behind the ExternalGraph protocol ----------------------------------------


def test_imported_graph_implements_the_protocol(graph):
    assert isinstance(graph, ExternalGraph)
    assert len(graph) == 4
    assert graph.name == "kg"
    adams = by_id(graph, "Q1")
    assert graph.entity_name(adams) == "Douglas Adams"
    assert graph.aliases(adams) == ["DNA", "Douglas Noel Adams"]
    assert graph.names(adams) == ["Douglas Adams", "DNA", "Douglas Noel Adams"]
    assert graph.description(adams) == "English writer and humorist"
    assert graph.entity_id(adams) == "Q1"
    assert graph.index_of("Q5") == -1  # dropped by preprocessing


def test_lookup_by_name_or_alias_ignores_case_and_spaces(graph):
    adams = by_id(graph, "Q1")
    assert graph.lookup("dna") == [adams]
    assert graph.lookup("  douglas   NOEL adams ") == [adams]
    assert graph.lookup("London") == [by_id(graph, "Q2")]
    assert graph.lookup("Nowhere") == []  # dropped
    assert graph.lookup("") == []


def test_seed_entities_rank_descriptions_by_inner_product(graph):
    seeds = graph.seed_entities("Which university town is in England?", 2)
    assert [e for e, _ in seeds][:1] == [by_id(graph, "Q4")]
    assert seeds[0][1] >= seeds[1][1]
    assert len(graph.seed_entities("anything", 100)) == 4


def test_triples_are_capped_deterministic_and_named(tmp_path, graph):
    adams, london = by_id(graph, "Q1"), by_id(graph, "Q2")
    full = graph.triples([adams, london], 10)
    assert all(isinstance(t, KGTriple) for ts in full.values() for t in ts)
    # round-robin over relations: the first triple of each relation, then the rest
    assert [t.text() for t in full[adams]] == [
        "<Douglas Adams | educated at | Cambridge>",
        "<Douglas Adams | lives in | London>",
        "<Douglas Adams | lives in | England>",
    ]
    assert [t.text() for t in full[london]] == ["<London | located in | England>"]
    capped = graph.triples([adams], 2)[adams]
    assert capped == full[adams][:2]
    assert {t.relation for t in capped} == {"educated at", "lives in"}
    assert graph.triples([adams], 0) == {adams: []}
    assert graph.triples([adams, adams], 1) == {adams: full[adams][:1]}
    reopened = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    assert reopened.triples([adams, london], 10) == full
    with pytest.raises(InputError, match="outside"):
        graph.triples([99], 1)
    with pytest.raises(InputError, match="max_per_entity"):
        graph.triples([adams], -1)


def test_reopen_needs_the_same_embedder(tmp_path, graph):
    with pytest.raises(ConfigError, match="keyword-1024"):
        ImportedGraph.open(tmp_path / "kg", HashEmbedder())
    unnamed = ImportedGraph.open(tmp_path / "kg")  # embedder passed in by code: no name
    with pytest.raises(ConfigError, match="open it with that embedder"):
        unnamed.seed_entities("x", 1)


def test_registry_embedder_is_made_from_the_manifest(tmp_path):
    root = release(tmp_path / "w5m")
    options = ImportOptions(embedder_name="hash")
    import_wikidata5m(root, tmp_path / "kg", HashEmbedder(), options=options)
    graph = ImportedGraph.open(tmp_path / "kg")
    assert graph.manifest["embedder"] == {"name": "hash", "model_id": "hash-64", "dim": 64}
    adams = by_id(graph, "Q1")
    # the hash embedder gives equal texts equal vectors: a description finds its entity
    assert graph.seed_entities("English writer and humorist", 1)[0][0] == adams


# --- RDF --------------------------------------------------------------------------------

NT = """\
<http://ex.org/ada> <http://www.w3.org/2000/01/rdf-schema#label> "Ada Lovelace"@en .
<http://ex.org/ada> <http://www.w3.org/2000/01/rdf-schema#label> "Ada"@fr .
<http://ex.org/ada> <http://www.w3.org/2004/02/skos/core#prefLabel> "Augusta Ada King" .
<http://ex.org/ada> <http://schema.org/description> "English mathematician" .
<http://ex.org/ada> <http://www.w3.org/2000/01/rdf-schema#comment> "a comment loses" .
<http://ex.org/ada> <http://ex.org/workedWith> <http://ex.org/babbage> .
<http://ex.org/ada> <http://ex.org/born> "1815"^^<http://www.w3.org/2001/XMLSchema#gYear> .
<http://ex.org/babbage> <http://www.w3.org/2000/01/rdf-schema#comment> "English polymath" .
<http://ex.org/babbage> <http://ex.org/workedWith> <http://ex.org/ada> .
<http://ex.org/workedWith> <http://www.w3.org/2000/01/rdf-schema#label> "worked with" .
this is not a triple
_:b1 <http://ex.org/x> <http://ex.org/ada> .
"""
TTL = """\
@prefix ex: <http://ex.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:london rdfs:label "London" ; skos:definition "Capital of England" ; ex:capitalOf ex:england .
ex:england rdfs:label "England" ; rdfs:comment "A country" ; ex:contains ex:london .
"""


def test_ntriples_import_maps_labels_descriptions_and_counts_the_rest(tmp_path):
    pytest.importorskip("rdflib", reason="the rdf extra (rdflib) is not installed")
    from quillian.components.kg.rdf import import_rdf

    path = write(tmp_path / "g.nt", NT)
    report = import_rdf([path], tmp_path / "kg", KeywordEmbedder())
    counts = report.issues.counts
    assert counts["malformed"] == 1
    assert report.issues.examples["malformed"][0].line == 11
    assert counts["blank-node"] == 1 and counts["literal-ignored"] == 1
    assert report.issues.examples["other-language"][0].line == 2
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    ada = by_id(graph, "http://ex.org/ada")
    # skos:prefLabel is the name; schema:description beats rdfs:comment
    assert graph.names(ada) == ["Augusta Ada King", "Ada Lovelace"]
    assert graph.description(ada) == "English mathematician"
    babbage = by_id(graph, "http://ex.org/babbage")
    assert graph.entity_name(babbage) == "babbage"  # no label: the IRI's local name
    assert [t.text() for t in graph.triples([ada], 5)[ada]] == [
        "<Augusta Ada King | worked with | babbage>"
    ]


def test_turtle_import_and_relation_local_names(tmp_path):
    pytest.importorskip("rdflib", reason="the rdf extra (rdflib) is not installed")
    from quillian.components.kg.rdf import import_rdf

    path = write(tmp_path / "g.ttl", TTL)
    report = import_rdf([path], tmp_path / "kg", KeywordEmbedder())
    assert report.final == {"entities": 2, "relations": 2, "triples": 2}
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    london = graph.lookup("london")[0]
    assert graph.description(london) == "Capital of England"
    assert graph.triples([london], 3)[london][0].relation == "capitalOf"


def test_turtle_syntax_error_is_an_input_error(tmp_path):
    pytest.importorskip("rdflib", reason="the rdf extra (rdflib) is not installed")
    from quillian.components.kg.rdf import import_rdf

    path = write(tmp_path / "bad.ttl", "@prefix ex: <http://ex.org/> .\nex:a ex:b .\n")
    with pytest.raises(InputError, match=r"bad\.ttl"):
        import_rdf([path], tmp_path / "kg", KeywordEmbedder())
    assert not (tmp_path / "kg").exists()


# --- WordNet ----------------------------------------------------------------------------

HEADER = "  1 This software and database is being provided to you, the LICENSEE\n"
NOUNS = (
    HEADER + "00000001 03 n 01 entity 0 001 ~ 00000002 n 0000 | that which exists  \n"
    "00000002 03 n 02 dog 0 domestic_dog 0 002 @ 00000001 n 0000 %p 00000003 n 0000 "
    '| a domesticated canine; "the dog barked"  \n'
    "00000003 05 n 01 flag 0 002 #p 00000002 n 0000 ! 00000004 n 0000 | a tail  \n"
    "00000004 05 n 01 broken 0 003 @ 00000001 n 00\n"
    "00000005 03 n 01 stray 0 001 @ 00000099 n 0000 | points nowhere  \n"
)
VERBS = "00000010 29 v 01 bark 0 001 @ 00000011 v 0000 01 + 02 00 | make a barking sound  \n"
VERBS += "00000011 29 v 01 utter 0 001 ~ 00000010 v 0000 01 + 02 00 | make a sound  \n"
ADJS = "00000020 00 s 01 handy 0 000 | easy to reach  \n00000021 00 a 01 able(p) 0 000 | can  \n"


def test_wordnet_format_is_parsed_by_hand(tmp_path):
    root = tmp_path / "wn"
    for name, text in (("noun", NOUNS), ("verb", VERBS), ("adj", ADJS), ("adv", "")):
        write(root / f"data.{name}", text)
    report = import_wordnet(tmp_path / "kg", KeywordEmbedder(), root)
    issues = report.issues
    assert [i.line for i in issues.examples["malformed"]] == [5]  # pointer list cut short
    (unknown,) = issues.examples["unknown-entity"]
    assert (unknown.line, unknown.detail) == (6, "n00000099 is referenced, never defined")
    assert issues.counts["pointer-ignored"] == 1  # the antonym '!'
    graph = ImportedGraph.open(tmp_path / "kg", KeywordEmbedder())
    dog = by_id(graph, "n00000002")
    assert graph.entity_name(dog) == "dog"
    assert graph.aliases(dog) == ["domestic dog"]
    assert graph.description(dog) == 'a domesticated canine; "the dog barked"'
    assert [t.text() for t in graph.triples([dog], 5)[dog]] == [
        "<dog | is a kind of | entity>",
        "<dog | has part | flag>",
    ]
    bark = by_id(graph, "v00000010")
    assert graph.triples([bark], 5)[bark][0].text() == "<bark | is a kind of | utter>"
    assert graph.lookup("Domestic Dog") == [dog]
    # adjectives without pointers head no triple: preprocessing drops them
    assert (
        graph.index_of("a00000020") == -1
        and "a00000021" in report.dropped.examples_no_outgoing_triple
    )


WORDNET = Path("/usr/share/wordnet")


@pytest.mark.skipif(
    not (WORDNET / "data.noun").exists(),
    reason="WordNet is not installed (apt-get install -y wordnet-base)",
)
def test_real_wordnet_imports(tmp_path):
    report = import_wordnet(tmp_path / "kg", HashEmbedder(16), WORDNET)
    assert report.read["entities"] > 117_000
    assert not report.issues.problems()
    graph = ImportedGraph.open(tmp_path / "kg", HashEmbedder(16))
    dog = by_id(graph, "n02084071")
    assert dog in graph.lookup("Canis familiaris")
    texts = [t.text() for t in graph.triples([dog], 50)[dog]]
    assert "<dog | is a kind of | canine>" in texts
    assert "<dog | is a member of | Canis>" in texts


# --- building blocks ------------------------------------------------------------------


@pytest.mark.parametrize("pack_limit", [2**62, 0], ids=["packed-key", "column-sort"])
def test_build_rows_dedupes_and_interleaves_relations(monkeypatch, pack_limit):
    import quillian.components.kg.writer as writer

    monkeypatch.setattr(writer, "PACK_LIMIT", pack_limit)
    heads = np.array([0, 0, 0, 0, 1, 0])
    rels = np.array([1, 1, 0, 1, 0, 1])
    tails = np.array([3, 2, 4, 3, 0, 5])
    indptr, row_rels, row_tails, repeated = build_rows(heads, rels, tails, 6, 2)
    assert repeated == 1
    assert indptr.tolist() == [0, 4, 5, 5, 5, 5, 5]
    # entity 0: relation 0 (tail 4), relation 1 (tail 2), then relation 1's tails 3, 5
    assert list(zip(row_rels.tolist(), row_tails.tolist(), strict=True)) == [
        (0, 4),
        (1, 2),
        (1, 3),
        (1, 5),
        (0, 0),
    ]


def test_ragged_file_gathers_in_any_order_across_chunks(tmp_path, monkeypatch):
    import quillian.components.kg.staging as staging

    monkeypatch.setattr(staging, "GATHER_BYTES", 4)
    ragged = RaggedFile(tmp_path / "r.bin")
    ragged.append([b"alpha", b"", "bêta".encode()])
    ragged.append([b"gamma"])
    ragged.gather(np.array([3, -1, 2, 0, 1]), tmp_path, "t")
    table = TextTable.load(tmp_path, "t")
    assert [table[i] for i in range(len(table))] == ["gamma", "", "bêta", "alpha", ""]
    assert table.range(1, 4) == ["", "bêta", "alpha"]


def test_lookup_sorted_finds_positions_or_minus_one():
    keys = np.array([b"Q1", b"Q10", b"Q2"])
    assert lookup_sorted(keys, np.array([b"Q2", b"Q3", b"Q1", b"Q10"])).tolist() == [2, -1, 0, 1]


def test_synthetic_release_imports(tmp_path):
    from kg_synthetic import write_wikidata5m_like

    files = write_wikidata5m_like(tmp_path / "syn", 2000, 8000, 20, chunk=700)
    assert files.triples[0].read_text(encoding="utf-8").count("\n") == 8000
    report = import_wikidata5m(files, tmp_path / "kg", HashEmbedder(8))
    assert not report.issues.problems()
    assert 1700 < report.final["entities"] < 2000  # a few percent dropped, as in the paper
    assert report.final["relations"] == 20


# --- command line -----------------------------------------------------------------------


def run_cli(*argv: str) -> int:
    return main(list(argv))


def test_cli_import_and_show(tmp_path, capsys):
    root = release(tmp_path / "w5m")
    out = str(tmp_path / "kg")
    assert run_cli("kg", "import", "wikidata5m", str(root), "--out", out, "--embedder", "hash") == 0
    printed = capsys.readouterr().out
    assert "preprocessing dropped 1 entities without a description" in printed
    assert run_cli("kg", "show", out, "dna", "--triples", "2") == 0
    shown = capsys.readouterr().out
    assert "Douglas Adams [Q1]" in shown
    assert "<Douglas Adams | educated at | Cambridge>" in shown
    assert run_cli("kg", "show", out, "Q2") == 0
    assert "London [Q2]" in capsys.readouterr().out
    assert run_cli("kg", "show", out, "Atlantis") == 1
    capsys.readouterr()
    assert run_cli("kg", "import", "wikidata5m", "--entities", str(root), "--out", out + "2") == 2
    assert "--entities, --triples and --descriptions" in capsys.readouterr().err
