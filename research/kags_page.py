"""The page of KAGS without an LLM: each run of ``research/kags.py``, KAGS beside the
other retrievers on one index, its source sentences against HotpotQA's gold ones, and
its recall against latency.

    python research/kags_page.py --results docs/kags.json --out /tmp/kags.md [--run J ...]
    quillian bench report --no-runs --section /tmp/kags.md --section-group KAGS

Each ``J`` is the JSON ``research/kags.py`` printed, with the command that produced it
in ``J.cmd`` (or ``J.json.cmd``) beside it. Runs are named by their file's stem and
merged into ``--results`` (one replaces the recorded run of its name); the page is
written from all of them as a section (markdown starting with its ``## `` title) for
``quillian bench report --section``, with each run's recall-against-latency plot drawn
into ``--images``. KAGS without an LLM is a study, not a benchmark a user of the package
runs, so its page is drawn here and not by ``quillian bench report``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from quillian.bench.plots import Plots, recall_latency_plots
from quillian.bench.report import with_command
from quillian.bench.report_sections import table
from quillian.errors import InputError

__all__ = ["main", "render"]

TITLE = "KAGS without an LLM"
#: The plots' kind: their files are ``kags-RUN.svg``.
KIND = "kags"
SENTENCES = {
    "kags_sentences": "with the metadata filter (tau 0.5, `keep_best`)",
    "kags_sentences_unfiltered": "without the filter (every top-7 hit kept)",
}
SENTENCE_FIGURES = [
    "sentence_precision",
    "sentence_recall",
    "hop0_sentence_precision",
    "hop0_sentence_recall",
    "sentences",
    "relations",
    "empty",
    "below_tau",
]
INTRODUCTION = (
    "Each run indexes once (spaCy extraction, MiniLM) with the KAGS stage and scores "
    "the retrievers on it side by side. KAGS returns only the passages holding its kept "
    "relations' source sentences (best sentence cosine first), so it may return fewer "
    "than k. Its triples here are spaCy's (the recorded GPT-3.5 OpenIE extractions for "
    "musique-gpt): `related_to` links between entities named "
    "in one sentence, and between a passage's subject and each entity of its passage, "
    "kept when the sentence names both ends (the passage's subject counts as named in "
    'each of its sentences: "He was born in Milwaukee"); the `kags-llm` '
    "extractor's 4-tuples need an LLM pass over the corpus, not run for these figures. "
    "When the filter keeps none of the top 7, the hit whose sentence is closest to the "
    "question is kept (`keep_best`; the authors' code keeps nothing)."
)


def run_section(name: str, run: dict[str, Any]) -> list[str]:
    """One run: the retrievers side by side, and on HotpotQA KAGS's kept source
    sentences against the gold supporting ones."""
    metric = ["perfect@8", "multihop_perfect@8"] if "2wiki" in name else ["R@2", "R@5"]
    parts = ["", f"### {name}", "", table({name: run}, [name], [*metric, "p50_ms"])]
    rows = [k for k in SENTENCES if k in run]
    if rows:
        parts += [
            "",
            "KAGS's kept source sentences (all hops; `hop0_`: the filtered top-k "
            "triples only) against HotpotQA's gold supporting sentences:",
            "",
            "| setting | " + " | ".join(SENTENCE_FIGURES) + " |",
            "|---|" + "---|" * len(SENTENCE_FIGURES),
        ]
        for key in rows:
            cells = [f"{run[key].get(f, '')}" for f in SENTENCE_FIGURES]
            parts.append(f"| {SENTENCES[key]} | " + " | ".join(cells) + " |")
    triples = run.get("_run", {}).get("index", {}).get("kags_triples")
    return [*parts, "", f"KAGS triples stored: {triples}. Command: `{run.get('_command', '')}`"]


def render(runs: dict[str, Any], images: Path) -> str:
    """The section's markdown, each run's plot drawn into ``images`` and shown after
    its tables."""
    images.mkdir(parents=True, exist_ok=True)
    plots = Plots()
    recall_latency_plots(runs, images, plots, KIND, TITLE)
    drawn = {f.file: f for f in plots.figures}
    parts = [
        f"## {TITLE}",
        "",
        "Rendered by `python research/kags_page.py` from `docs/kags.json`.",
        "",
        INTRODUCTION,
    ]
    for name, run in runs.items():
        parts += run_section(name, run)
        if figure := drawn.get(f"{KIND}-{name}.svg"):
            image = f"![{figure.caption}](../images/bench/{figure.file})"
            parts += ["", image, "", f"*{figure.caption}.*"]
    for reason in plots.skipped:
        parts += ["", f"Not drawn: {reason}."]
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("docs/kags.json"))
    parser.add_argument("--out", type=Path, required=True, help="the section file to write")
    parser.add_argument("--images", type=Path, default=Path("docs/images/bench"))
    parser.add_argument(
        "--run",
        type=Path,
        action="append",
        metavar="JSON",
        help="JSON from python research/kags.py (repeatable, named by the file's stem)",
    )
    args = parser.parse_args(argv)
    runs: dict[str, Any] = (
        json.loads(args.results.read_text(encoding="utf-8")) if args.results.exists() else {}
    )
    try:
        for path in args.run or ():
            runs[path.stem] = with_command(path)
    except InputError as exc:
        parser.error(str(exc))
    args.out.write_text(render(runs, args.images), encoding="utf-8")
    args.results.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
