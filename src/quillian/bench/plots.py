"""Benchmark figures drawn from the recorded results (``docs/benchmarks.json``).

Every figure is drawn from what the JSON holds, never from a fresh run, so
``python -m quillian.bench.report --plots-only`` needs no index and no data set. The
files are SVG with their text kept as text, a fixed size, a fixed hash salt and no date,
so drawing the same JSON twice gives the same bytes. Needs matplotlib (extra ``docs``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian.errors import MissingExtraError

__all__ = ["RC", "Figure", "Plots", "figure_context", "recall_latency_plots", "render_plots"]

#: Retrieval runs and the two metrics each panel pair shows (the first is the headline).
RETRIEVAL_METRICS = {
    "2wiki": ("perfect@8", "multihop_perfect@8"),
    "musique": ("R@2", "R@5"),
    "hotpotqa": ("R@2", "R@5"),
}
#: QA runs with fewer questions than this are smoke runs, too small to read on a plot.
QA_MIN_QUESTIONS = 20
#: Same drawing settings for every figure: text kept as text, ids from a fixed salt.
RC: dict[str, Any] = {
    "svg.hashsalt": "quillian-bench",
    "svg.fonttype": "none",
    "font.size": 8.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
METADATA = {"Date": None, "Creator": "quillian bench report"}
_NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?$")


@dataclass(frozen=True)
class Figure:
    """One drawn figure: its file name, what it shows, and the page it belongs on."""

    file: str
    caption: str
    page: str


@dataclass
class Plots:
    """The figures drawn, and what could not be drawn with the reason."""

    figures: list[Figure] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def on(self, page: str) -> list[Figure]:
        """The figures that belong on ``page``."""
        return [f for f in self.figures if f.page == page]


def render_plots(recorded: dict[str, Any], out_dir: Path) -> Plots:
    """Draw every figure the recorded results allow into ``out_dir``; report the rest."""
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingExtraError("matplotlib", "docs") from exc
    matplotlib.use("Agg")
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = Plots()
    recall_latency_plots(recorded.get("runs") or {}, out_dir, plots, "retrieval", "summary")
    _paired(recorded.get("runs") or {}, out_dir, plots)
    _tuning(recorded.get("tune") or {}, out_dir, plots)
    _qa(recorded.get("qa") or {}, out_dir, plots)
    _storage(recorded.get("sections") or {}, out_dir, plots)
    if serve := recorded.get("serve"):
        counts = len(serve.get("retrieve") or [])
        plots.skipped.append(
            f"serving under load: a table ({counts} client counts, no intervals), not plotted"
        )
    return plots


@contextmanager
def figure_context(path: Path, width: float, height: float) -> Iterator[Any]:
    """A matplotlib figure (no pyplot state) with the report's drawing settings (:data:`RC`),
    saved to ``path`` deterministically."""
    import matplotlib
    from matplotlib.figure import Figure as MplFigure

    with matplotlib.rc_context():
        for key, value in RC.items():
            matplotlib.rcParams[key] = value  # type: ignore[index]  # keys typed as literals
        fig = MplFigure(figsize=(width, height), dpi=100, layout="constrained")
        yield fig
        fig.savefig(path, format="svg", metadata=METADATA)


def _label(method: str) -> str:
    return method.removeprefix("peer:")


def recall_latency_plots(
    runs: dict[str, Any], out_dir: Path, plots: Plots, kind: str, page: str
) -> None:
    """A recall-against-latency figure per run (``kind``: the retrieval runs or a
    study's), drawn into ``out_dir`` and added to ``plots`` for ``page``."""
    for name, run in runs.items():
        dataset = run.get("_run", {}).get("dataset", name.split("-")[0])
        metrics = RETRIEVAL_METRICS.get(dataset)
        if metrics is None:
            plots.skipped.append(f"{kind} run {name}: no metric known for {dataset}")
            continue
        file = f"{kind}-{name}.svg"
        with figure_context(out_dir / file, 7.0, 3.0) as fig:
            for ax, metric in zip(fig.subplots(1, 2), metrics, strict=True):
                _recall_latency_panel(ax, run, metric)
        peers = [m for m in run if m.startswith("peer:")]
        if not peers and kind == "retrieval":
            plots.skipped.append(
                f"peers on {name}: none recorded (the peers' top-8 lists exist for "
                "2WikiMultihopQA only)"
            )
        plots.figures.append(
            Figure(
                file,
                f"{kind} {name}: {' and '.join(metrics)} (bootstrap 95% interval) against p50 "
                "latency per retriever"
                + (
                    "; peers as dashed lines with their interval shaded (their latency is not "
                    "recorded)"
                    if peers
                    else ""
                ),
                page,
            )
        )


def _recall_latency_panel(ax: Any, run: dict[str, Any], metric: str) -> None:
    # by latency, so that neighbours' labels alternate above and below their points
    ordered = sorted(
        (m for m in run if not m.startswith("_") and metric in run[m]),
        key=lambda m: run[m].get("p50_ms") or 0.0,
    )
    shown = 0
    for method in ordered:
        figures = run[method]
        value, ci = figures[metric], figures.get(f"{metric}_ci") or [figures[metric]] * 2
        if method.startswith("peer:"):
            ax.axhline(value, linestyle="--", linewidth=0.8, color="grey")
            ax.axhspan(ci[0], ci[1], color="grey", alpha=0.08)
            ax.annotate(
                _label(method),
                (1.0, value),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=6,
                color="dimgrey",
            )
            continue
        if figures.get("p50_ms") is None:
            continue
        x = figures["p50_ms"]
        ax.errorbar(
            [x], [value], yerr=[[value - ci[0]], [ci[1] - value]], fmt="o", markersize=4, capsize=2
        )
        below = shown % 2 == 1
        ax.annotate(
            method,
            (x, value),
            textcoords="offset points",
            xytext=(4, -9 if below else 3),
            fontsize=7,
        )
        shown += 1
    ax.set_xscale("log")
    ax.set_xlabel("p50 latency, ms (log)")
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1.05)


def _paired(runs: dict[str, Any], out_dir: Path, plots: Plots) -> None:
    rows = [
        (f"{name}: {pair} ({metric})", c["diff"], c["ci"])
        for name, run in runs.items()
        for pair, metrics in run.get("_paired", {}).items()
        for metric in ("perfect@8", "R@5")
        if (c := metrics.get(metric)) is not None
    ]
    if not rows:
        plots.skipped.append("paired comparisons: none recorded")
        return
    file = "paired.svg"
    _interval_chart(out_dir / file, rows, "difference (paired bootstrap 95% interval)", zero=True)
    plots.figures.append(
        Figure(file, "Paired differences on the same questions, with 95% intervals", "retrieval")
    )


def _tuning(tune: dict[str, Any], out_dir: Path, plots: Plots) -> None:
    rows: list[tuple[str, float, list[float]]] = []
    for name, t in tune.items():
        rows.append(
            (f"{name}: defaults ({t['metric']})", t["default"]["score"], t["default"]["ci"])
        )
        rows.append((f"{name}: cross-validated", t["cv"]["score"], t["cv"]["ci"]))
    if not rows:
        plots.skipped.append("tuning: no `bench tune` run recorded")
        return
    file = "tuning.svg"
    _interval_chart(out_dir / file, rows, "score (bootstrap 95% interval)", zero=False)
    plots.figures.append(
        Figure(file, "Defaults against cross-validated options, 95% intervals", "retrieval")
    )


def _interval_chart(
    path: Path, rows: list[tuple[str, float, list[float]]], xlabel: str, *, zero: bool
) -> None:
    """One row per estimate: its point and its interval, labels on the left; a row
    labelled as defaults is grey, the others blue."""
    with figure_context(path, 7.0, 0.6 + 0.16 * len(rows)) as fig:
        ax = fig.subplots()
        ys = list(range(len(rows)))[::-1]
        for y, (label, value, ci) in zip(ys, rows, strict=True):
            ax.errorbar(
                [value],
                [y],
                xerr=[[value - ci[0]], [ci[1] - value]],
                fmt="o",
                markersize=3,
                capsize=2,
                color="grey" if ": defaults" in label else "tab:blue",
            )
        if zero:
            ax.axvline(0.0, color="grey", linewidth=0.8)
        ax.set_yticks(ys, [label for label, _, _ in rows], fontsize=6)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xlabel(xlabel)


def _qa(qa: dict[str, Any], out_dir: Path, plots: Plots) -> None:
    shown = {n: r for n, r in qa.items() if r.get("questions", 0) >= QA_MIN_QUESTIONS}
    small = [n for n in qa if n not in shown]
    if small:
        plots.skipped.append(
            f"QA runs under {QA_MIN_QUESTIONS} questions (smoke scale, too few to read on a "
            f"plot; their tables stay): {'; '.join(small)}"
        )
    if qa:
        plots.skipped.append("QA runs: no intervals recorded, so their points carry no bars")
    if not shown:
        return
    file = "qa-cost-quality.svg"
    cols = 3
    nrows = math.ceil(len(shown) / cols)
    with figure_context(out_dir / file, 7.5, 2.3 * nrows) as fig:
        axes = fig.subplots(nrows, cols, squeeze=False).ravel()
        methods = sorted({m for run in shown.values() for m in run.get("methods", {})})
        colours = {m: f"C{i % 10}" for i, m in enumerate(methods)}
        for ax, (name, run) in zip(axes, shown.items(), strict=False):
            _qa_panel(ax, name, run, colours)
        for ax in axes[len(shown) :]:
            ax.set_visible(False)
    plots.figures.append(
        Figure(
            file,
            "Question answering: F1 against LLM tokens per question, per method and run "
            f"(runs of {QA_MIN_QUESTIONS} questions or more; hollow: some calls answered "
            "from the response cache)",
            "summary",
        )
    )


def _qa_panel(ax: Any, name: str, run: dict[str, Any], colours: dict[str, str]) -> None:
    from matplotlib.ticker import NullFormatter

    top = 0.0
    for method, s in run.get("methods", {}).items():
        tokens, f1 = s.get("tokens_per_question"), s.get("f1")
        if tokens is None or f1 is None:
            continue
        hollow = bool(s.get("cached_calls"))
        top = max(top, f1)
        ax.plot(
            [tokens],
            [f1],
            "o",
            markersize=4,
            color=colours[method],
            fillstyle="none" if hollow else "full",
        )
        ax.annotate(method, (tokens, f1), textcoords="offset points", xytext=(3, 2), fontsize=6)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.margins(x=0.35)
    ax.set_ylim(0, top * 1.2 + 0.01)
    ax.set_title(f"{name} ({run.get('questions')} q)", fontsize=6)
    ax.set_xlabel("tokens per question (log)", fontsize=7)
    ax.set_ylabel("F1", fontsize=7)


def storage_rows(text: str) -> dict[str, tuple[list[float], list[float]]]:
    """The rows of a written section's two-column table whose cells are numbers
    (``12.9`` or ``12.9 / 28.81``), by row label: the figures of each column."""
    rows: dict[str, tuple[list[float], list[float]]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.lstrip().startswith("|"):
            continue
        left, right = (_numbers(c) for c in cells[1:])
        if left and right and len(left) == len(right):
            rows[cells[0]] = (left, right)
    return rows


def _numbers(cell: str) -> list[float]:
    parts = [p.strip() for p in cell.split("/")]
    if not all(_NUMBER.match(p) for p in parts):
        return []
    return [float(p.replace(",", "")) for p in parts]


STORAGE_SECTION = "Storage: embedded against PostgreSQL + pgvector"


def _storage(sections: dict[str, str], out_dir: Path, plots: Plots) -> None:
    text = sections.get(STORAGE_SECTION)
    rows = storage_rows(text) if text else {}
    latency = {k: v for k, v in rows.items() if "p50 / p95 (ms)" in k}
    seconds = {k: v for k, v in rows.items() if k.endswith("(s)") and len(v[0]) == 1}
    if not latency or not seconds:
        plots.skipped.append(f'storage backends: no table of figures in "{STORAGE_SECTION}"')
        return
    file = "storage.svg"
    with figure_context(out_dir / file, 7.5, 2.8) as fig:
        left, right = fig.subplots(1, 2)
        labels = [k.split(" p50")[0].strip("`") for k in latency]
        _bars(left, labels, [v for v in latency.values()], "ms: p50 bar, p95 tick")
        _bars(right, [k.removesuffix(" (s)") for k in seconds], list(seconds.values()), "s")
    plots.figures.append(
        Figure(
            file,
            "Storage backends side by side (embedded against PostgreSQL + pgvector, 2Wiki "
            "6,119 passages, load average about 6; no intervals recorded)",
            "summary",
        )
    )


def _bars(
    ax: Any, labels: list[str], values: list[tuple[list[float], list[float]]], unit: str
) -> None:
    width = 0.38
    for side, (backend, offset) in enumerate((("embedded", -width / 2), ("PostgreSQL", width / 2))):
        xs = [i + offset for i in range(len(labels))]
        heights = [v[side][0] for v in values]
        ax.bar(xs, heights, width, label=backend)
        tails = [(x, v[side][1]) for x, v in zip(xs, values, strict=True) if len(v[side]) > 1]
        if tails:
            ax.plot([x for x, _ in tails], [t for _, t in tails], "_", color="black", markersize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=6)
    ax.set_ylabel(unit)
    ax.legend(fontsize=6)
