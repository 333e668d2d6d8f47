"""The knowledge-graph studies' page: the import of a Wikidata5M-shaped graph at full
size, entity-description search (exact and ANN), link prediction with ComplEx, ComplEx
training at Wikidata5M scale and its scoring latency.

    python research/kg_studies.py --results docs/kg-studies.json --out /tmp/kg-studies.md \
        [--scale J] [--ann J] [--kge J ...] [--kge-synthetic J] [--kge-scoring J]
    quillian bench report --no-runs --section /tmp/kg-studies.md \
        --section-group "KG embeddings"

Each ``J`` is the JSON one of the studies printed (``research/kg_scale.py --json``,
``research/kg_ann.py --json``, ``research/kge.py --json``, ``--synthetic E,T`` or
``--scoring N``), with the command that produced it in ``J.cmd`` (or ``J.json.cmd``)
beside it. They are merged into ``--results`` (one replaces the recorded result of its
name; a link-prediction run, the one of its data set), and the page is written from all
of them as a section (markdown starting with its ``## `` title) for
``quillian bench report --section``, with the link-prediction plot drawn into
``--images``. These studies are not benchmarks a user of the package runs, so their
page is drawn here and not by ``quillian bench report``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from quillian.bench.plots import figure_context
from quillian.bench.report import with_command
from quillian.errors import InputError

__all__ = ["main", "render"]

TITLE = "Knowledge-graph studies: a Wikidata5M-shaped graph, description search, link prediction"
#: The single results of ``--NAME FILE``, by their key in the results file.
SINGLE = ("scale", "ann", "kge_synthetic", "kge_scoring")
KGE_PLOT = "kge-mrr.svg"


def _search_rows(search: dict[str, Any], queries: str | None) -> list[str]:
    """One row per ANN kind and nprobe: build s, MB, p50/p95 ms, recall@10 vs exact."""
    exact = search["exact"] if queries is None else search["exact"][queries]
    rows = [
        f"| exact | | {search['exact']['index_mb']} | {exact['p50_ms']} | {exact['p95_ms']} | 1 |"
    ]
    for kind, figures in search.items():
        if kind in ("exact", "queries"):
            continue
        for key, run in figures.items():
            if key.startswith("nprobe="):
                run = run if queries is None else run[queries]
                rows.append(
                    f"| {kind} {key} | {figures['build_s']} | {figures['index_mb']} | "
                    f"{run['p50_ms']} | {run['p95_ms']} | {run['recall_at_10']} |"
                )
    return [
        "| index | build s | MB | p50 ms | p95 ms | recall@10 vs exact |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def _kg_scale_rows(scale: dict[str, Any]) -> list[str]:
    parts = scale["import_parts_s"]
    ann = scale.get("ann") or {}
    targets = [
        ("import of the triples", "< 600 s", f"{scale['import_s']} s ("
         + ", ".join(f"{k} {v}" for k, v in parts.items()) + ")"),
        ("reopening the graph", "< 30 s", f"{scale['reopen_ms']} ms"),
        ("peak memory without description vectors", "< 3 GB",
         f"{scale['peak_rss_graph_mb']} MB (whole import with ANN: {scale['peak_rss_mb']} MB)"),
        ("one round's neighbour fetch, 10 entities, capped", "p50 < 5 ms",
         f"{scale['neighbours_p50_ms']} ms (as named triples {scale['triples_p50_ms']} ms)"),
        ("seed-entity search", "p50 < 50 ms",
         f"{scale['seed_search_p50_ms']} ms with {ann.get('method')} nprobe {ann.get('nprobe')} "
         f"(exact: {scale['exact_seed_search_p50_ms']} ms)"),
    ]  # fmt: skip
    graph = scale["graph"]
    return [
        "",
        "### KG-Infused RAG: a Wikidata5M-shaped graph at full size",
        "",
        f"`{scale.get('_command', 'python research/kg_scale.py --json')}`: "
        f"{scale['entities']:,} entities, {scale['triples']:,} triples and "
        f"{scale['relations']} relations written as Wikidata5M files; "
        f"{graph['entities']:,} entities and {graph['triples']:,} triples kept by the "
        f"paper's preprocessing ({scale['dropped']['rounds']} rounds). Description vectors "
        "come from the hash embedder at MiniLM's width (384), so search costs what it "
        "would with MiniLM, but random vectors have no clusters: their ANN recall is a "
        "worst case (see WordNet below for real text).",
        "",
        "| target | wanted | measured |",
        "|---|---|---|",
        *(f"| {name} | {want} | {got} |" for name, want, got in targets),
        "",
        f"Description search over {graph['entities']:,} vectors, "
        f"{scale['search'].get('queries', 50)} random-word queries:",
        "",
        *_search_rows(scale["search"], None),
    ]


def _kg_ann_rows(ann: dict[str, Any]) -> list[str]:
    queries = ann.get("queries", {})
    return [
        "",
        "### Entity-description search on real text: WordNet glosses with MiniLM",
        "",
        f"`{ann.get('_command', 'python research/kg_ann.py --json')}`: "
        f"{ann['entities']:,} synsets; queries are {queries.get('names')} synset names and "
        f"the {queries.get('questions')} MuSiQue questions (recall@10 against exact "
        f"search; MiniLM query embedding adds {ann.get('embed_query_ms')} ms).",
        "",
        "Questions:",
        "",
        *_search_rows(ann["search"], "questions"),
        "",
        "Names:",
        "",
        *_search_rows(ann["search"], "names"),
    ]


#: Published filtered MRR of ComplEx-N3 (Lacroix et al., 2018) on the link-prediction
#: sets, as ../shared/bench/README.md gives them.
PUBLISHED_COMPLEX_MRR = {"kinships": 0.823, "umls": 0.838}


def kge_section(kge: dict[str, Any]) -> list[str]:
    """Link prediction with the ComplEx component, one row per data set."""
    if not kge:
        return []
    rows = [
        f"| {name} | {r['mrr']:.3f} | {r['hits@1']:.3f} | {r['hits@3']:.3f} | "
        f"{r['hits@10']:.3f} | {r['train_s']:.1f} | "
        f"{PUBLISHED_COMPLEX_MRR.get(name, '')} | `{r.get('_command', '')}` |"
        for name, r in sorted(kge.items())
    ]
    return [
        "",
        "### Link prediction: ComplEx (N3, reciprocal relations), filtered, both directions",
        "",
        "Trained on train.txt with early stopping on valid.txt only, scored on test.txt; "
        "the published column is ComplEx-N3's filtered MRR.",
        "",
        "| data set | MRR | Hits@1 | Hits@3 | Hits@10 | train s | published MRR | command |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def training_and_scoring(kg: dict[str, Any]) -> list[str]:
    """ComplEx training at Wikidata5M scale and the scoring latency, when recorded."""
    parts: list[str] = []
    synthetic = kg.get("kge_synthetic")
    if synthetic:
        parts += [
            "",
            "### ComplEx training at Wikidata5M scale: one epoch of shared negatives",
            "",
            f"A synthetic power-law graph of {synthetic['entities']:,} entities and "
            f"{synthetic['triples']:,} triples ({synthetic['examples']:,} examples with the "
            f"reciprocals), dim {synthetic['settings']['dim']}, "
            f"{synthetic['settings']['negatives']} shared negatives a batch of "
            f"{synthetic['settings']['batch_size']}, {synthetic['threads']} threads: one "
            f"epoch {synthetic['epoch_s']} s ({synthetic['examples_per_s']:,} examples/s), "
            f"peak RSS {synthetic['peak_rss_mb']:,.0f} MB for {synthetic['parameters_mb']:,.0f} "
            "MB of parameters. Measured while other jobs loaded the machine.",
            "",
            f"Command: `{synthetic.get('_command', '')}`",
        ]
    scoring = kg.get("kge_scoring")
    if scoring:
        sp, scan = scoring["score_sp_ms"], scoring["matrix_vector_ms"]
        parts += ["", "### ComplEx scoring: every tail of one query", ""]
        if "blas_score_sp_ms" in scoring:
            blas = scoring["blas_score_sp_ms"]
            parts.append(
                f"{scoring['entities']:,} entities, dim {scoring['dim']}, float32, "
                f"memory-mapped; {scoring['queries']} queries. score_sp (the row scan, "
                f"{scoring['scan_threads']} blocks) p50 {sp['p50']} ms (p95 {sp['p95']}); "
                f"the same product through numpy's BLAS, as score_sp ran before, p50 "
                f"{blas['p50']} ms (p95 {blas['p95']}): ratio {scoring['ratio_p50']}; "
                f"BLAS's plain matrix-vector pass over the same rows p50 {scan['p50']} ms."
            )
            if "read_floor_ms" in scoring:
                floor = scoring["read_floor_ms"]
                parts[-1] += (
                    f" Only reading the rows once, on the same threads (the memory floor of "
                    f"any exact float32 scan on this machine): p50 {floor['p50']} ms (p95 "
                    f"{floor['p95']}); score_sp takes {sp['p50'] / floor['p50']:.2f}x it."
                )
        else:
            parts.append(
                f"{scoring['entities']:,} entities, dim {scoring['dim']}, float32, "
                f"memory-mapped; {scoring['queries']} queries. score_sp p50 {sp['p50']} ms "
                f"(p95 {sp['p95']}), a plain matrix-vector pass over the same rows p50 "
                f"{scan['p50']} ms (p95 {scan['p95']}): ratio {scoring['ratio_p50']}. The "
                "scan is the floor at float32."
            )
        if "score_sp_batch_ms_per_query" in scoring:
            per = scoring["score_sp_batch_ms_per_query"]
            parts[-1] += (
                f" `score_sp_batch` of {scoring['batch']} queries reads the rows once for all "
                f"of them: p50 {per['p50']} ms a query (p95 {per['p95']}), "
                f"{sp['p50'] / per['p50']:.1f}x score_sp's throughput"
            )
            if "blas_batch_ms_per_query" in scoring:
                parts[-1] += (
                    f"; through BLAS {scoring['blas_batch_ms_per_query']['p50']} ms a query"
                )
            parts[-1] += "."
        if "threads" in scoring:
            parts[-1] += f" {scoring['threads']} threads."
        if "top_tails_int8_ms" in scoring:
            top = scoring["top_tails_int8_ms"]
            parts += [
                "",
                f"The 10 best tails (what Know3-RAG's global tail asks for) from int8 rows, "
                f"the best 64 rescored in float32: p50 {top['p50']} ms (p95 {top['p95']}), "
                f"{sp['p50'] / top['p50']:.1f}x faster than score_sp in the same run; the "
                f"top 10 equals float32's for {scoring['int8_top10_exact_share']:.0%} of the "
                f"queries; quantising the rows once took {scoring['int8_quantise_s']} s.",
            ]
        if "int8_saved_load_and_first_query_s" in scoring:
            parts[-1] += (
                " A saved model keeps those rows beside it: loading it and answering its "
                f"first query took {scoring['int8_saved_load_and_first_query_s']} s."
            )
        parts += ["", f"Command: `{scoring.get('_command', '')}`"]
    return parts


def kge_plot(kge: dict[str, Any], images: Path) -> list[str]:
    """Link prediction: our filtered MRR beside ComplEx-N3's published one, per data
    set, drawn into ``images``; the page's lines that show it."""
    if not kge:
        return []
    names = sorted(kge)
    images.mkdir(parents=True, exist_ok=True)
    with figure_context(images / KGE_PLOT, 5.0, 2.6) as fig:
        ax = fig.subplots()
        ours = [kge[n]["mrr"] for n in names]
        ax.bar([i - 0.2 for i in range(len(names))], ours, 0.4, label="Quillian ComplEx")
        published = [
            (i, PUBLISHED_COMPLEX_MRR[n]) for i, n in enumerate(names) if n in PUBLISHED_COMPLEX_MRR
        ]
        ax.bar(
            [i + 0.2 for i, _ in published],
            [v for _, v in published],
            0.4,
            label="ComplEx-N3, published",
        )
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("filtered MRR")
        ax.set_ylim(0, 1.0)
        ax.legend(fontsize=6, loc="lower right")
    caption = (
        "Link prediction: filtered MRR beside ComplEx-N3's published figure where one "
        "exists (Lacroix et al., 2018; no intervals recorded)"
    )
    return ["", f"![{caption}](../images/bench/{KGE_PLOT})", "", f"*{caption}.*"]


def render(results: dict[str, Any], images: Path) -> str:
    """The section's markdown, its plot drawn into ``images``."""
    parts = [
        f"## {TITLE}",
        "",
        "Rendered by `python research/kg_studies.py` from `docs/kg-studies.json`.",
    ]
    if results.get("scale"):
        parts += _kg_scale_rows(results["scale"])
    if results.get("ann"):
        parts += _kg_ann_rows(results["ann"])
    parts += kge_plot(results.get("kge") or {}, images)
    parts += kge_section(results.get("kge") or {})
    parts += training_and_scoring(results)
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("docs/kg-studies.json"))
    parser.add_argument("--out", type=Path, required=True, help="the section file to write")
    parser.add_argument("--images", type=Path, default=Path("docs/images/bench"))
    for name in SINGLE:
        parser.add_argument(f"--{name.replace('_', '-')}", type=Path, metavar="JSON")
    parser.add_argument("--kge", type=Path, action="append", metavar="JSON")
    args = parser.parse_args(argv)
    results: dict[str, Any] = (
        json.loads(args.results.read_text(encoding="utf-8")) if args.results.exists() else {}
    )
    try:
        for name in SINGLE:
            if path := getattr(args, name):
                results[name] = with_command(path)
        for path in args.kge or ():
            run = with_command(path)
            results["kge"] = {**results.get("kge", {}), run.get("dataset", path.stem): run}
    except InputError as exc:
        parser.error(str(exc))
    args.out.write_text(render(results, args.images), encoding="utf-8")
    args.results.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
