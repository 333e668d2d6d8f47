"""Incremental linking (:mod:`quillian.index.linking`) equals linking from scratch after
every step of random add and delete sequences, and its delta names exactly the chunks
whose filtered extraction changed.

The corpora are tiny and random: titles built from a few shared words (so titles occur
in each other's texts, and ``"Dark River (1990 film)"``'s alias becomes unsafe when
``"Dark River (2017 film)"`` arrives and safe again when it goes), one-word person
names used by a few documents each (so they cross the ambiguity threshold both ways),
documents of one or two chunks. The spaCy extractor links them without its model: the
per-chunk mentions are written by the test (``predicates=False``: no parse).
"""

import dataclasses
import json
import logging
import random
import re
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction, SurfaceLinker
from quillian.components.extraction.filters import drop_ambiguous_names
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.extraction.text import parse_title, title_aliases, title_keys
from quillian.components.retrieval.bm25_incremental import update_bm25
from quillian.engine import IndexSettings, delete_documents, index_documents
from quillian.index import linking
from quillian.index.chunk_table import CatalogChanges, ChunkTable
from quillian.index.linking import BUCKETS, link_corpus, linked_extractions
from quillian.index.stages import chunk_text
from quillian.stores.embedded.sqlite import SqliteKeyValueStore
from quillian.types import Chunk, Document, normalize_name

MAX_DOCS = 2
TITLES = [
    "Dark River (1990 film)",
    "Dark River (2017 film)",
    "Dark River",
    "Coney Island Baby (film)",
    "Coney Island Baby",
    "Red Moon",
    "The Red Moon Rising",
    "John Smith",
    "Paris",
    "Love",
    "Island Baby, Song",
    "Moon River (album)",
    "",
]
WORDS = ["John", "Paris", "Love", "Moon", "River", "Island", "the", "and", "was", "Baby"]
PEOPLE = {"John": "PERSON", "Paris": "PERSON", "Love": "WORK_OF_ART", "Moon": "GPE"}


def _text(rng: random.Random) -> str:
    """Sentences of shared words and other titles' names."""
    sentences = []
    for _ in range(rng.randint(1, 3)):
        parts = []
        for _ in range(rng.randint(2, 6)):
            if rng.random() < 0.4:
                title = rng.choice([t for t in TITLES if t])
                parts.append(rng.choice([title, title.split(" (")[0]]))
            else:
                parts.append(rng.choice(WORDS))
        sentences.append(" ".join(parts) + ".")
    return " ".join(sentences)


def _local(chunk: Chunk) -> Extraction:
    """The mentions a NER model could have found: each person-like word, typed."""
    entities = tuple(
        ExtractedEntity(m.group(), PEOPLE[m.group()], start=m.start(), end=m.end())
        for m in re.finditer(r"\b(?:John|Paris|Love|Moon)\b", chunk.text)
    )
    return Extraction(chunk.id, chunk.doc_id, entities)


def _pool(seed: int, size: int) -> dict[str, list[Chunk]]:
    """``size`` random documents (one or two chunks each), by document id."""
    rng = random.Random(seed)
    docs = {}
    for n in range(size):
        doc_id = f"doc-{n:02d}"
        title = rng.choice(TITLES)
        docs[doc_id] = [
            Chunk(doc_id, i, text, 0, len(text), title)
            for i, text in enumerate(_text(rng) for _ in range(rng.choice([1, 1, 2])))
        ]
    return docs


class _Fixed:
    """An extractor that is not a linking one: fixed per-chunk results (topics with the
    alias candidate of their title, which the build settles)."""

    name = "fixed"

    def __init__(self, results: dict[str, Extraction]) -> None:
        self.results = results

    def extract(self, chunks):
        return [self.results[c.id] for c in chunks]


def _expected(chunks, extractor, stored):
    settled = linked_extractions(chunks, extractor, [stored[c.id] for c in chunks])
    return settled, drop_ambiguous_names(settled, max_docs=MAX_DOCS)


def _context(chunks, extractor):
    """The safe aliases and surfaces over the chunks' titles, made from scratch."""
    titles = [c.title for c in chunks if c.title]
    if isinstance(extractor, SurfaceLinker):
        aliases, surfaces = extractor.link_context(titles)
        return dict(aliases), dict(surfaces)
    return title_aliases(titles), {}


def _kept_counts(kv, extractor):
    """How many chunks hold each title, as the linking state keeps it."""
    space = f"linktitlecounts:{extractor.name}"
    keys = list(kv.keys(space))
    return Counter({k: int(v) for k, v in zip(keys, kv.get_many(space, keys), strict=True)})


def _kept_context(kv, extractor):
    """The safe aliases and surfaces the linking state keeps in their buckets (patched
    by updates)."""
    kept = []
    for space in (f"linkaliases:{extractor.name}", f"linksurfaces:{extractor.name}"):
        keys = list(kv.keys(space))
        assert len(keys) == BUCKETS
        merged: dict[str, str] = {}
        for raw in kv.get_many(space, keys):
            merged.update(json.loads(raw))
        kept.append(merged)
    return tuple(kept)


def _catalogued(chunks, pool, doc_id, present, n, via):
    """``chunks`` as a table the chunk catalog could give after ``doc_id`` came or went
    at step ``n``: ``via`` "delta" patched from step n - 1's table, "whole" read whole,
    "other" patched from a table the state was not linked over, "none" no catalog."""
    table = ChunkTable.of(chunks)
    was = [] if doc_id in present else pool[doc_id]
    now = pool[doc_id] if doc_id in present else []
    before, after = {c.id: c.title for c in was}, {c.id: c.title for c in now}
    if via == "delta":
        table.catalog = CatalogChanges(f"table-{n}", f"table-{n - 1}", before, after)
    elif via == "whole":
        table.catalog = CatalogChanges(f"table-{n}")
    elif via == "other":
        table.catalog = CatalogChanges(f"table-{n}", f"elsewhere-{n - 1}", before, after)
    return table


def _texts_of(chunks):
    """What a build reads from its last graph tables: the texts of the chunks asked for
    among ``chunks`` (every chunk of the test, those that went too)."""
    texts = {c.id: c.text for c in chunks}
    return lambda ids: {i: texts[i] for i in ids if i in texts}


def _run(steps, pool, extractor, stored, workdir: Path, bm25_every: int, via=("none",)) -> int:
    """Apply ``steps`` (document ids to add or delete), the chunks given as
    :func:`_catalogued` tables (``via``, in turn); check every step. Returns how many
    chunks were linked anew in all (the incremental part's work)."""
    kv = SqliteKeyValueStore(workdir / "store.sqlite")
    present: set[str] = set()
    previous: dict[str, Extraction] | None = None
    relinked = 0
    try:
        for n, doc_id in enumerate(steps):
            if n % 2:  # as another process would: the context read from its buckets
                linking._CONTEXTS.clear()
            present ^= {doc_id}
            chunks = sorted(
                (c for d in present for c in pool[d]), key=lambda c: (c.doc_id, c.index)
            )
            chunks = _catalogued(chunks, pool, doc_id, present, n, via[n % len(via)])
            got = link_corpus(
                kv,
                chunks,
                extractor,
                lambda some: [stored[c.id] for c in some],
                max_docs=MAX_DOCS,
                bm25=workdir / "bm25",
                gone_texts=_texts_of(c for cs in pool.values() for c in cs),
            )
            settled, filtered = _expected(chunks, extractor, stored)
            assert _kept_context(kv, extractor) == _context(chunks, extractor)
            assert _kept_counts(kv, extractor) == Counter(
                " ".join(c.title.split()) for c in chunks if c.title.strip()
            )
            assert got.extractions == settled
            assert got.filtered == filtered
            now = {e.chunk_id: e for e in filtered}
            if previous is None:
                assert got.delta.fresh and got.delta.added == set(now)
            else:
                assert not got.delta.fresh
                relinked += got.relinked
                assert got.delta.added == now.keys() - previous.keys()
                assert got.delta.removed == previous.keys() - now.keys()
                assert got.delta.changed == {
                    i for i in now.keys() & previous.keys() if now[i] != previous[i]
                }
            previous = now
            if bm25_every and n % bm25_every == 0:  # else a build stopped before its BM25
                update_bm25(
                    workdir / "bm25",
                    [c.id for c in chunks],
                    lambda positions, chunks=chunks: [chunk_text(chunks[i]) for i in positions],
                )
    finally:
        kv.close()
    return relinked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(3, 10),
    ops=st.lists(st.integers(0, 9), min_size=1, max_size=12),
    bm25_every=st.sampled_from([0, 1, 2]),
    via=st.lists(st.sampled_from(["delta", "whole", "other", "none"]), min_size=1, max_size=4),
)
def test_spacy_links_in_steps_equal_linking_from_scratch(seed, size, ops, bm25_every, via):
    pool = _pool(seed, size)
    extractor = SpacyExtractor(predicates=False)
    stored = {c.id: _local(c) for chunks in pool.values() for c in chunks}
    steps = [f"doc-{op % size:02d}" for op in ops]
    with tempfile.TemporaryDirectory() as tmp:
        _run(steps, pool, extractor, stored, Path(tmp), bm25_every, via)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(3, 10),
    ops=st.lists(st.integers(0, 9), min_size=1, max_size=12),
    via=st.lists(st.sampled_from(["delta", "whole", "none"]), min_size=1, max_size=3),
)
def test_fixed_extractions_in_steps_equal_settling_from_scratch(seed, size, ops, via):
    pool = _pool(seed, size)
    everything = [c for chunks in pool.values() for c in chunks]
    spacy = SpacyExtractor(predicates=False)
    linked = spacy.link(everything, [_local(c) for c in everything], [c.title for c in everything])
    stored = {e.chunk_id: e for e in linked}  # topics carry their alias: settling decides
    steps = [f"doc-{op % size:02d}" for op in ops]
    with tempfile.TemporaryDirectory() as tmp:
        _run(steps, pool, _Fixed(stored), stored, Path(tmp), 1, via)


def _chunk(doc_id, title, text):
    return Chunk(doc_id, 0, text, 0, len(text), title)


def test_a_new_title_relinks_only_the_chunks_naming_it(tmp_path):
    extractor = SpacyExtractor(predicates=False)
    base = [
        _chunk(f"d{i}", f"Topic Number {i}", f"Filler text {i} about nothing.") for i in range(30)
    ]
    base.append(_chunk("e1", "Other Page", "It cites Red Moon Rising twice: Red Moon Rising."))
    stored = {c.id: _local(c) for c in base}
    kv = SqliteKeyValueStore(tmp_path / "store.sqlite")
    seen = []  # every chunk linked: what the last build's tables held

    def link(chunks):
        chunks = sorted(chunks, key=lambda c: (c.doc_id, c.index))
        seen.extend(chunks)
        update = link_corpus(
            kv, chunks, extractor, lambda s: [stored[c.id] for c in s], max_docs=MAX_DOCS,
            bm25=tmp_path / "bm25", gone_texts=_texts_of(seen),
        )  # fmt: skip
        update_bm25(tmp_path / "bm25", [c.id for c in chunks],
                    lambda ps: [chunk_text(chunks[i]) for i in ps])  # fmt: skip
        return update

    assert link(base).relinked == len(base)
    added = _chunk("f1", "Red Moon Rising", "Red Moon Rising is a film.")
    stored[added.id] = _local(added)
    update = link([*base, added])
    assert update.relinked == 2  # the new chunk and the one naming its title
    assert update.delta.added == {added.id}
    assert update.delta.changed == {base[-1].id}
    update = link(base)  # deleted again: only the chunk that named it
    assert update.relinked == 1 and update.delta.removed == {added.id}
    kv.close()


def test_records_are_compressed_against_their_chunks_text(tmp_path, caplog):
    """A record is compressed with its chunk's text as zlib's dictionary, far smaller
    than alone, and read back with it; one written before, compressed alone, reads as
    it is; one of a chunk that went whose text the build no longer has makes the update
    link every chunk, as any record that does not read, and ends the same."""
    extractor = SpacyExtractor(predicates=False)
    words = "John met Love in Paris {} times in {}, and Moon wrote of it the year {} came."
    base = [
        _chunk(f"d{i}", f"Topic {i}", " ".join(words.format(i, j, 1900 + i * j) for j in range(8)))
        for i in range(6)
    ]
    base.sort(key=lambda c: (c.doc_id, c.index))
    stored = {c.id: _local(c) for c in base}
    kv = SqliteKeyValueStore(tmp_path / "store.sqlite")

    def link(some, gone_texts):
        return link_corpus(
            kv, some, extractor, lambda s: [stored[c.id] for c in s], max_docs=MAX_DOCS,
            gone_texts=gone_texts,
        )  # fmt: skip

    link(base, _texts_of(base))
    space = "linked:spacy"
    raw = dict(zip((c.id for c in base), kv.get_many(space, [c.id for c in base]), strict=True))
    record = linking._Record(
        base[0].id, raw[base[0].id], linking._Texts(ChunkTable.of(base), {}, linking._none)
    )
    assert record.needs_text
    title, packed = raw[base[0].id][9:].split(b"\n", 1)
    pair = zlib.decompressobj(zdict=base[0].text.encode()).decompress(packed)
    assert len(packed) < len(zlib.compress(pair))
    # the first chunk's record as written before: compressed alone
    old = title + b"\n" + zlib.compress(pair)
    kv.put_many(space, {base[0].id: b"%08x\n" % linking._checksum(base[0].id, old) + old})
    update = link(base[1:], _texts_of(base))  # the first chunk goes: its record is read
    settled, filtered = _expected(base[1:], extractor, stored)
    assert update.delta.removed == {base[0].id} and not update.delta.fresh
    assert update.extractions == settled and update.filtered == filtered
    caplog.set_level(logging.WARNING)
    update = link(base[2:], None)  # the second goes, its text not given
    assert update.delta.fresh and "its record's dictionary, is gone" in caplog.text
    settled, filtered = _expected(base[2:], extractor, stored)
    assert update.extractions == settled and update.filtered == filtered
    kv.close()


def test_an_update_reads_only_the_records_it_needs(tmp_path, monkeypatch):
    """The stored records of chunks an update leaves alone are read from the store (and
    their checksums checked) when a stage first reads them, not before; a graph built
    from the delta reads only the chunks it names."""
    import quillian.index.linking as linking

    extractor = SpacyExtractor(predicates=False)
    base = [
        _chunk(f"d{i}", f"Topic Number {i}", f"Filler text {i} about nothing.") for i in range(30)
    ]
    stored = {c.id: _local(c) for c in base}
    kv = SqliteKeyValueStore(tmp_path / "store.sqlite")

    def link(chunks):
        chunks = sorted(chunks, key=lambda c: (c.doc_id, c.index))
        return link_corpus(
            kv, chunks, extractor, lambda s: [stored[c.id] for c in s], max_docs=MAX_DOCS,
            gone_texts=_texts_of(base),
        )  # fmt: skip

    link(base)
    read, decoded = [], []
    real_read, real_decode = kv.get_many, linking.extraction_from_json
    monkeypatch.setattr(
        kv, "get_many", lambda space, keys: read.extend(keys) or real_read(space, keys)
    )
    monkeypatch.setattr(
        linking, "extraction_from_json", lambda raw: decoded.append(raw) or real_decode(raw)
    )
    added = _chunk("e1", "Red Moon Rising", "Red Moon Rising is a film.")
    stored[added.id] = _local(added)
    update = link([*base, added])
    base_ids = {c.id for c in base}
    assert update.delta.added == {added.id} and not decoded and not base_ids & set(read)
    corpus = sorted([*base, added], key=lambda c: (c.doc_id, c.index))
    assert update.filtered[corpus.index(added)].chunk_id == added.id and not decoded  # computed
    settled, filtered = _expected(corpus, extractor, stored)
    assert update.filtered[0] == filtered[0] and len(decoded) == 1
    assert base_ids & set(read) == {corpus[0].id}
    assert update.extractions == settled and update.filtered == filtered
    kv.close()


def _meta(kv) -> dict:
    """The linking state's meta (spaCy's)."""
    (raw,) = kv.get_many("linkmeta:spacy", ["state"])
    return json.loads(raw)


def _put_meta(kv, meta: dict) -> None:
    """Put ``meta`` in the place of the linking state's (as an older build left it)."""
    kv.put_many("linkmeta:spacy", {"state": json.dumps(meta).encode()})


def _four_johns(tmp_path, n=4, store=SqliteKeyValueStore):
    """Four (``n``) chunks naming John, their stored results, a key-value store (of the
    class ``store``) and the linking of some of the chunks over it."""
    extractor = SpacyExtractor(predicates=False)
    chunks = [_chunk(f"d{i}", f"Topic {i}", f"Text {i} about John.") for i in range(n)]
    chunks.sort(key=lambda c: (c.doc_id, c.index))
    stored = {c.id: _local(c) for c in chunks}
    kv = store(tmp_path / "store.sqlite")

    def link(some):
        return link_corpus(
            kv, some, extractor, lambda s: [stored[c.id] for c in s], max_docs=MAX_DOCS,
            gone_texts=_texts_of(chunks),
        )  # fmt: skip

    return chunks, stored, kv, link


def test_a_damaged_record_is_found_where_it_is_read(tmp_path, caplog):
    """A record's checksum covers its key: one copied under another chunk's key reads as
    damaged. Read by a stage after the update, only that chunk is linked again and its
    record stored anew; read by the update itself (here: its chunk is removed, so the
    record's names are counted out), every chunk is linked again."""
    chunks, stored, kv, linked = _four_johns(tmp_path)

    def link(some):
        got = linked(some)
        settled, filtered = _expected(some, SpacyExtractor(predicates=False), stored)
        assert got.extractions == settled and got.filtered == filtered
        return got

    def damage():
        (first,) = kv.get_many("linked:spacy", [chunks[0].id])
        assert first is not None
        kv.put_many("linked:spacy", {chunks[1].id: first})

    link(chunks)
    damage()
    with caplog.at_level(logging.WARNING, logger="quillian.index.linking"):
        again = link(chunks)  # read by the comparison, after the update
    assert not again.delta.fresh and len(caplog.records) == 1
    assert "checksum" in caplog.text and "linking its chunk again" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="quillian.index.linking"):
        assert not link(chunks).delta.fresh  # healed: stored anew
    assert not caplog.records
    damage()
    with caplog.at_level(logging.WARNING, logger="quillian.index.linking"):
        gone = link([c for c in chunks if c != chunks[1]])
    assert gone.delta.fresh and "checksum" in caplog.text and "linking every chunk" in caplog.text
    kv.close()


def _kept_titles(kv):
    """The chunk ids and titles the linking state keeps, from its buckets."""
    keys = list(kv.keys("linkchunks:spacy"))
    titles = {}
    for raw in kv.get_many("linkchunks:spacy", keys):
        titles.update(json.loads(raw))
    return titles


@pytest.mark.parametrize("kept", ["lists", "records"])
def test_an_older_state_is_read_once_and_then_kept_in_buckets(tmp_path, kept):
    """An older build's meta keeps every chunk id, with the titles ("lists") or without
    them (their records keep them: all are read, once). The update links only the chunk
    whose title changed; the state written then keeps the ids and titles in buckets,
    and the meta no list."""
    chunks, stored, kv, link = _four_johns(tmp_path)
    extractor = SpacyExtractor(predicates=False)

    def meta():
        (raw,) = kv.get_many("linkmeta:spacy", ["state"])
        return json.loads(raw)

    link(chunks)
    old = meta()
    assert old.pop("chunk_buckets") == BUCKETS
    old["chunks"] = [c.id for c in chunks]
    if kept == "lists":
        old["titles"] = [c.title for c in chunks]
    kv.put_many("linkmeta:spacy", {"state": json.dumps(old).encode()})
    kv.delete_many("linkchunks:spacy", list(kv.keys("linkchunks:spacy")))
    retitled = [*chunks[:3], dataclasses.replace(chunks[3], title="Topic Three")]  # same id
    stored[retitled[3].id] = _local(retitled[3])
    update = link(retitled)
    assert not update.delta.fresh and update.relinked == 1
    settled, filtered = _expected(retitled, extractor, stored)
    assert update.extractions == settled and update.filtered == filtered
    assert "chunks" not in meta() and "titles" not in meta()
    assert _kept_titles(kv) == {c.id: c.title for c in retitled}
    assert len(list(kv.keys("linkchunks:spacy"))) == BUCKETS
    kv.close()


class _Writes(SqliteKeyValueStore):
    """A key-value store that records the keys written to each namespace."""

    def __init__(self, path):
        super().__init__(path)
        self.written: dict[str, list[str]] = {}

    def put_many(self, namespace, items):
        self.written.setdefault(namespace, []).extend(items)
        super().put_many(namespace, items)


def test_an_update_writes_the_buckets_of_what_it_changed(tmp_path):
    """A build writes every bucket of chunk ids and titles; an update that adds a
    document, deletes it or changes its title writes only that chunk's bucket, and its
    delta names the chunk retitled."""
    chunks, stored, kv, linked = _four_johns(tmp_path, 6, _Writes)

    def link(some):
        kv.written.clear()
        got = linked(some)
        settled, filtered = _expected(some, SpacyExtractor(predicates=False), stored)
        assert got.extractions == settled and got.filtered == filtered
        assert not got.delta.fresh or len(kv.written["linkchunks:spacy"]) == BUCKETS
        assert _kept_titles(kv) == {c.id: c.title for c in some}
        return sorted(kv.written.get("linkchunks:spacy", [])), got.delta.retitled

    assert len(link(chunks[:5])[0]) == BUCKETS
    one = [f"{zlib.crc32(chunks[5].id.encode()) % BUCKETS:04d}"]
    assert link(chunks) == (one, set())  # added
    retitled = [*chunks[:5], dataclasses.replace(chunks[5], title="Topic Six")]
    stored[retitled[5].id] = _local(retitled[5])
    assert link(retitled) == (one, {chunks[5].id})  # its title changed: the delta says so
    assert link(retitled[:5]) == (one, set())  # deleted
    assert link(retitled[:5]) == ([], set())  # nothing changed
    kv.close()


@pytest.mark.parametrize("process", ["same", "another"])
def test_an_update_writes_the_context_buckets_of_what_it_changed(tmp_path, process):
    """The safe aliases and surfaces are kept in buckets: a build writes all of them,
    an update only the buckets of the keys it changed (none where no title came or
    went), whether it takes them from this process's memory or reads them; the meta
    does not hold them."""
    chunks, stored, kv, linked = _four_johns(tmp_path, 6, _Writes)
    extractor = SpacyExtractor(predicates=False)
    spaces = ("linkaliases:spacy", "linksurfaces:spacy")

    def link(some):
        if process == "another":
            linking._CONTEXTS.clear()
        kv.written.clear()
        got = linked(some)
        settled, filtered = _expected(some, extractor, stored)
        assert got.extractions == settled and got.filtered == filtered
        assert _kept_context(kv, extractor) == _context(some, extractor)
        return [len(kv.written.get(space, [])) for space in spaces]

    assert link(chunks[:5]) == [BUCKETS, BUCKETS]
    assert not {"aliases", "surfaces"} & _meta(kv).keys()
    films = [
        *chunks[:4],
        dataclasses.replace(chunks[4], title="Dark River (1990 film)"),
        dataclasses.replace(chunks[5], title="Dark River (2017 film)"),
    ]
    for c in films[4:]:
        stored[c.id] = _local(c)
    written = link(films[:5])  # "Dark River" comes as an alias, its surface with it
    assert 0 < written[0] <= 2 and 0 < written[1] <= 4
    written = link(films)  # the alias no longer safe: out of its bucket
    assert 0 < written[0] <= 2
    assert link(films) == [0, 0]  # nothing changed
    kv.close()


def test_an_older_meta_holding_the_context_is_read_once_and_then_kept_in_buckets(tmp_path):
    chunks, stored, kv, link = _four_johns(tmp_path)
    extractor = SpacyExtractor(predicates=False)
    link(chunks)
    old = _meta(kv)
    del old["context_buckets"]
    old["aliases"], old["surfaces"] = _kept_context(kv, extractor)
    _put_meta(kv, old)
    for space in ("linkaliases:spacy", "linksurfaces:spacy"):
        kv.delete_many(space, list(kv.keys(space)))
    linking._CONTEXTS.clear()
    retitled = [*chunks[:3], dataclasses.replace(chunks[3], title="Dark River (1990 film)")]
    stored[retitled[3].id] = _local(retitled[3])
    update = link(retitled)
    assert not update.delta.fresh
    settled, filtered = _expected(retitled, extractor, stored)
    assert update.extractions == settled and update.filtered == filtered
    assert _kept_context(kv, extractor) == _context(retitled, extractor)
    assert "aliases" not in _meta(kv)
    kv.close()


def test_a_state_kept_without_the_title_book_makes_it_once(tmp_path):
    """An older build's state has no title key records: the update makes them from the
    titles its meta keeps, then patches them; its aliases and surfaces equal those made
    from scratch."""
    chunks, stored, kv, link = _four_johns(tmp_path)
    extractor = SpacyExtractor(predicates=False)
    link(chunks)
    meta = _meta(kv)
    del meta["title_book"]
    _put_meta(kv, meta)
    kv.delete_many("linktitles:spacy", list(kv.keys("linktitles:spacy")))
    retitled = [*chunks[:3], dataclasses.replace(chunks[3], title="Topic Three (film)")]
    stored[retitled[3].id] = _local(retitled[3])
    update = link(retitled)
    assert not update.delta.fresh
    assert _kept_context(kv, extractor) == _context(retitled, extractor)
    claimed = {k for c in retitled for k in title_keys(parse_title(c.title)) if c.title}
    assert set(kv.keys("linktitles:spacy")) == claimed
    kv.close()


def test_a_state_kept_without_the_title_counts_makes_them_once(tmp_path, monkeypatch):
    """An older build's state keeps no title counts: the update counts every title
    (reading every bucket, as without the catalog), and the next one takes the
    catalog's delta and patches them."""
    import quillian.index.linking as linking

    chunks, stored, kv, link = _four_johns(tmp_path)
    extractor = SpacyExtractor(predicates=False)
    read: list[int] = []
    real = linking._Linker._read_buckets
    monkeypatch.setattr(
        linking._Linker,
        "_read_buckets",
        lambda s, space, which: (
            (space == s.chunks_space and read.append(len(which))) or real(s, space, which)
        ),
    )

    def table(chunks, n, before=(), after=()):
        out = ChunkTable.of(chunks)
        out.catalog = CatalogChanges(
            f"table-{n}",
            f"table-{n - 1}" if n else None,
            {c.id: c.title for c in before},
            {c.id: c.title for c in after},
        )
        return out

    link(table(chunks, 0))
    meta = _meta(kv)
    del meta["title_counts"]
    _put_meta(kv, meta)
    kv.delete_many("linktitlecounts:spacy", list(kv.keys("linktitlecounts:spacy")))
    steps = [
        [*chunks[:3], dataclasses.replace(chunks[3], title="Topic Three (film)")],
        [*chunks[:2], dataclasses.replace(chunks[2], title="Topic Three (film)")],
    ]
    previous = chunks
    for n, now in enumerate(steps, start=1):
        stored.update((c.id, _local(c)) for c in now)
        changed = [i for i in range(len(now)) if now[i].title != previous[i].title]
        gone = previous[len(now) :]
        before = [previous[i] for i in changed] + gone
        assert not link(table(now, n, before, [now[i] for i in changed])).delta.fresh
        expected = Counter(" ".join(c.title.split()) for c in now if c.title.strip())
        assert _kept_counts(kv, extractor) == expected
        assert _kept_context(kv, extractor) == _context(now, extractor)
        previous = now
    assert read == [BUCKETS, 2]  # every bucket as the counts are made, then the delta
    kv.close()


def test_damaged_or_unfinished_state_means_linking_everything(tmp_path, caplog):
    extractor = SpacyExtractor(predicates=False)
    pool = _pool(7, 6)
    chunks = sorted((c for cs in pool.values() for c in cs), key=lambda c: (c.doc_id, c.index))
    stored = {c.id: _local(c) for c in chunks}
    kv = SqliteKeyValueStore(tmp_path / "store.sqlite")

    def link(some, max_docs=MAX_DOCS):
        return link_corpus(
            kv, some, extractor, lambda s: [stored[c.id] for c in s], max_docs=max_docs,
            gone_texts=_texts_of(chunks),
        )  # fmt: skip

    def meta_with(**values):
        _put_meta(kv, {**_meta(kv), **values})

    link(chunks)
    johns = [c for c in chunks if any(e.name == "John" for e in stored[c.id].entities)]
    assert johns
    rest = [c for c in chunks if c != johns[0]]
    gone = " ".join(next(c.title for c in chunks if c.title).split())
    untitled = [c for c in chunks if " ".join(c.title.split()) != gone]
    damages = (
        # a record the update reads: its chunk goes
        (lambda: kv.put_many("linked:spacy", {chunks[0].id: b"not json"}), chunks[1:]),
        (lambda: kv.put_many("linkmeta:spacy", {"state": b"[]"}), chunks),
        # the safe aliases or surfaces: a bucket that does not read, or is missing,
        # or an older meta that holds them itself, damaged
        (lambda: kv.put_many("linkaliases:spacy", {"0000": b"[]"}), chunks),
        (lambda: kv.delete_many("linksurfaces:spacy", ["0003"]), chunks),
        (lambda: meta_with(context_buckets=None, aliases=[], surfaces={}), chunks),
        # a bucket of chunk ids and titles that does not read, or is missing
        (lambda: kv.put_many("linkchunks:spacy", {"0000": b"[]"}), chunks),
        (lambda: kv.put_many("linkchunks:spacy", {"0001": b"{"}), chunks),
        (lambda: kv.delete_many("linkchunks:spacy", ["0002"]), chunks),
        (lambda: meta_with(chunk_buckets=BUCKETS + 1), chunks),
        # a build stopped in its stages, before it committed the state
        (lambda: kv.delete_many("linkmeta:spacy", ["complete"]), chunks),
        # a name record is read when a change needs it: a chunk naming John goes
        (lambda: kv.put_many("linknames:spacy", {"john": b"[1]"}), rest),
        # a title key record likewise: every chunk of one title goes
        (lambda: kv.put_many("linktitles:spacy", {normalize_name(gone): b"[1]"}), untitled),
    )
    for damage, some in damages:
        link(chunks)
        damage()
        linking._CONTEXTS.clear()  # as another process finds them
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="quillian.index.linking"):
            got = link(some)
        settled, filtered = _expected(some, extractor, stored)
        assert got.delta.fresh and got.extractions == settled and got.filtered == filtered
        assert len(caplog.records) == 1 and "linking every chunk" in caplog.text
    # another threshold (or extractor setting) recomputes too, quietly
    other = link(chunks, max_docs=5)
    settled, _ = _expected(chunks, extractor, stored)
    assert other.delta.fresh and other.filtered == drop_ambiguous_names(settled, max_docs=5)
    kv.close()


# --- whole builds: the spaCy model, every storage backend -----------------------------

#: "Dark River (2017 film)" makes "Dark River (1990 film)"'s alias unsafe, and safe again
#: when deleted; "John" names a different person in four documents (more than the
#: threshold of three) until one goes; later titles are mentioned by earlier texts.
STORY = {
    "Dark River (1990 film)": "Dark River is a 1990 drama film directed by Mary Smith. "
    "John wrote its score. It was shot in Wales.",
    "The Trespasser": "The Trespasser is a short film by Clio Barnard about Dark River. "
    "John was its editor.",
    "Emain Macha": "Emain Macha was the royal seat of Conchobar mac Nessa. John visited it.",
    "Conchobar mac Nessa": "Conchobar mac Nessa was a legendary king of Ulster who ruled "
    "from Emain Macha.",
    "Dark River (2017 film)": "Dark River is a 2017 British drama film directed by "
    "Clio Barnard, starring Ruth Wilson.",
    "Clio Barnard": "Clio Barnard is a British film director. John praised her Dark River.",
}
SPACY = IndexSettings(extractor="spacy", embedder="keyword")


def story(titles):
    return [Document(STORY[t], t) for t in titles]


@pytest.mark.model
def test_an_index_built_a_document_at_a_time_with_deletes_equals_one_built_at_once(
    index_location, same_index
):
    steps = index_location("steps")
    reports = [index_documents(steps, story([t]), SPACY) for t in STORY]
    assert all(r.relinked < r.counts["chunks"] for r in reports[1:])  # not every chunk
    for gone in ("Dark River (2017 film)", "Clio Barnard"):
        report = delete_documents(steps, [story([gone])[0].id])
        assert 0 < report.relinked < report.counts["chunks"]  # the chunks naming it
    index_documents(steps, story(["Clio Barnard", "Dark River (2017 film)"]), SPACY)
    index_documents(index_location("once"), story(list(STORY)), SPACY)
    same_index(
        steps,
        index_location("once"),
        KeywordEmbedder(),
        ("Who directed Dark River?", "Who was John?"),
        ("mentions:spacy", "embeddings"),
    )


@pytest.mark.model
def test_an_update_takes_the_chunk_catalogs_delta(index_location, monkeypatch):
    """An add and a delete through the engine link from the chunk catalog's delta: they
    read the bucket of the one chunk that came or went, not every bucket."""
    import quillian.index.linking as linking

    location = index_location("steps")
    index_documents(location, story(list(STORY)[:4]), SPACY)
    read: list[list[int]] = []
    real = linking._Linker._read_buckets

    def counted(linker, space, which):
        if space == linker.chunks_space:
            read.append(list(which))
        return real(linker, space, which)

    monkeypatch.setattr(linking._Linker, "_read_buckets", counted)
    (doc,) = story(["Clio Barnard"])
    index_documents(location, [doc], SPACY)
    delete_documents(location, [doc.id])
    assert [len(r) for r in read] == [1, 1] and read[0] == read[1]


def test_candidates_from_bm25_postings_find_every_text_holding_a_surface(tmp_path):
    from quillian.index.link_candidates import chunks_containing

    texts = [
        "The The played in Red Moon Bay.",  # stop words only; a surface among words
        "Île de France is a region. red moon.",  # non-ASCII words; other case
        "Nothing here but Red Moonlight.",  # inside a longer word: no title match
        "Red Moon and The The again.",  # not held by the BM25 index (a stopped build)
    ]
    chunks = {c.id: c for c in (_chunk(f"d{i}", "", t) for i, t in enumerate(texts))}
    ids = list(chunks)
    held = ids[:3]
    update_bm25(tmp_path / "bm25", held, lambda ps: [chunks[held[p]].text for p in ps])
    read_ids: list[str] = []

    def read(wanted):
        read_ids.extend(wanted)
        return [chunks[i] for i in wanted]

    def containing(surfaces, bm25):
        return chunks_containing(surfaces, chunks.keys(), read, bm25)

    for bm25 in (tmp_path / "bm25", None, tmp_path / "missing"):
        read_ids.clear()
        assert containing(["The The"], bm25) == {ids[0], ids[3]}
        assert containing(["Île de France"], bm25) == {ids[1]}
        # every text holding it as whole words; maybe one holding it inside a word
        assert {ids[0], ids[3]} <= containing(["Red Moon"], bm25)
        assert containing(["Red Moon"], bm25) <= {ids[0], ids[2], ids[3]}
        assert containing([], bm25) == set()
        read_ids.clear()
        containing(["Île de France"], bm25)
        # the postings' candidate and the chunk the index does not hold: no other text
        expected = [ids[1], ids[3]] if bm25 == tmp_path / "bm25" else ids
        assert read_ids == expected
