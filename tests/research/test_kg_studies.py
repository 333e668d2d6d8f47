"""The knowledge-graph studies' page (``research/kg_studies.py``): the sections drawn
from recorded results, the link-prediction plot, and a result refused without its
command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kg_studies import KGE_PLOT, TITLE, main, render, training_and_scoring

RESULTS: dict[str, Any] = {
    "kge_scoring": {
        "entities": 4300000,
        "dim": 128,
        "queries": 30,
        "score_sp_ms": {"p50": 75.0, "p95": 80.0},
        "matrix_vector_ms": {"p50": 74.0, "p95": 79.0},
        "ratio_p50": 1.01,
        "batch": 8,
        "score_sp_batch_ms_per_query": {"p50": 25.0, "p95": 30.0},
        "threads": 2,
    },
    "kge_synthetic": {
        "entities": 4300000,
        "triples": 21000000,
        "examples": 42000000,
        "epoch_s": 678.9,
        "examples_per_s": 61869,
        "peak_rss_mb": 4961.8,
        "parameters_mb": 2100.4,
        "threads": 2,
        "settings": {"dim": 128, "negatives": 1024, "batch_size": 1024},
    },
}


def _kge(mrr: float) -> dict[str, Any]:
    hits = {"hits@1": mrr - 0.1, "hits@3": mrr, "hits@10": mrr + 0.05}
    return {"mrr": mrr, **hits, "train_s": 3.0, "_command": "python research/kge.py --json"}


def test_training_and_scoring_sections() -> None:
    text = "\n".join(training_and_scoring(RESULTS))
    assert "4,300,000 entities" in text and "ratio 1.01" in text
    assert "`score_sp_batch` of 8 queries" in text and "p50 25.0 ms a query" in text
    assert "3.0x score_sp's throughput. 2 threads." in text
    assert "one epoch 678.9 s (61,869 examples/s), peak RSS 4,962 MB" in text
    assert training_and_scoring({}) == []
    scan = {
        **RESULTS["kge_scoring"],
        "blas_score_sp_ms": {"p50": 150.0, "p95": 160.0},
        "ratio_p50": 0.5,
        "blas_batch_ms_per_query": {"p50": 50.0, "p95": 55.0},
        "scan_threads": 2,
        "read_floor_ms": {"p50": 60.0, "p95": 70.0},
    }
    text = "\n".join(training_and_scoring({"kge_scoring": scan}))
    assert "(the memory floor of any exact float32 scan on this machine): p50 60.0 ms" in text
    assert "score_sp takes 1.25x it." in text
    assert "score_sp (the row scan, 2 blocks) p50 75.0 ms" in text
    assert "as score_sp ran before, p50 150.0 ms (p95 160.0): ratio 0.5" in text
    assert "through BLAS 50.0 ms a query." in text


def test_the_page_is_a_section_with_its_plot_drawn_the_same_twice(tmp_path: Path) -> None:
    results = {**RESULTS, "kge": {"kinships": _kge(0.89), "nations": _kge(0.7)}}
    first = render(results, tmp_path / "a")
    drawn = (tmp_path / "a" / KGE_PLOT).read_bytes()
    assert render(results, tmp_path / "b") == first
    assert (tmp_path / "b" / KGE_PLOT).read_bytes() == drawn and drawn.startswith(b"<?xml")
    assert first.startswith(f"## {TITLE}\n")
    assert f"](../images/bench/{KGE_PLOT})" in first
    assert "| kinships | 0.890 |" in first and "| 0.823 |" in first  # the published MRR
    assert "### ComplEx training at Wikidata5M scale" in first
    assert "## " not in first.split("\n", 1)[1].replace("### ", "")  # one section


def test_inputs_merge_into_the_results_and_one_without_its_command_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, out = tmp_path / "kg-studies.json", tmp_path / "kg-studies.md"
    results.write_text(json.dumps({"kge_synthetic": RESULTS["kge_synthetic"]}))
    run = tmp_path / "umls.json"
    run.write_text(json.dumps({**_kge(0.8), "dataset": "umls"}))
    (tmp_path / "umls.json.cmd").write_text("python research/kge.py --data umls --json\n")
    args = ["--results", str(results), "--out", str(out), "--images", str(tmp_path / "img")]
    main([*args, "--kge", str(run)])
    saved = json.loads(results.read_text())
    assert set(saved) == {"kge_synthetic", "kge"}
    assert saved["kge"]["umls"]["_command"] == "python research/kge.py --data umls --json"
    assert "| umls | 0.800 |" in out.read_text() and "one epoch 678.9 s" in out.read_text()
    bare = tmp_path / "scoring.json"
    bare.write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--kge-scoring", str(bare)])
    assert exit_info.value.code == 2 and "no command recorded" in capsys.readouterr().err
    assert json.loads(results.read_text()) == saved  # nothing written
