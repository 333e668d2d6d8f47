"""The page of KAGS without an LLM (``research/kags_page.py``): each run's tables and
command, its recall-against-latency plot drawn the same twice, runs merged into the
results, and a run refused without its command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kags_page import TITLE, main, render, run_section


def _run(r5: float) -> dict[str, Any]:
    figures = {"sentence_precision": 0.1, "sentence_recall": 0.4, "sentences": 20.0}
    return {
        "dense": {"R@2": 0.6, "R@2_ci": [0.5, 0.7], "R@5": 0.8, "p50_ms": 0.1},
        "kags": {"R@2": 0.3, "R@5": r5, "R@5_ci": [r5 - 0.1, r5 + 0.1], "p50_ms": 30.0},
        "kags_sentences": figures,
        "_run": {"dataset": "hotpotqa", "index": {"kags_triples": 12}},
        "_command": "python research/kags.py --dataset hotpotqa",
    }


def test_a_run_shows_the_retrievers_and_its_sentence_figures() -> None:
    text = "\n".join(run_section("hotpotqa", _run(0.4)))
    assert text.startswith("\n### hotpotqa\n")
    assert "| dense MiniLM top-k | 0.6 [0.5, 0.7] | 0.8 | 0.1 |" in text
    assert (
        "| KAGS: top-7 triples, metadata filter tau 0.5, 2 hops (no LLM) | 0.3 | 0.4 [0.3, 0.5] "
        "| 30 |" in text
    )
    assert "| with the metadata filter (tau 0.5, `keep_best`) | 0.1 | 0.4 |  |  | 20.0 |" in text
    assert "without the filter" not in text  # not recorded for this run
    assert "KAGS triples stored: 12" in text and "--dataset hotpotqa" in text


def test_the_page_is_a_section_with_each_plot_drawn_the_same_twice(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots need the docs extra")
    runs = {"hotpotqa": _run(0.4), "other": {**_run(0.5), "_run": {"dataset": "unknown"}}}
    first = render(runs, tmp_path / "a")
    assert render(runs, tmp_path / "b") == first
    drawn = (tmp_path / "a" / "kags-hotpotqa.svg").read_bytes()
    assert (
        drawn.startswith(b"<?xml") and drawn == (tmp_path / "b" / "kags-hotpotqa.svg").read_bytes()
    )
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["kags-hotpotqa.svg"]
    assert first.startswith(f"## {TITLE}\n")
    assert "## " not in first.split("\n", 1)[1].replace("### ", "")  # one section
    # the plot follows its run's tables, before the next run
    hotpot, other = first.split("### hotpotqa")[1].split("### other")
    assert "](../images/bench/kags-hotpotqa.svg)" in hotpot
    assert "*kags hotpotqa: R@2 and R@5 (bootstrap 95% interval) against p50 latency" in hotpot
    assert "Not drawn: kags run other: no metric known for unknown." in other


def test_runs_merge_into_the_results_and_one_without_its_command_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="the plots need the docs extra")
    results, out = tmp_path / "kags.json", tmp_path / "kags.md"
    results.write_text(json.dumps({"hotpotqa": _run(0.4)}))
    run = tmp_path / "musique-gpt.json"
    run.write_text(json.dumps({**_run(0.6), "_run": {"dataset": "musique"}}))
    (tmp_path / "musique-gpt.json.cmd").write_text("python research/kags.py --dataset musique\n")
    args = ["--results", str(results), "--out", str(out), "--images", str(tmp_path / "img")]
    main([*args, "--run", str(run)])
    saved = json.loads(results.read_text())
    assert list(saved) == ["hotpotqa", "musique-gpt"]
    assert saved["musique-gpt"]["_command"] == "python research/kags.py --dataset musique"
    page = out.read_text()
    assert "### hotpotqa" in page and "### musique-gpt" in page
    assert "Command: `python research/kags.py --dataset musique`" in page
    assert (tmp_path / "img" / "kags-musique-gpt.svg").exists()
    bare = tmp_path / "2wiki.json"
    bare.write_text(json.dumps(_run(0.2)))
    out.unlink()
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--run", str(run), "--run", str(bare)])
    assert exit_info.value.code == 2 and "no command recorded" in capsys.readouterr().err
    assert json.loads(results.read_text()) == saved and not out.exists()  # nothing written
