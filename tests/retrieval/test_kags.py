"""KAGS storage and retrieval on a tiny index built from scripted 4-tuples.

The keyword embedder makes every cosine computable by hand: two texts with word sets
``A`` and ``B`` (stopwords removed) score ``|A & B| / sqrt(|A| * |B|)``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from quillian.components.retrieval.kags import KAGSRetriever, KAGSSearch, dedup_relations
from quillian.components.retrieval.triple_store import NAMESPACE, SENTENCE_VECTORS
from quillian.engine import Engine, IndexSettings, index_documents
from quillian.errors import ConfigError, IndexStageMissingError
from quillian.index import open_storage
from quillian.testing.kags import KAGS_DOCS as DOCS
from quillian.testing.kags import S_ALPHA, S_LAMBDA, S_MU, kags_index

QUERY = "alpha beta"


def cos(a: int, b: int, common: int) -> float:
    return common / math.sqrt(a * b)


@pytest.fixture(scope="module")
def location(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kags")
    report = kags_index(path)
    assert report.counts["kags_triples"] == 4
    return path


def retriever(location: Path, **settings: object) -> KAGSRetriever:
    engine = Engine.open(location, embedder="keyword")
    base = engine.retriever("kags")
    assert isinstance(base, KAGSRetriever)
    return base.with_config(KAGSSearch(**settings))  # type: ignore[arg-type]


def test_the_store_keeps_provenance_and_both_vector_fields(location: Path) -> None:
    store = retriever(location).store
    by_text = {t.text: t for t in store.triples}
    alpha = by_text["Alpha links Gamma"]
    assert alpha.sentence == S_ALPHA and (alpha.start, alpha.end) == (0, len(S_ALPHA))
    assert alpha.chunk_id and alpha.doc_id == DOCS[0].id
    mu = by_text["Lambda meets Mu"]
    assert (mu.start, mu.end) == (len(S_LAMBDA) + 1, len(S_LAMBDA) + 1 + len(S_MU))
    row = store.triples.index(alpha)
    sentence_vector = store.sentence_vectors.get(np.array([row]))[0]
    triple_vector = store.triple_vectors.get(np.array([row]))[0]
    # {alpha, links, gamma} against {alpha, beta, gamma, delta}, stored in float16
    assert float(sentence_vector @ triple_vector) == pytest.approx(cos(3, 4, 2), abs=1e-3)
    with open_storage(location) as storage:
        assert len(list(storage.kv.keys(NAMESPACE))) == 4
        assert len(storage.vectors(SENTENCE_VECTORS)) == 4
    # the entity graph has one edge per triple, each carrying its row
    graph = store.graph
    assert graph.n_nodes == 5 and len(graph.heads) == 4


@pytest.mark.parametrize(
    ("tau", "kept"),
    [
        (0.3, {"Alpha links Gamma", "Alpha joins Kappa"}),  # S_KAPPA: 1/sqrt(8) = 0.354
        (0.5, {"Alpha links Gamma"}),  # S_ALPHA: 2/sqrt(8) = 0.707
        (0.75, set()),
    ],
)
def test_the_metadata_filter_keeps_and_drops_hits_at_tau(
    location: Path, tau: float, kept: set[str]
) -> None:
    result = retriever(location, top_k=2, tau=tau, hops=0, keep_best=False).retrieve(QUERY, 5)
    assert {r.description for r in result.trace.relations} == kept
    assert all(r.hop == 0 for r in result.trace.relations)
    seeds = {s.name for s in result.trace.seeds}
    assert seeds == {name for t in kept for name in (t.split()[0], t.split()[-1])}
    if not kept:
        assert result.passages == [] and result.trace.activated == []


def test_when_the_filter_keeps_nothing_the_hit_with_the_closest_sentence_is_kept(
    location: Path,
) -> None:
    # at tau 0.75 neither hit passes: S_ALPHA scores 0.707, S_KAPPA 0.354
    result = retriever(location, top_k=2, tau=0.75, hops=0).retrieve(QUERY, 5)
    assert [r.description for r in result.trace.relations] == ["Alpha links Gamma"]
    assert {(s.name, s.source) for s in result.trace.seeds} == {
        ("Alpha", "triple below tau"),
        ("Gamma", "triple below tau"),
    }
    assert [p.title for p in result.passages] == ["Alpha"]
    passed = retriever(location, top_k=2, tau=0.5, hops=0).retrieve(QUERY, 5)
    assert {s.source for s in passed.trace.seeds} == {"triple"}


def test_without_the_filter_every_hit_is_kept(location: Path) -> None:
    result = retriever(location, top_k=2, tau=0.99, hops=0, filter=False).retrieve(QUERY, 5)
    assert len(result.trace.relations) == 2


def test_traversal_adds_relations_with_their_hop_and_returns_supporting_passages(
    location: Path,
) -> None:
    result = retriever(location, top_k=2, tau=0.5, hops=2).retrieve(QUERY, 5)
    hops = {r.description: r.hop for r in result.trace.relations}
    # seed triple Alpha->Gamma (hop 0); hop 1 from Alpha and Gamma: Alpha->Kappa (out of
    # Alpha), Gamma->Lambda (out of Gamma); hop 2 from Kappa and Lambda: Lambda->Mu
    assert hops == {
        "Alpha links Gamma": 0,
        "Alpha joins Kappa": 1,
        "Gamma meets Lambda": 1,
        "Lambda meets Mu": 2,
    }
    reached = {e.name: e.hop for e in result.trace.activated}
    assert reached == {"Alpha": 0, "Gamma": 0, "Kappa": 1, "Lambda": 1, "Mu": 2}
    relation = next(r for r in result.trace.relations if r.hop == 2)
    assert relation.sentence == S_MU
    # passages by their best source-sentence cosine: 2/sqrt(8), 1/sqrt(8), 0
    assert [p.title for p in result.passages] == ["Alpha", "Kappa", "Lambda"]
    scores = [p.score for p in result.passages]
    assert scores == pytest.approx([cos(2, 4, 2), cos(2, 4, 1), 0.0], abs=1e-6)
    assert [p.title for p in retriever(location, top_k=2, hops=2).retrieve(QUERY, 1).passages] == [
        "Alpha"
    ]
    one_hop = retriever(location, top_k=2, tau=0.5, hops=1).retrieve(QUERY, 5)
    assert max(r.hop for r in one_hop.trace.relations) == 1


def test_exact_and_near_duplicates_keep_the_earliest() -> None:
    v = np.eye(4, dtype=np.float32)
    near = (v[0] * 0.95 + v[1] * math.sqrt(1 - 0.95**2)).astype(np.float32)  # cos 0.95 to v0
    far = (v[0] * 0.85 + v[2] * math.sqrt(1 - 0.85**2)).astype(np.float32)  # cos 0.85 to v0
    vectors = np.stack([v[0], v[0], near, far, v[3]])
    keys = [("a", "p", "b"), ("a", "p", "b"), ("a", "q", "b"), ("a", "r", "c"), ("x", "p", "y")]
    assert dedup_relations([10, 11, 12, 13, 14], keys, vectors, 0.9) == [0, 3, 4]
    assert dedup_relations([10, 11, 12, 13, 14], keys, vectors, 0.8) == [0, 4]
    assert dedup_relations([], [], np.zeros((0, 4), np.float32), 0.9) == []


def test_bad_settings_and_an_index_without_triples_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tau"):
        KAGSSearch(tau=1.5)
    with pytest.raises(ConfigError, match="top_k"):
        KAGSSearch(top_k=0)
    index_documents(tmp_path, DOCS, IndexSettings(extractor="spacy", embedder="keyword"))
    with pytest.raises(IndexStageMissingError, match="no KAGS triples"):
        Engine.open(tmp_path, embedder="keyword").retriever("kags")
