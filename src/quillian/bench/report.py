"""Regenerate the benchmark pages: every retriever side by side on ../shared/bench.

    quillian bench report --bench ../shared/bench --out docs/benchmarks.md
    quillian bench report --no-runs       # pages and plots from docs/benchmarks.json
    quillian bench report --plots-only    # only the plots (docs/images/bench/)

Each retrieval run is a separate ``quillian bench retrieval --json`` process, so peak
memory and build time are per index. Indexes are cached under ``--indexes``; ``--fresh``
rebuilds them so build times are measured from scratch. Results are saved next to the
summary page (``benchmarks.json``); ``--only`` reruns some runs and keeps the others.
``docs/benchmarks.md`` is the short summary with the plots; the other results go to
``docs/bench/`` and each written study (``--section``) to its own page under
``docs/sections/`` (see :mod:`quillian.bench.report_pages`).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from quillian.bench.plots import Plots, render_plots
from quillian.bench.report_pages import IMAGES, OTHER_STUDIES, SUMMARY, render_pages
from quillian.bench.scale import run as run_scale
from quillian.errors import InputError

__all__ = ["main", "with_command", "write_report"]

#: The JSON results given as ``--NAME JSON``, each shown with the command in a FILE.cmd
#: beside it: where it is recorded (keys, ``*`` the file's stem: repeatable) and what
#: printed it. Each replaces the result recorded where it goes.
RESULT_INPUTS = {
    "kg-link": ("kg.link", "quillian kg link --json"),
    "kg-cross": ("kg.cross", "quillian bench retrieval --kg KG+index --json"),
    "know3-calibration": ("kg.know3_calibration", "quillian know3 calibrate --json"),
    "serve-load": ("serve", "python -m quillian.server.load"),
    "tune": ("tune.*", "quillian bench tune --json"),
}

#: The retrievers of the retrieval tables (KAG's and KAGS's have studies of their own).
RUN_METHODS = ["--methods", "sa,sa-paper,ppr,dense,bm25,fused"]
#: 2Wiki's headline comparison: Quillian's best against the best peer, question by question.
PEER_PAIRS = ["--compare", "sa:peer:fast_graphrag", "--compare", "ppr:peer:fast_graphrag"]
RUNS: list[tuple[str, str, list[str]]] = [
    ("2wiki-800", "2wiki", ["--first-n", "800", *RUN_METHODS, *PEER_PAIRS]),
    ("2wiki-all", "2wiki", [*RUN_METHODS, *PEER_PAIRS]),
    ("musique-spacy", "musique", RUN_METHODS),
    (
        "musique-gpt",
        "musique",
        ["--extractions", "{bench}/musique/openie_gpt-3.5-turbo-1106.jsonl", *RUN_METHODS],
    ),
    ("hotpotqa", "hotpotqa", RUN_METHODS),
]
FILES = {
    "2wiki": ("2wiki/corpus.json", "2wiki/questions.jsonl"),
    "musique": ("musique/corpus.json", "musique/questions.jsonl"),
    "hotpotqa": ("hotpotqa/corpus.json", "hotpotqa/questions.json"),
}


def _run(name: str, dataset: str, extra: list[str], bench: Path, indexes: Path) -> dict[str, Any]:
    corpus, questions = FILES[dataset]
    cmd = [
        sys.executable,
        "-m",
        "quillian.cli.main",
        "bench",
        "retrieval",
        "--dataset",
        dataset,
        "--corpus",
        str(bench / corpus),
        "--questions",
        str(bench / questions),
        "--index-dir",
        str(indexes / name),
        "--json",
        *(a.format(bench=bench) for a in extra),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["_command"] = "quillian " + " ".join(cmd[3:])
    return result


def _keep_build_figures(new: dict[str, Any], old: dict[str, Any] | None) -> None:
    """A run that reused an existing index keeps the from-scratch build figures."""
    index = new["_run"]["index"]
    if index.get("reused") and old is not None:
        for key in ("build_seconds", "stage_seconds", "peak_rss_mb"):
            index[key] = old["_run"]["index"][key]


def machine_line() -> str:
    """The machine line of the summary page: this machine, when the page was drawn."""
    return (
        f"Machine: {platform.machine()}, {platform.python_version()}, 2 cores, generated "
        f"{time.strftime('%Y-%m-%d')}. Retrieval uses no LLM: graphs come from spaCy NER or "
        "from the recorded GPT-3.5 extractions; question answering uses the bundled local model."
    )


def write_report(recorded: dict[str, Any], out: Path, images: Path) -> Plots:
    """Draw the plots into ``images`` and write every page: ``out`` is the summary page,
    the others go beside it (``bench/``, ``sections/``). Returns what was drawn."""
    plots = render_plots(recorded, images)
    docs = out.parent
    for relative, text in render_pages(recorded, plots, machine_line()).items():
        path = out if relative == SUMMARY else docs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return plots


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quillian bench report", description=__doc__)
    parser.add_argument("--bench", type=Path, default=Path("../shared/bench"))
    parser.add_argument("--indexes", type=Path, default=Path("indexes/report"))
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("docs/benchmarks.md"),
        help="the summary page; the other pages go beside it, the results to OUT's .json",
    )
    parser.add_argument(
        "--images", type=Path, help="where the plots go (default: OUT's folder/images/bench)"
    )
    parser.add_argument("--fresh", action="store_true", help="rebuild the selected indexes")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument(
        "--only", help="comma-separated run names; the others keep their saved results"
    )
    parser.add_argument(
        "--no-runs",
        action="store_true",
        help="run no benchmark (no retrieval, no scale): redraw the pages and plots from "
        "the recorded results and the inputs given; needs no index",
    )
    parser.add_argument(
        "--plots-only",
        action="store_true",
        help="only draw the plots from the recorded results (OUT's .json); needs no index",
    )
    parser.add_argument(
        "--qa",
        action="append",
        type=Path,
        metavar="SUMMARY",
        help="summary.json of a `quillian bench qa` run to show (replaces one of that name)",
    )
    for name, (keys, source) in RESULT_INPUTS.items():
        named = " (repeatable, named by the file's stem)" if keys.endswith("*") else ""
        parser.add_argument(
            f"--{name}",
            type=Path,
            action="append",
            metavar="JSON",
            help=f"JSON from {source}{named}; a FILE.cmd beside it holds the command",
        )
    parser.add_argument(
        "--section",
        type=Path,
        action="append",
        metavar="MD",
        help="a written section (markdown starting with its '## ' title, its figures and "
        "the commands that produced them), kept verbatim; replaces one of the same title",
    )
    parser.add_argument(
        "--section-group",
        metavar="NAME",
        help="the group the --section studies are listed under (default: the one recorded "
        f"for that title, else {OTHER_STUDIES!r})",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    uncommanded = [str(p) for _, p in _given_results(args) if _command_file(p) is None]
    if uncommanded:  # before any benchmark runs: a figure is shown with its command
        parser.error(
            "no command recorded beside " + ", ".join(uncommanded) + ": write each one's "
            "command to a FILE.cmd beside it (X.json.cmd or X.cmd)"
        )
    sections = [_read_section(path, parser) for path in args.section or ()]
    saved = args.out.with_suffix(".json")
    recorded: dict[str, Any] = json.loads(saved.read_text()) if saved.exists() else {}
    images = args.images or args.out.parent / IMAGES
    if args.plots_only:
        render_plots(recorded, images)
        return
    if not args.no_runs:
        _run_benchmarks(args, recorded)
    _add_inputs(args, recorded)
    for path, title, text in sections:
        _add_section(recorded, path, title, text, args.section_group)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_report(recorded, args.out, images)
    saved.write_text(json.dumps(recorded, indent=1))


def _read_section(path: Path, parser: argparse.ArgumentParser) -> tuple[Path, str, str]:
    """A written section: its file, its title and its text (refused without a title)."""
    text = path.read_text(encoding="utf-8").strip()
    if not text.startswith("## "):
        parser.error(f"{path}: a section starts with its '## ' title")
    return path, text.splitlines()[0][3:].strip(), text


def _add_section(
    recorded: dict[str, Any], path: Path, title: str, text: str, group: str | None
) -> None:
    """Record a written section; its page is named by its file, its group as given."""
    recorded.setdefault("sections", {})[title] = text
    pages = recorded.setdefault("section_pages", {})
    old = pages.get(title, {})
    pages[title] = {"page": path.stem, "group": group or old.get("group", OTHER_STUDIES)}


def _run_benchmarks(args: argparse.Namespace, recorded: dict[str, Any]) -> None:
    """The retrieval runs (``--only`` some of them) and the graph-scale run, recorded."""
    wanted = set(args.only.split(",")) if args.only else None
    results = dict(recorded.get("runs") or {})
    for name, dataset, extra in RUNS:
        if wanted is None or name in wanted:
            if args.fresh:
                shutil.rmtree(args.indexes / name, ignore_errors=True)
            print(f"running {name}", file=sys.stderr, flush=True)
            fresh = _run(name, dataset, extra, args.bench, args.indexes)
            _keep_build_figures(fresh, results.get(name))
            results[name] = fresh
    recorded["runs"] = {name: results[name] for name, _, _ in RUNS if name in results}
    if not args.skip_scale:
        recorded["scale"] = run_scale(5_000_000, 21_000_000, args.indexes / "synthetic")


def _add_inputs(args: argparse.Namespace, recorded: dict[str, Any]) -> None:
    """The results given on the command line, each replacing one of its name."""
    for path in args.qa or ():
        run = json.loads(path.read_text())
        command = (path.parent / "command.txt").read_text().strip()
        recorded.setdefault("qa", {})[f"{run['dataset']}, {path.parent.name}"] = {
            **run,
            "_command": command,
        }
    for name, path in _given_results(args):
        *parents, last = [path.stem if k == "*" else k for k in RESULT_INPUTS[name][0].split(".")]
        place = recorded
        for key in parents:
            place = place.setdefault(key, {})
        place[last] = with_command(path)


def _command_file(path: Path) -> Path | None:
    """The file beside a JSON result that holds the command which produced it:
    ``X.json.cmd`` or ``X.cmd`` for ``X.json``; None if neither exists."""
    for command in (path.with_name(path.name + ".cmd"), path.with_suffix(".cmd")):
        if command.exists():
            return command
    return None


def with_command(path: Path) -> dict[str, Any]:
    """A JSON result, with the command that produced it (its :func:`_command_file`)."""
    data: dict[str, Any] = json.loads(path.read_text())
    command = _command_file(path)
    if command is None:
        raise InputError(f"no command recorded: write it to {path}.cmd", path=str(path))
    data["_command"] = command.read_text().strip()
    return data


def _given_results(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The JSON results given on the command line (:data:`RESULT_INPUTS`), by option."""
    return [(n, p) for n in RESULT_INPUTS for p in getattr(args, n.replace("-", "_")) or ()]


if __name__ == "__main__":
    main()
