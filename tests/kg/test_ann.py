"""The description ANN index: FAISS IVF built in bulk, recorded in the graph, used by search."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.kg.test_import import release, run_cli

from quillian.cli.main import main
from quillian.components.embedding.hashed import HashEmbedder, KeywordEmbedder
from quillian.components.kg.store import ImportedGraph
from quillian.components.kg.wikidata5m import import_wikidata5m
from quillian.components.kg.writer import ImportOptions, build_ann
from quillian.errors import ConfigError, MissingExtraError
from quillian.stores.embedded.faiss_ivf import FaissIVFIndex, IVFOptions, default_nlist
from quillian.stores.embedded.vectors import ExactVectorIndex, ExactVectorWriter

pytest.importorskip("faiss")

DIM = 32


def clustered(n: int, centres: int, seed: int = 0) -> np.ndarray:
    """Unit vectors scattered around ``centres`` random directions."""
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, DIM))
    x = middle[rng.integers(0, centres, n)] + 0.35 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def exact(tmp_path: Path):
    x = clustered(4000, 40)
    with ExactVectorWriter(tmp_path / "vectors", DIM, len(x)) as writer:
        for start in range(0, len(x), 1000):
            writer.append(np.arange(start, start + 1000) * 3, x[start : start + 1000])
    with ExactVectorIndex(tmp_path / "vectors") as index:
        yield index


def recall_at_10(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True)]))


@pytest.mark.parametrize(
    ("kind", "extra"), [("ivf-sq8", {}), ("ivf-fp16", {}), ("ivf-pq", {"pq_m": 8})]
)
def test_ivf_agrees_with_exact_on_clustered_vectors(tmp_path, exact, kind, extra):
    options = IVFOptions(kind=kind, nlist=32, nprobe=8, batch=700, **extra)
    meta = FaissIVFIndex.build(tmp_path / "ann", exact, options)
    assert meta["nlist"] == 32 and meta["count"] == 4000 and meta["method"] == kind
    queries = clustered(60, 40, seed=1)
    truth, _ = exact.search(queries, 10)
    with FaissIVFIndex(tmp_path / "ann", exact=exact) as ann:
        ids, scores = ann.search(queries, 10)
        assert recall_at_10(ids, truth) >= 0.9
        assert set(np.unique(ids)) <= set(range(0, 12000, 3))  # the source's ids
        if kind == "ivf-pq":  # re-ranked: exact scores of what it found
            assert ann.rerank == 100
            exact_scores = np.einsum(
                "qd,qkd->qk", queries, exact.get(ids.ravel()).reshape(60, 10, DIM)
            )
            np.testing.assert_allclose(scores, exact_scores, atol=1e-5)
        # one list scanned finds less; every list scanned is (nearly) exact
        assert recall_at_10(ann.search(queries, 10, nprobe=1)[0], truth) < 0.9
        assert recall_at_10(ann.search(queries, 10, nprobe=32)[0], truth) >= 0.95


def test_ivf_pq_needs_the_exact_index_to_rerank(tmp_path, exact):
    FaissIVFIndex.build(tmp_path / "ann", exact, IVFOptions(kind="ivf-pq", nlist=8, pq_m=8))
    with pytest.raises(ConfigError, match="exact index"):
        FaissIVFIndex(tmp_path / "ann")
    FaissIVFIndex(tmp_path / "ann", rerank=0).close()


def test_options_and_default_nlist():
    assert default_nlist(4_300_000) == 2048
    assert default_nlist(95_000) == 256
    assert default_nlist(1000) == 16 and default_nlist(5) == 1
    with pytest.raises(ConfigError, match="kind"):
        IVFOptions(kind="hnsw")
    with pytest.raises(ConfigError, match="nprobe"):
        IVFOptions(nprobe=0)
    with pytest.raises(ConfigError, match="ann must be one of"):
        ImportOptions(ann="ivf")


# --- in an imported graph -------------------------------------------------------------------


def synthetic_graph(tmp_path: Path, **options) -> tuple[Path, object]:
    from kg_synthetic import write_wikidata5m_like

    files = write_wikidata5m_like(tmp_path / "syn", 1500, 6000, 10, chunk=700)
    out = tmp_path / "kg"
    report = import_wikidata5m(files, out, HashEmbedder(16), options=ImportOptions(**options))
    return out, report


def test_import_builds_the_ann_index_and_search_uses_it(tmp_path):
    out, report = synthetic_graph(tmp_path, ann="ivf-sq8")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ann"]["method"] == "ivf-sq8" and manifest["ann"]["directory"] == "ann"
    assert manifest["ann"]["count"] == report.final["entities"]
    assert "ann" in report.seconds
    with ImportedGraph.open(out, HashEmbedder(16)) as graph:
        assert graph.ann is not None and graph.ann["nlist"] == default_nlist(len(graph))
        hits = [graph.seed_entities(graph.description(e), 3)[0][0] for e in (0, 700, 1300)]
        assert hits == [0, 700, 1300]  # a description finds its own entity first
        assert isinstance(graph._ann, FaissIVFIndex)
    with ImportedGraph.open(out, HashEmbedder(16), exact=True) as graph:
        assert graph.seed_entities(graph.description(700), 3)[0][0] == 700
        assert graph._ann is None
    with ImportedGraph.open(out, HashEmbedder(16), nprobe=2) as graph:
        graph.seed_entities("anything", 3)
        assert graph._ann is not None and graph._ann.nprobe == 2


def test_small_graphs_stay_exact_unless_asked(tmp_path):
    root = release(tmp_path / "w5m")
    import_wikidata5m(root, tmp_path / "auto", KeywordEmbedder())
    assert "ann" not in json.loads((tmp_path / "auto" / "manifest.json").read_text())
    assert not (tmp_path / "auto" / "ann").exists()
    options = ImportOptions(ann_min_entities=3)  # above the threshold: auto builds one
    import_wikidata5m(root, tmp_path / "big", KeywordEmbedder(), options=options)
    with ImportedGraph.open(tmp_path / "big", KeywordEmbedder()) as graph:
        assert graph.ann is not None and graph.ann["method"] == "ivf-sq8"
        top = graph.seed_entities("university town", 2)
        assert graph.entity_name(top[0][0]) == "Cambridge"


def test_cli_ann_choice(tmp_path):
    root = release(tmp_path / "w5m")
    for choice, built in (("none", False), ("ivf-fp16", True)):
        out = tmp_path / choice
        argv = ["kg", "import", "wikidata5m", str(root), "--out", str(out), "--embedder", "hash"]
        assert run_cli(*argv, "--ann", choice) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert ("ann" in manifest) is built and (out / "ann").exists() is built


def test_build_ann_for_an_imported_graph(tmp_path):
    out, _ = synthetic_graph(tmp_path, ann="none")
    info = build_ann(out, "ivf-sq8", nlist=8)
    assert info["nlist"] == 8
    assert json.loads((out / "manifest.json").read_text())["ann"] == info
    build_ann(out, "ivf-fp16")  # rebuilt in place
    with ImportedGraph.open(out, HashEmbedder(16)) as graph:
        assert graph.ann is not None and graph.ann["method"] == "ivf-fp16"
        assert graph.seed_entities(graph.description(5), 1)[0][0] == 5
    assert sorted(p.name for p in out.iterdir() if "ann" in p.name) == ["ann"]


def test_cli_kg_ann_builds_tunes_and_drops(tmp_path, capsys):
    out, _ = synthetic_graph(tmp_path, ann="none")
    assert main(["kg", "ann", str(out)]) == 0
    assert "no ANN index" in capsys.readouterr().out
    assert main(["kg", "ann", str(out), "--kind", "ivf-fp16", "--nlist", "8", "--nprobe", "2"]) == 0
    assert "ivf-fp16" in capsys.readouterr().out
    assert main(["kg", "ann", str(out), "--nprobe", "4", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["method"], info["nlist"], info["nprobe"]) == ("ivf-fp16", 8, 4)
    with ImportedGraph.open(out, HashEmbedder(16)) as graph:
        graph.seed_entities(graph.description(3), 1)
        assert graph._ann is not None and graph._ann.nprobe == 4  # the recorded default
    with ImportedGraph.open(out, HashEmbedder(16), nprobe=1) as graph:
        graph.seed_entities(graph.description(3), 1)
        assert graph._ann is not None and graph._ann.nprobe == 1  # the caller's
    # bad values are refused and change nothing
    assert main(["kg", "ann", str(out), "--nprobe", "9"]) == 2
    assert "nprobe must be in 1..8" in capsys.readouterr().err
    assert main(["kg", "ann", str(out), "--nlist", "4"]) == 2
    assert json.loads((out / "manifest.json").read_text())["ann"]["nprobe"] == 4
    assert main(["kg", "ann", str(out), "--kind", "none"]) == 0
    assert "dropped" in capsys.readouterr().out
    assert "ann" not in json.loads((out / "manifest.json").read_text())
    assert not [p for p in out.iterdir() if "ann" in p.name]
    with ImportedGraph.open(out, HashEmbedder(16)) as graph:  # exact search again
        assert graph.seed_entities(graph.description(5), 1)[0][0] == 5
    assert main(["kg", "ann", str(out), "--nprobe", "4"]) == 2
    assert "has no ANN index" in capsys.readouterr().err


def test_missing_faiss(tmp_path, monkeypatch, caplog):
    root = release(tmp_path / "w5m")
    options = ImportOptions(ann_min_entities=0)
    import_wikidata5m(root, tmp_path / "with", KeywordEmbedder(), options=options)
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(MissingExtraError, match=r"quillian\[ann\]"):
        import_wikidata5m(
            root, tmp_path / "kg", KeywordEmbedder(), options=ImportOptions(ann="ivf-sq8")
        )
    assert not (tmp_path / "kg").exists()
    # auto quietly stays exact
    import_wikidata5m(root, tmp_path / "auto", KeywordEmbedder(), options=options)
    assert "ann" not in json.loads((tmp_path / "auto" / "manifest.json").read_text())
    # a graph with an ANN index is still searched, exactly, with a warning
    with caplog.at_level(logging.WARNING), ImportedGraph.open(tmp_path / "with") as graph:
        graph._embedder = KeywordEmbedder()
        top = graph.seed_entities("university town", 1)
        assert graph.entity_name(top[0][0]) == "Cambridge"
    assert "quillian[ann]" in caplog.text
