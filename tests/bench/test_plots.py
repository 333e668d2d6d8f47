"""The benchmark plots drawn from a small recorded JSON: every figure the JSON allows,
the same bytes on a second drawing, and what could not be drawn named with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the plots need the docs extra")

from quillian.bench.plots import STORAGE_SECTION, render_plots, storage_rows

STORAGE_TEXT = f"""## {STORAGE_SECTION}

Two backends on a tiny corpus.

| | embedded | PostgreSQL |
|---|---|---|
| build, 5 passages (s) | 1.5 | 2.25 |
| size on disk | 3 MB | 2 MB in the server |
| `sa` p50 / p95 (ms) | 2.0 / 4.5 | 1.5 / 3.0 |
| `dense` p50 / p95 (ms) | 0.5 / 0.9 | 1.0 / 1.4 |
| delete one document (s) | 1,200.5 | 0.75 |
"""


def _qa_method(f1: float, tokens: float, cached: int) -> dict[str, Any]:
    return {
        "em": f1 / 2,
        "f1": f1,
        "accuracy": f1,
        "tokens_per_question": tokens,
        "seconds_per_question": tokens / 100,
        "parse_failure_share": 0.0,
        "unfinished": 0,
        "llm_calls": 40,
        "cached_calls": cached,
    }


def _qa_run(questions: int) -> dict[str, Any]:
    methods = {"vanilla-rag": _qa_method(0.2, 900.0, 0), "sa-rag": _qa_method(0.3, 1800.0, 4)}
    return {
        "dataset": "hotpotqa",
        "model": "local-int8",
        "questions": questions,
        "methods": methods,
        "_command": f"quillian bench qa --dataset hotpotqa --first-n {questions}",
    }


def recorded() -> dict[str, Any]:
    """A recorded report: one 2Wiki run with a peer and a paired comparison, one
    HotpotQA run, a tuning run, a QA run of 20 questions and a smoke one, the storage study."""
    wiki = {
        "sa": {
            "perfect@8": 0.9,
            "perfect@8_ci": [0.8, 1.0],
            "multihop_perfect@8": 0.85,
            "multihop_perfect@8_ci": [0.7, 0.95],
            "p50_ms": 1.2,
            "p95_ms": 2.0,
        },
        "dense": {
            "perfect@8": 0.3,
            "perfect@8_ci": [0.2, 0.4],
            "multihop_perfect@8": 0.1,
            "multihop_perfect@8_ci": [0.05, 0.2],
            "p50_ms": 0.1,
            "p95_ms": 0.2,
        },
        "peer:fast_graphrag": {
            "perfect@8": 0.92,
            "perfect@8_ci": [0.82, 0.98],
            "multihop_perfect@8": 0.9,
            "multihop_perfect@8_ci": [0.78, 0.97],
        },
        "_paired": {
            "sa vs dense": {
                "perfect@8": {
                    "diff": 0.6,
                    "ci": [0.45, 0.75],
                    "p": 0.001,
                    "wins": 30,
                    "losses": 0,
                    "ties": 21,
                }
            }
        },
        "_run": {
            "dataset": "2wiki",
            "questions": 51,
            "passages": 800,
            "k": 8,
            "index": {"build_seconds": 3.0, "peak_rss_mb": 300},
        },
    }
    hotpot = {
        "sa": {
            "R@2": 0.7,
            "R@2_ci": [0.6, 0.8],
            "R@5": 0.9,
            "R@5_ci": [0.8, 0.95],
            "p50_ms": 1.6,
            "p95_ms": 4.0,
        },
        "_run": {
            "dataset": "hotpotqa",
            "questions": 50,
            "passages": 994,
            "k": 5,
            "index": {"build_seconds": 4.0, "peak_rss_mb": 310},
        },
    }
    paired = {"diff": 0.01, "ci": [-0.02, 0.04], "p": 0.6, "wins": 2, "losses": 1, "ties": 47}
    tune = {
        "method": "sa",
        "metric": "R@5",
        "default": {"score": 0.9, "ci": [0.8, 0.95]},
        "cv": {"score": 0.91, "ci": [0.82, 0.96], "vs_default": paired},
        "chosen_on_all": {"options": {"c": 0.3}, "in_sample": {"score": 0.92}},
        "grid": [{"options": {"c": 0.2}}, {"options": {"c": 0.3}}],
        "_command": "quillian bench tune --method sa --grid c=0.2,0.3",
    }
    return {
        "runs": {"2wiki-800": wiki, "hotpotqa": hotpot},
        "tune": {"tune-sa-hotpotqa": tune},
        "qa": {"hotpotqa, qa-20": _qa_run(20), "hotpotqa, qa-smoke": _qa_run(3)},
        "sections": {STORAGE_SECTION: STORAGE_TEXT},
    }


def test_every_figure_the_json_allows_is_drawn_and_drawn_the_same_twice(tmp_path: Path) -> None:
    first = render_plots(recorded(), tmp_path / "first")
    second = render_plots(recorded(), tmp_path / "second")
    names = [f.file for f in first.figures]
    assert names == [
        "retrieval-2wiki-800.svg",
        "retrieval-hotpotqa.svg",
        "paired.svg",
        "tuning.svg",
        "qa-cost-quality.svg",
        "storage.svg",
    ]
    for name in names:
        drawn = (tmp_path / "first" / name).read_bytes()
        assert drawn.startswith(b"<?xml") and len(drawn) > 2000, name
        assert drawn == (tmp_path / "second" / name).read_bytes(), f"{name} differs"
    assert first.figures == second.figures
    # the peer is drawn on 2Wiki and named; the points and labels are text in the SVG
    wiki = (tmp_path / "first" / "retrieval-2wiki-800.svg").read_text()
    assert "fast_graphrag" in wiki and ">sa<" in wiki
    assert "peers as dashed lines" in first.figures[0].caption
    assert "peers" not in first.figures[1].caption
    qa = (tmp_path / "first" / "qa-cost-quality.svg").read_text()
    assert "qa-20" in qa and "qa-smoke" not in qa


def test_what_cannot_be_drawn_is_named_with_its_reason(tmp_path: Path) -> None:
    plots = render_plots(recorded(), tmp_path)
    assert any("hotpotqa, qa-smoke" in s and "smoke scale" in s for s in plots.skipped)
    assert any("no intervals recorded" in s for s in plots.skipped)
    empty = render_plots({}, tmp_path / "empty")
    assert empty.figures == []
    assert list((tmp_path / "empty").iterdir()) == []
    assert "paired comparisons: none recorded" in empty.skipped
    assert any(s.startswith("storage backends: no table") for s in empty.skipped)


def test_the_storage_table_is_read_row_by_row() -> None:
    rows = storage_rows(STORAGE_TEXT)
    assert rows == {
        "build, 5 passages (s)": ([1.5], [2.25]),
        "`sa` p50 / p95 (ms)": ([2.0, 4.5], [1.5, 3.0]),
        "`dense` p50 / p95 (ms)": ([0.5, 0.9], [1.0, 1.4]),
        "delete one document (s)": ([1200.5], [0.75]),
    }
