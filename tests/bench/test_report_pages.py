"""The benchmark pages laid out from a recorded report: a short summary with the headline
tables, plots and links, a page per kind of result and one per written study, and
``quillian bench report``'s paths that run nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the plots need the docs extra")

from tests.bench.test_plots import recorded

from quillian.bench import report
from quillian.bench.plots import STORAGE_SECTION, Plots, render_plots
from quillian.bench.report_pages import DETAIL_PAGES, SUMMARY, render_pages
from quillian.cli.main import main as cli_main

STUDY = "Retrieval lift, round 1: synonym edges"


def _recorded() -> dict:
    data = recorded()
    data["sections"][STUDY] = f"## {STUDY}\n\nR@5 0.91 -> 0.93.\n"
    data["section_pages"] = {
        STUDY: {"page": "lift1", "group": "Retrieval lift"},
    }
    data["runs"]["2wiki-800"]["_command"] = "quillian bench retrieval --dataset 2wiki"
    return data


def test_the_summary_holds_the_headline_figures_plots_and_links(tmp_path: Path) -> None:
    data = _recorded()
    plots = render_plots(data, tmp_path)
    pages = render_pages(data, plots, "Machine: test")
    summary = pages[SUMMARY]
    # the headline tables with their intervals, and the runs' commands
    assert "## 2WikiMultihopQA: perfect retrieval@8" in summary
    assert "0.9 [0.8, 1]" in summary and "0.92 [0.82, 0.98]" in summary
    assert "`quillian bench retrieval --dataset 2wiki`" in summary
    # every summary figure shown with its caption; the detail pages' figures there
    for figure in plots.on("summary"):
        assert f"](images/bench/{figure.file})" in summary
        assert f"*{figure.caption}.*" in summary
    assert "](../images/bench/paired.svg)" in pages[DETAIL_PAGES["retrieval"][0]]
    assert "](../images/bench/tuning.svg)" in pages[DETAIL_PAGES["retrieval"][0]]
    assert "## What the plots leave out" in summary and "hotpotqa, qa-smoke" in summary
    # every study on its own page, linked from the summary by its full title and group
    assert pages["sections/lift1.md"].startswith(f"## {STUDY}")
    assert f"- [{STUDY}](sections/lift1.md)" in summary
    assert "### Retrieval lift" in summary
    storage_page = "sections/storage-embedded-against-postgresql-pgvector.md"
    assert pages[storage_page].startswith(f"## {STORAGE_SECTION}")
    assert "### Other studies" in summary
    # every generated page exists, each with its title and a way back
    for path, title in DETAIL_PAGES.values():
        assert pages[path].startswith(f"# {title}\n")
        assert f"(../{SUMMARY})" in pages[path]
    assert "Nothing recorded yet." in pages[DETAIL_PAGES["serving"][0]]
    assert "## Question answering: hotpotqa, qa-smoke" in pages[DETAIL_PAGES["qa"][0]]


def test_pages_with_nothing_recorded_still_render() -> None:
    pages = render_pages({}, Plots(), "Machine: test")
    assert pages[SUMMARY].startswith("# Benchmarks\n")
    assert "## Studies" not in pages[SUMMARY]
    assert set(pages) == {SUMMARY, *(p for p, _ in DETAIL_PAGES.values())}


def _saved(tmp_path: Path) -> Path:
    out = tmp_path / "docs" / "benchmarks.md"
    out.parent.mkdir()
    out.with_suffix(".json").write_text(json.dumps(_recorded()))
    return out


def test_no_runs_redraws_every_page_and_plot_from_the_recorded_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _saved(tmp_path)
    ran: list[str] = []
    monkeypatch.setattr(report, "_run", lambda *a: ran.append("run"))
    monkeypatch.setattr(report, "run_scale", lambda *a: ran.append("scale"))
    before = json.loads(out.with_suffix(".json").read_text())
    report.main(["--out", str(out), "--no-runs"])
    docs = out.parent
    assert ran == []
    assert out.read_text().startswith("# Benchmarks")
    assert (docs / "sections" / "lift1.md").read_text().startswith(f"## {STUDY}")
    for path, _ in DETAIL_PAGES.values():
        assert (docs / path).stat().st_size > 0
    assert (docs / "images" / "bench" / "retrieval-2wiki-800.svg").stat().st_size > 0
    assert json.loads(out.with_suffix(".json").read_text()) == before


def test_plots_only_draws_the_plots_and_writes_no_page(tmp_path: Path) -> None:
    out = _saved(tmp_path)
    images = tmp_path / "figures"
    command = ["bench", "report", "--out", str(out), "--plots-only", "--images", str(images)]
    assert cli_main(command) == 0  # quillian bench report passes its options through
    drawn = {p.name for p in images.iterdir()}
    assert {"retrieval-2wiki-800.svg", "paired.svg", "storage.svg"} <= drawn
    assert not out.exists()
    assert not (out.parent / "bench").exists()


def test_a_section_is_recorded_with_its_page_and_group(tmp_path: Path) -> None:
    out = _saved(tmp_path)
    section = tmp_path / "ppr-power.md"
    section.write_text("## PPR: power iteration\n\n12 products.\n")
    report.main(
        ["--out", str(out), "--no-runs", "--section", str(section), "--section-group", "Graph"]
    )
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["section_pages"]["PPR: power iteration"] == {"page": "ppr-power", "group": "Graph"}
    assert (out.parent / "sections" / "ppr-power.md").read_text() == section.read_text()
    assert "- [PPR: power iteration](sections/ppr-power.md)" in out.read_text()


SCORES = {
    "em": 0.5,
    "f1": 0.5,
    "accuracy": 0.5,
    "tokens_per_question": 10,
    "seconds_per_question": 1.0,
    "parse_failure_share": 0.0,
    "unfinished": 0,
}


def test_a_qa_run_is_drawn_with_its_passage_figures_from_its_summary_alone(
    tmp_path: Path,
) -> None:
    """``--qa`` reads the run's summary and command alone: no predictions, no index.
    A run recorded before summaries held the figures keeps the ones recorded for it."""
    run = tmp_path / "qa-run"
    run.mkdir()
    figures = {"passages_per_question": 4.5, "evidence_recall": 0.75, "recall@3": 0.5}
    methods = {
        "no-retrieval": {**SCORES, "evidence_recall": 0.0, "passages_per_question": 0.0},
        "kg-infused-rag": {**SCORES, **figures},
    }
    summary = {"dataset": "musique", "model": "m", "questions": 2, "methods": methods}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "command.txt").write_text("quillian bench qa --dataset musique\n")
    out = _saved(tmp_path)
    recorded = json.loads(out.with_suffix(".json").read_text())
    old = {"passages": 6.0, "recall": 0.75, "recall_first3": 0.6117}
    recorded["qa"] = {"musique, old": {**summary, "_passages": {"sa-rag": old}}}
    out.with_suffix(".json").write_text(json.dumps(recorded))
    report.main(["--out", str(out), "--no-runs", "--qa", str(run / "summary.json")])
    page = (out.parent / DETAIL_PAGES["qa"][0]).read_text()
    new = page[page.index("## Question answering: musique, qa-run") :]
    assert "| kg-infused-rag | 4.5 | 0.750 | 0.500 |" in new
    assert "| no-retrieval |" not in new.split("Passages in front of the model")[1]
    assert "| sa-rag | 6.0 | 0.750 | 0.612 |" in page[: page.index(new)]
    saved = json.loads(out.with_suffix(".json").read_text())["qa"]["musique, qa-run"]
    assert "_passages" not in saved and saved["methods"] == methods
