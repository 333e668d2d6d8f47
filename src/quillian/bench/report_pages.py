"""The benchmark pages laid out from the recorded results: one short summary page
(``docs/benchmarks.md``: the headline figures, their plots and commands, links to
everything else), a page per kind of generated result under ``docs/bench/``, and a
page per written study under ``docs/sections/``. Paths are relative to the docs folder.
"""

from __future__ import annotations

import json
import re
from typing import Any

from quillian.bench.plots import Figure, Plots
from quillian.bench.report_kg import kg_sections, know3_section
from quillian.bench.report_qa import qa_sections
from quillian.bench.report_sections import (
    NOTES,
    build_rows,
    paired_section,
    serve_section,
    table,
    tune_section,
)

__all__ = ["DETAIL_PAGES", "IMAGES", "SUMMARY", "render_pages", "section_page"]

SUMMARY = "benchmarks.md"
IMAGES = "images/bench"
#: The generated detail pages, by what they hold: path and title.
DETAIL_PAGES = {
    "retrieval": ("bench/retrieval.md", "Retrieval in detail"),
    "qa": ("bench/qa.md", "Question answering runs"),
    "kg": ("bench/kg.md", "Knowledge graphs: linking, and Know3-RAG's calibration"),
    "serving": ("bench/serving.md", "Serving under load"),
}
#: A written study's group when none was recorded for it.
OTHER_STUDIES = "Other studies"
STORAGE_STUDY = "Storage: embedded against PostgreSQL + pgvector"


def section_page(title: str, section_pages: dict[str, dict[str, str]]) -> tuple[str, str]:
    """A written study's page (relative to the docs folder) and its group."""
    recorded = section_pages.get(title, {})
    stem = recorded.get("page") or re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
    return f"sections/{stem}.md", recorded.get("group", OTHER_STUDIES)


def render_pages(recorded: dict[str, Any], plots: Plots, machine: str) -> dict[str, str]:
    """Every benchmark page's text, by its path relative to the docs folder."""
    sections: dict[str, str] = recorded.get("sections") or {}
    section_pages: dict[str, dict[str, str]] = recorded.get("section_pages") or {}
    pages = {
        SUMMARY: _summary(recorded, plots, machine, section_pages),
        DETAIL_PAGES["retrieval"][0]: _retrieval_page(recorded, plots),
        DETAIL_PAGES["qa"][0]: _page(
            "qa",
            [
                *_figures(plots.on("summary"), "../", only="qa-"),
                *qa_sections(recorded.get("qa") or {}),
            ],
        ),
        DETAIL_PAGES["kg"][0]: _page(
            "kg",
            [
                *_figures(plots.on("kg"), "../"),
                *kg_sections(recorded.get("kg") or {}),
                *know3_section(recorded.get("kg") or {}),
            ],
        ),
        DETAIL_PAGES["serving"][0]: _page("serving", serve_section(recorded.get("serve"))),
    }
    for title, text in sections.items():
        pages[section_page(title, section_pages)[0]] = text.strip() + "\n"
    return pages


def _page(kind: str, body: list[str]) -> str:
    title = DETAIL_PAGES[kind][1]
    lines = [
        f"# {title}",
        "",
        f"Rendered by `quillian bench report`; the summary: [Benchmarks](../{SUMMARY}).",
    ]
    if not [line for line in body if line.strip()]:
        body = ["", "Nothing recorded yet."]
    return "\n".join([*lines, *body]).rstrip() + "\n"


def _figures(figures: list[Figure], prefix: str, only: str = "") -> list[str]:
    """Markdown for figures, each followed by its caption."""
    lines: list[str] = []
    for f in figures:
        if f.file.startswith(only):
            lines += ["", f"![{f.caption}]({prefix}{IMAGES}/{f.file})", "", f"*{f.caption}.*"]
    return lines


def _retrieval_page(recorded: dict[str, Any], plots: Plots) -> str:
    runs = recorded.get("runs") or {}
    body = ["", *paired_section(runs)]
    body += _figures(plots.on("retrieval"), "../", only="paired")
    if runs:
        body += ["", "## Index builds", "", build_rows(runs)]
    body += tune_section(recorded.get("tune") or {})
    body += _figures(plots.on("retrieval"), "../", only="tuning")
    scale = recorded.get("scale")
    if scale:
        body += [
            "",
            "## Scale: synthetic Wikidata5M-shaped graph",
            "",
            "`python -m quillian.bench.scale --nodes 5000000 --edges 21000000`",
            "",
            "```json",
            json.dumps(scale, indent=1),
            "```",
        ]
    return _page("retrieval", body)


def _summary(
    recorded: dict[str, Any],
    plots: Plots,
    machine: str,
    section_pages: dict[str, dict[str, str]],
) -> str:
    runs = recorded.get("runs") or {}
    shown = plots.on("summary")
    parts = [
        "# Benchmarks",
        "",
        "The current figures, each with the command that reruns it and its bootstrap 95% "
        "interval over the questions where one was recorded. "
        "`python -m quillian.bench.report --bench ../shared/bench --fresh` reruns the "
        "retrieval, latency, index-build and graph-scale benchmarks and redraws every page "
        "and plot; `--no-runs` redraws them from the recorded results "
        "(`docs/benchmarks.json`) and `--plots-only` only the plots, neither needing an "
        "index. The longer runs and every study have pages of their own, linked below.",
        "",
        machine,
        "",
        "## 2WikiMultihopQA: perfect retrieval@8 (all gold passages in the top 8)",
        "",
        "51 questions; peers' figures computed from their recorded top-8 lists on the same "
        "questions (their corpus was about the first 800 passages). Each figure is followed "
        "by its bootstrap 95% interval over the questions; one question is 0.02 here.",
        "",
        table(
            runs, _present(runs, ["2wiki-800", "2wiki-all"]), ["perfect@8", "multihop_perfect@8"]
        ),
        *_figures(shown, "", only="retrieval-2wiki"),
        "",
        "## MuSiQue and HotpotQA: Recall@2 and Recall@5",
        "",
        "Each figure with its bootstrap 95% interval over the questions.",
        "",
        table(runs, _present(runs, ["musique-spacy", "musique-gpt", "hotpotqa"]), ["R@2", "R@5"]),
        *_figures(shown, "", only="retrieval-musique"),
        *_figures(shown, "", only="retrieval-hotpotqa"),
        "",
        "## Retrieval latency (ms, query embedding excluded)",
        "",
        "The retrieval runs record no load average; they ran on the 2-core machine above, "
        "shared with other work.",
        "",
        table(runs, list(runs), ["p50_ms", "p95_ms"]),
        "",
        "Paired comparisons, index builds, tuning by cross-validation and the graph-scale "
        "run: [{1}]({0}).".format(*DETAIL_PAGES["retrieval"]),
    ]
    parts += _qa_summary(shown)
    parts += _storage_summary(shown, section_pages)
    parts += _serving_summary(recorded.get("serve"))
    parts += ["", "## What the plots leave out", ""]
    parts += [f"- {reason}." for reason in plots.skipped] or ["- Nothing: every figure drawn."]
    parts += ["", NOTES.strip(), "", "## Commands", ""]
    parts += [f"- {name}: `{r['_command']}`" for name, r in runs.items() if "_command" in r]
    parts += _study_links(recorded.get("sections") or {}, section_pages)
    return "\n".join(parts).rstrip() + "\n"


def _present(runs: dict[str, Any], names: list[str]) -> list[str]:
    return [n for n in names if n in runs]


def _qa_summary(shown: list[Figure]) -> list[str]:
    path, title = DETAIL_PAGES["qa"]
    return [
        "",
        "## Question answering: cost against quality",
        "",
        "The bundled 0.5B local model as backbone; every run's table and its command: "
        f"[{title}]({path}).",
        *_figures(shown, "", only="qa-"),
    ]


def _storage_summary(shown: list[Figure], section_pages: dict[str, dict[str, str]]) -> list[str]:
    page, _ = section_page(STORAGE_STUDY, section_pages)
    return [
        "",
        "## Storage backends side by side",
        "",
        f'The figures, the command and what they measure: ["{STORAGE_STUDY}"]({page}).',
        *_figures(shown, "", only="storage"),
    ]


def _serving_summary(serve: dict[str, Any] | None) -> list[str]:
    path, title = DETAIL_PAGES["serving"]
    if not serve or not serve.get("retrieve"):
        return ["", "## Serving", "", f"Nothing recorded yet: [{title}]({path})."]
    rows = [
        f"| {r['clients']} | {r['rps']} | {r['p50_ms']} | {r['p95_ms']} | {r['errors']} |"
        for r in serve["retrieve"]
    ]
    loads = (
        f"{serve.get('load_average_at_start')} at start, {serve.get('load_average_at_end')} at end"
    )
    return [
        "",
        "## Serving",
        "",
        f"`quillian serve` answering `{serve.get('method')}` retrievals over HTTP on "
        f"{serve.get('cpus')} cores (load average {loads}); the whole run: [{title}]({path}).",
        "",
        "| clients | requests/s | p50 ms | p95 ms | errors |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Command: `{serve.get('_command', '')}`",
    ]


def _study_links(sections: dict[str, str], section_pages: dict[str, dict[str, str]]) -> list[str]:
    """Every written study, grouped, linked by its full title (README names them so)."""
    groups: dict[str, list[str]] = {}
    for title in sections:
        page, group = section_page(title, section_pages)
        groups.setdefault(group, []).append(f"- [{title}]({page})")
    if not groups:
        return []
    lines = ["", "## Studies", "", "Each study on its own page, with its figures and commands."]
    for group, links in groups.items():
        lines += ["", f"### {group}", "", *links]
    return lines
