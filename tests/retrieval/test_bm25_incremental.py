"""The incremental BM25 index: bm25s's scores, the same index however it was grown,
tombstones, compaction, a killed update and an index bm25s wrote."""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quillian.components.retrieval import bm25_incremental
from quillian.components.retrieval.bm25_incremental import (
    MANIFEST,
    SegmentedBM25,
    update_bm25,
)
from quillian.components.retrieval.bm25_index import BM25Index
from quillian.components.retrieval.bm25_segments import tokenize
from quillian.index.chunk_table import ChunkMoves


def stdlib_paragraphs() -> list[str]:
    """Real English text nobody here wrote: the paragraphs of standard library
    docstrings (at least five words each, deduplicated)."""
    import argparse
    import collections as col
    import json as js
    import os as os_
    import re as re_
    import string as st
    import subprocess as sp
    import textwrap as tw

    seen: dict[str, None] = {}
    for module in (argparse, col, js, os_, re_, st, sp, tw, random, np):
        for name in sorted(dir(module)):
            doc = getattr(getattr(module, name, None), "__doc__", None)
            if not isinstance(doc, str):
                continue
            for para in re.split(r"\n\s*\n", doc):
                para = " ".join(para.split())
                if len(para.split()) >= 5:
                    seen.setdefault(para)
    return list(seen)[:400]


TEXTS = stdlib_paragraphs()
IDS = [f"chunk-{i:04d}" for i in range(len(TEXTS))]
#: Ids of stable_id's form (a head and 16 hex digits), as the build's chunk ids are:
#: matched by their numbers, not their bytes; in no order of their own.
STABLE_IDS = [f"chunk-{random.Random(i).getrandbits(64):016x}" for i in range(len(TEXTS))]
ID_FORMS = pytest.mark.parametrize("ids", [IDS, STABLE_IDS], ids=["ids", "stable-ids"])


def queries() -> list[str]:
    """Words of the corpus, one to four per query, some repeated, and some no chunk holds."""
    rng = random.Random(7)
    words = sorted({w for t in TEXTS[:50] for w in re.findall(r"[a-z]{3,}", t.lower())})
    made = [" ".join(rng.sample(words, rng.randint(1, 4))) for _ in range(60)]
    return [*made, "the file the file", "xylophone zeppelin", "and of the", "Return a new list"]


def texts_of(texts: list[str]):
    return lambda positions: [texts[i] for i in positions]


def build(path: Path, ids: list[str], texts: list[str]) -> SegmentedBM25:
    update_bm25(path, ids, texts_of(texts))
    loaded = SegmentedBM25.load(path)
    assert loaded is not None
    return loaded


def bm25s_scores(reference: BM25Index, query: str) -> np.ndarray:
    """bm25s's score of every chunk for ``query``."""
    model = reference._model
    assert model is not None
    known = [t for t in tokenize([query])[0] if t in model.vocab_dict]
    if not known:
        return np.zeros(int(model.scores["num_docs"]), np.float32)
    return np.asarray(model.get_scores(known))


def results(index, query: str, k: int = 10) -> tuple[list[int], list[float]]:
    found, scores = index.search(query, k)
    return found.tolist(), scores.tolist()


def test_the_corpus_is_real_text():
    assert len(TEXTS) >= 300 and all(len(t.split()) >= 5 for t in TEXTS)


def test_scores_equal_bm25s_and_rank_by_chunk_id_on_ties(tmp_path):
    ours = build(tmp_path / "bm25", IDS, TEXTS)
    reference = BM25Index.build(TEXTS)
    compared = 0
    for query in queries():
        want = bm25s_scores(reference, query)
        found, scores = ours.search(query, len(TEXTS))
        got = np.zeros(len(TEXTS), np.float32)
        got[found] = scores
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        matched = np.flatnonzero(want > 0)
        ranking = matched[np.lexsort((np.array(IDS)[matched], -want[matched]))]
        assert found.tolist() == ranking.tolist(), query
        compared += len(matched)
        # bm25s's own top 10 has the same scores (its order among ties is its own)
        top, top_scores = reference.search(query, 10)
        np.testing.assert_allclose(scores[: len(top)], top_scores, rtol=0, atol=1e-5)
    assert compared > 500


def test_offsets_and_frequencies_are_stored_narrow_and_wider_ones_read_the_same(tmp_path):
    """Term frequencies and rows in 16 bits and offsets in 32 where they fit; a segment
    holding the widths written before (64-bit offsets, 32-bit frequencies and rows)
    scores the same, and a frequency or a row past 16 bits keeps 32."""
    index = build(tmp_path / "bm25", IDS, TEXTS)
    (segment,) = index.segments
    assert segment.tfs.dtype == segment.rows.dtype == np.uint16
    assert segment.indptr.dtype == segment.term_offsets.dtype == np.int32
    want = [results(index, q, 20) for q in queries()]
    (folder,) = [p for p in (tmp_path / "bm25").iterdir() if p.is_dir()]
    widths = (
        ("tfs", np.int32),
        ("rows", np.int32),
        ("indptr", np.int64),
        ("term_offsets", np.int64),
    )
    for name, width in widths:
        np.save(folder / f"{name}.npy", np.load(folder / f"{name}.npy").astype(width))
    wider = SegmentedBM25.load(tmp_path / "bm25")
    assert wider is not None and wider.segments[0].tfs.dtype == wider.segments[0].rows.dtype
    assert wider.segments[0].rows.dtype == np.int32
    assert [results(wider, q, 20) for q in queries()] == want
    many = build(tmp_path / "many", ["a", "b"], ["zebra " * 70_000, "zebra crossing"])
    assert many.segments[0].tfs.dtype == np.int32
    assert results(many, "zebra", 2)[0] == [0, 1]
    ids = [f"c{i:05d}" for i in range(70_000)]
    rows = build(tmp_path / "rows", ids, ["common word"] * 69_999 + ["common rare"])
    assert rows.segments[0].rows.dtype == np.int32
    assert results(rows, "rare", 1)[0] == [69_999]


@ID_FORMS
def test_grown_in_steps_equals_built_at_once(tmp_path, ids):
    rng = random.Random(3)
    order = list(range(len(TEXTS)))
    rng.shuffle(order)
    grown = tmp_path / "grown"
    held: list[int] = []
    for step in (100, 200, 5, 1, 40, 1, 2, len(TEXTS) - 349):
        held = sorted(held + order[len(held) : len(held) + step])
        update_bm25(grown, [ids[i] for i in held], texts_of([TEXTS[i] for i in held]))
    assert len(held) == len(TEXTS)
    once = build(tmp_path / "once", ids, TEXTS)
    stepped = SegmentedBM25.load(grown)
    assert stepped is not None and len(stepped.segments) > 1
    for query in queries():
        assert results(stepped, query, 20) == results(once, query, 20), query


@ID_FORMS
def test_deletes_equal_a_build_without_the_chunks(tmp_path, ids):
    index = tmp_path / "bm25"
    update_bm25(index, ids, texts_of(TEXTS))
    keep = [i for i in range(len(TEXTS)) if i % 7 != 3]
    report = update_bm25(index, [ids[i] for i in keep], texts_of([TEXTS[i] for i in keep]))
    assert (report.added, report.removed, report.compacted) == (0, len(TEXTS) - len(keep), False)
    without = build(tmp_path / "without", [ids[i] for i in keep], [TEXTS[i] for i in keep])
    after = SegmentedBM25.load(index)
    reference = BM25Index.build([TEXTS[i] for i in keep])
    for query in queries():
        assert results(after, query) == results(without, query), query
        found, scores = after.search(query, 10)
        np.testing.assert_allclose(scores, bm25s_scores(reference, query)[found], atol=1e-5)


def test_a_deleted_chunk_added_back_is_indexed_again(tmp_path):
    index = tmp_path / "bm25"
    update_bm25(index, IDS[:10], texts_of(TEXTS))
    update_bm25(index, IDS[:9], texts_of(TEXTS))
    update_bm25(index, IDS[:10], texts_of(TEXTS))
    once = build(tmp_path / "once", IDS[:10], TEXTS[:10])
    again = SegmentedBM25.load(index)
    for query in queries():
        assert results(again, query) == results(once, query), query


def test_compaction_drops_tombstones_and_merges_keep_segments_few(tmp_path):
    index = tmp_path / "bm25"
    for n in range(1, 65):  # one chunk per build
        update_bm25(index, IDS[:n], texts_of(TEXTS))
    grown = SegmentedBM25.load(index)
    assert grown is not None and len(grown.segments) <= 7  # a binary counter: O(log n)
    report = update_bm25(index, IDS[40:64], texts_of(TEXTS[40:64]))
    assert report.removed == 40 and report.compacted
    compacted = SegmentedBM25.load(index)
    assert compacted is not None and len(compacted.segments) == 1
    assert len(compacted.positions) == 24 and (np.asarray(compacted.positions) >= 0).all()
    manifest = json.loads((index / MANIFEST).read_text())
    on_disk = {p.name for p in index.iterdir()}
    assert on_disk == {MANIFEST, manifest["positions"], manifest["segments"][0]["name"]}
    once = build(tmp_path / "once", IDS[40:64], TEXTS[40:64])
    for query in queries():
        assert results(compacted, query) == results(once, query), query


def test_an_update_with_nothing_to_do_writes_nothing(tmp_path):
    index = tmp_path / "bm25"
    update_bm25(index, IDS[:20], texts_of(TEXTS))
    before = {p: p.stat().st_mtime_ns for p in index.rglob("*")}
    report = update_bm25(index, IDS[:20], lambda positions: pytest.fail("tokenized again"))
    assert (report.added, report.removed) == (0, 0)
    assert {p: p.stat().st_mtime_ns for p in index.rglob("*")} == before


def test_only_new_chunks_are_tokenized(tmp_path):
    index = tmp_path / "bm25"
    update_bm25(index, IDS[:100], texts_of(TEXTS))
    asked: list[int] = []

    def texts(positions):
        asked.extend(positions)
        return [TEXTS[i] for i in positions]

    update_bm25(index, IDS[:50] + IDS[100:103] + IDS[50:100], texts)
    assert asked == [50, 51, 52]  # positions in the build's chunk order


KILL = """
import os, signal, sys
from pathlib import Path
import numpy as np
from quillian.components.retrieval import bm25_incremental, bm25_segments
texts = {texts!r}
ids = {ids!r}
calls = [0]
if sys.argv[1] == "mid-segment":
    save = np.save
    def dying_save(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        return save(*args, **kwargs)
    bm25_segments.np.save = dying_save
else:
    def dying_replace(*args):
        os.kill(os.getpid(), signal.SIGKILL)
    bm25_incremental.os.replace = dying_replace
bm25_incremental.update_bm25(Path(sys.argv[2]), ids, lambda p: [texts[i] for i in p])
"""


@pytest.mark.parametrize("when", ["mid-segment", "before-swap"])
def test_a_killed_update_leaves_the_previous_index(tmp_path, when):
    index = tmp_path / "bm25"
    update_bm25(index, IDS[:30], texts_of(TEXTS))
    before = SegmentedBM25.load(index)
    want = {q: results(before, q) for q in queries()}
    keep = IDS[5:30] + IDS[30:40]
    script = KILL.format(texts=TEXTS[5:40], ids=keep)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-c", script, when, str(index)], env=env, check=False)
    assert killed.returncode == -9
    assert any(p.name.startswith("seg-") and p.name != "seg-000001" for p in index.iterdir())
    survivor = SegmentedBM25.load(index)
    assert {q: results(survivor, q) for q in queries()} == want
    update_bm25(index, keep, texts_of(TEXTS[5:40]))  # the next build finishes the job
    once = build(tmp_path / "once", keep, TEXTS[5:40])
    after = SegmentedBM25.load(index)
    for query in queries():
        assert results(after, query) == results(once, query), query


def test_an_index_bm25s_wrote_opens_and_its_next_update_converts_it(tmp_path):
    index = tmp_path / "bm25"
    index.mkdir()
    BM25Index.build(TEXTS[:50]).save(index)  # what Quillian wrote before
    old = BM25Index.load(index)
    assert old._segmented is None
    want = {q: old.search(q, 5) for q in queries()}
    report = update_bm25(index, IDS[:50], texts_of(TEXTS))
    assert report.added == 50
    assert not (index / "params.index.json").exists()
    new = BM25Index.load(index)
    assert new._segmented is not None
    for query, (found, scores) in want.items():
        got_found, got_scores = new.search(query, 5)
        np.testing.assert_allclose(got_scores, scores, rtol=0, atol=1e-5)
        if len(scores):  # the same chunks above the last score (ties there: any order)
            above = scores > scores[-1] + 1e-5
            assert got_found[above].tolist() == found[above].tolist()


def test_stop_words_only_and_empty_corpora_match_nothing(tmp_path):
    for name, texts in (("stop", ["the of and", "!!! ..."]), ("empty", [])):
        index = build(tmp_path / name, [f"c{i}" for i in range(len(texts))], texts)
        assert results(index, "what is it") == ([], [])
        assert results(index, "Babbage") == ([], [])
    update_bm25(tmp_path / "stop", ["c0", "c1", "c2"], texts_of(["the of and", "!!!", "Babbage"]))
    assert results(SegmentedBM25.load(tmp_path / "stop"), "Babbage")[0] == [2]


def test_a_damaged_segment_is_rebuilt_by_the_next_update(tmp_path, caplog):
    index = tmp_path / "bm25"
    update_bm25(index, IDS[:30], texts_of(TEXTS))
    rows = index / "seg-000001" / "tfs.npy"
    data = bytearray(rows.read_bytes())
    data[-4:] = b"\x7f\x7f\x7f\x7f"
    rows.write_bytes(bytes(data))
    update_bm25(index, IDS[:31], texts_of(TEXTS))
    assert "checksum mismatch" in caplog.text
    once = build(tmp_path / "once", IDS[:31], TEXTS[:31])
    for query in queries():
        assert results(SegmentedBM25.load(index), query) == results(once, query), query


def test_repeated_chunk_ids_are_refused(tmp_path):
    from quillian.errors import InputError

    with pytest.raises(InputError, match="not unique"):
        update_bm25(tmp_path / "bm25", ["a", "a"], texts_of(["x y", "x y"]))
    assert not (tmp_path / "bm25").exists()


def test_tokens_equal_bm25s_tokens():
    import bm25s
    from bm25s.stopwords import STOPWORDS_EN as BM25S_STOPWORDS

    from quillian.components.retrieval.bm25_segments import STOPWORDS_EN, stemmer

    assert set(BM25S_STOPWORDS) == STOPWORDS_EN
    texts = [*TEXTS, "", "the of and", "Ünïcode naïve café ÉCOLE x y zz", "don't 42 a1 __init__"]
    want = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer(), return_ids=False)
    assert tokenize(texts) == want


def _moves(old: list[str], new: list[str], changed: set[str]) -> ChunkMoves:
    """Where ``old``'s rows went in ``new`` (ids ``doc/...``, by document), the
    documents ``changed`` having all their rows replaced, as the chunk catalog says."""
    at = {chunk: i for i, chunk in enumerate(new)}
    spans: list[tuple[int, int, int]] = []
    for i, chunk in enumerate(old):
        if chunk.split("/")[0] in changed:
            continue
        start, end, to = spans[-1] if spans else (-2, -2, -2)
        if end == i and to + end - start == at[chunk]:
            spans[-1] = (start, i + 1, to)
        else:
            spans.append((i, i + 1, at[chunk]))
    return ChunkMoves(tuple(spans), len(old), len(new))


def test_a_position_map_carried_through_the_catalog_moves_equals_one_matched(tmp_path, monkeypatch):
    """Documents added, deleted and stored again (some chunks kept under their ids),
    each update carried through where the rows went: the same index as one whose chunks
    were matched by id, and no id matched after the first."""
    rng = random.Random(11)
    docs: dict[str, list[str]] = {}
    text_of: dict[str, str] = {}

    def table() -> list[str]:
        return [c for d in sorted(docs) for c in docs[d]]

    def put(doc: str, version: int) -> None:
        kept = docs.get(doc, [])[: rng.randint(0, 1)]  # a chunk that stays, under its id
        docs[doc] = kept + [f"{doc}/{version}-{i}" for i in range(rng.randint(1, 3))]
        for chunk in docs[doc]:
            text_of.setdefault(chunk, TEXTS[len(text_of) % len(TEXTS)])

    for d in range(30):
        put(f"d{d:02d}", 0)
    carried, matched = tmp_path / "carried", tmp_path / "matched"
    old = table()
    update_bm25(carried, old, lambda at: [text_of[old[i]] for i in at], table="t0")
    update_bm25(matched, old, lambda at: [text_of[old[i]] for i in at])
    matches = 0
    real_match = bm25_incremental._match

    def counted(*args):  # type: ignore[no-untyped-def]
        nonlocal matches
        matches += 1
        return real_match(*args)

    monkeypatch.setattr(bm25_incremental, "_match", counted)
    for step in range(1, 40):
        changed = {f"d{rng.randrange(40):02d}" for _ in range(rng.randint(0, 3))}
        for doc in changed:
            if doc in docs and rng.random() < 0.4:
                del docs[doc]
            else:
                put(doc, step)
        new = table()
        texts = texts_of([text_of[c] for c in new])
        moves = _moves(old, new, changed)
        a = update_bm25(carried, new, texts, table=f"t{step}", since=f"t{step - 1}", moves=moves)
        b = update_bm25(matched, new, texts)
        assert (a.added, a.removed) == (b.added, b.removed), step
        one, other = SegmentedBM25.load(carried), SegmentedBM25.load(matched)
        assert one is not None and other is not None
        assert np.array_equal(one.positions, other.positions), step
        for query in queries()[:20]:
            assert results(one, query) == results(other, query), query
        old = new
    assert matches == 39  # the matched index's updates only


def test_a_position_map_not_of_the_table_the_moves_follow_is_matched_again(tmp_path, caplog):
    index = tmp_path / "bm25"
    update_bm25(index, IDS[:10], texts_of(TEXTS), table="t0")
    unmoved = ChunkMoves(((0, 10, 0),), 10, 10)
    # another table's moves: matched by id, as without any
    report = update_bm25(index, IDS[:9], texts_of(TEXTS), table="t1", since="x", moves=unmoved)
    assert report.removed == 1
    # moves that do not cover each chunk once: a warning, then matched by id
    wrong = ChunkMoves(((0, 9, 1),), 9, 9)
    report = update_bm25(index, IDS[1:10], texts_of(TEXTS[1:]), table="t2", since="t1", moves=wrong)
    assert "does not cover each chunk once" in caplog.text
    assert (report.added, report.removed) == (1, 1)
    once = build(tmp_path / "once", IDS[1:10], TEXTS[1:10])
    again = SegmentedBM25.load(index)
    for query in queries():
        assert results(again, query) == results(once, query), query
