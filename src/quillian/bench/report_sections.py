"""The benchmark pages' text, built from recorded results (``docs/benchmarks.json``).

Pure functions from the recorded JSON to markdown lines (the retrieval runs, tuning
and serving here; :mod:`.report_qa` and :mod:`.report_kg` the others);
:mod:`quillian.bench.report_pages` lays them out into pages and
:mod:`quillian.bench.report` runs the benchmarks.
"""

from __future__ import annotations

from typing import Any

NOTES = """
## How to read this

- **sa** is SA-RAG's spreading activation (Algorithm 1, exactly as published) with
  Quillian's choices around it: seeds are the entities the question names (matched
  against entity names and aliases), or SA-RAG's description seeds when it names none;
  each seed starts at its specificity (rarer entities start higher); the subgraph is 2
  hops with c = 0.2 (MiniLM's cosines run lower than the bge-large the paper used); and
  the k passages are ranked by the activation of the entity they are about (or half of
  it for an entity they only mention) plus their cosine to the question. The defaults
  were chosen on 2WikiMultihopQA's first 800 passages and these same 51 questions, so
  the 2Wiki figures of **sa** are tuning figures, optimistic by an unknown margin;
  MuSiQue and HotpotQA were not used for tuning.
- **sa-paper** is the paper end to end: top-k description seeds, n-hop subgraph,
  c = 0.4, tau_a = 0.5, tau_d = 0.45, tau_r = 0.5 (k = 10, n = 3 on 2Wiki; k = 3, n = 4
  otherwise), returning the activated documents by cosine and filling up to k with
  dense results. With MiniLM its activations rarely pass tau_a, so it mostly falls back
  to dense retrieval.
- **ppr** is HippoRAG-style personalized PageRank (damping 0.5) over entities and
  chunks, seeded like **sa** plus description seeds, with 5% of the reset mass on the
  dense top-50 chunks (HippoRAG 2); HippoRAG 2's fact seeds are an option, off (see
  "Retrieval lift").
- **kag** is KAG's chunk retriever (spec 4.5 step 5): personalized PageRank (the
  authors' damping 0.1) over entities and chunks, reset on the entities the question
  names (exact name links, score 1.0; description seeds only when it names none); when
  every seed links above 0.9 PageRank ranks alone, otherwise min-max fusion 0.5/0.5 with
  dense; then the BM25 top-1 replaces the last chunk when missing.
- Peers' lists were retrieved by other systems with OpenAI models; ours use no LLM.
"""


METHOD_NOTES = {
    "sa": "SA, Quillian's variant (query-named seeds, fused ranking; no LLM)",
    "sa-paper": "SA-RAG as published (description seeds, thresholds; no LLM)",
    "ppr": "personalized PageRank, HippoRAG-style (no LLM)",
    "dense": "dense MiniLM top-k",
    "bm25": "BM25 (bm25s)",
    "kags": "KAGS: top-7 triples, metadata filter tau 0.5, 2 hops (no LLM)",
    "kag": "KAG chunk retriever: PPR fused 0.5/0.5 with dense, BM25 swap-in (no LLM)",
    "fused": (
        "fused by reciprocal rank (RRF, k = 1, cross-validated), the first two "
        "passages' second hops after them (no LLM); runs recorded before the default "
        "became sa+ppr fused sa, ppr and kag"
    ),
    "peer:fast_graphrag": "fast-graphrag (GPT-4o-mini graph)",
    "peer:nano_graphrag_local": "nano-GraphRAG local",
    "peer:lightrag_local": "LightRAG local",
    "peer:vector_db": "vector DB (OpenAI text-embedding-3-small)",
}


def table(results: dict[str, dict[str, Any]], names: list[str], metrics: list[str]) -> str:
    header = "| method | " + " | ".join(f"{n} {m}" for n in names for m in metrics) + " |"
    lines = [header, "|" + "---|" * (1 + len(names) * len(metrics))]
    methods = [
        m
        for m in METHOD_NOTES
        if any(results[n].get(m, {}).get(metric) is not None for n in names for metric in metrics)
    ]
    for method in methods:
        cells = []
        for n in names:
            for m in metrics:
                figures = results[n].get(method, {})
                value, ci = figures.get(m), figures.get(f"{m}_ci")
                cells.append(
                    ""
                    if value is None
                    else f"{value:g} [{ci[0]:g}, {ci[1]:g}]"
                    if ci
                    else f"{value:g}"
                )
        lines.append(f"| {METHOD_NOTES[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _paired_rows(results: dict[str, dict[str, Any]]) -> list[str]:
    """Each run's paired comparisons on its headline metric."""
    lines = [
        "| run | comparison | metric | difference [95% interval] | p | wins / losses / ties |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for pair, metrics in r.get("_paired", {}).items():
            for metric in ("perfect@8", "R@5"):
                if (c := metrics.get(metric)) is not None:
                    lines.append(
                        f"| {name} | {pair} | {metric} | {c['diff']:+.3f} "
                        f"[{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] | {c['p']:.3f} "
                        f"| {c['wins']} / {c['losses']} / {c['ties']} |"
                    )
    return lines if len(lines) > 2 else []


def tune_section(tune: dict[str, Any]) -> list[str]:
    """Options chosen by cross-validation (``quillian bench tune``) beside the defaults."""
    if not tune:
        return []
    lines = [
        "",
        "## Tuning by cross-validation",
        "",
        "Each row tries every combination of the grid on the dev questions. *Cross-validated* "
        "scores every question with the combination best on the other folds: what tuning "
        "would give on questions it has not seen. *Best in-sample* is the combination best "
        "on all the questions, scored on those same questions: a tuning figure, optimistic. "
        "Intervals are bootstrap 95%; the comparison with the defaults is paired.",
        "",
        "| run | method | grid | metric | defaults | cross-validated | vs defaults (p) "
        "| best in-sample |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in tune.items():
        grid = "; ".join(
            f"{k} " + ", ".join(str(v) for v in dict.fromkeys(r["options"][k] for r in t["grid"]))
            for k in t["grid"][0]["options"]
        )
        d, cv, best = t["default"], t["cv"], t["chosen_on_all"]
        c = cv["vs_default"]
        lines.append(
            f"| {name} | {t['method']} | {grid} | {t['metric']} | {d['score']:g} "
            f"[{d['ci'][0]:g}, {d['ci'][1]:g}] | {cv['score']:g} [{cv['ci'][0]:g}, "
            f"{cv['ci'][1]:g}] | {c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] "
            f"({c['p']:.2f}) | {best['in_sample']['score']:g} "
            f"({', '.join(f'{k}={v}' for k, v in best['options'].items())}) |"
        )
    lines += ["", "Commands:", ""]
    lines += [f"- {name}: `{t['_command']}`" for name, t in tune.items() if "_command" in t]
    return lines


def paired_section(results: dict[str, dict[str, Any]]) -> list[str]:
    rows = _paired_rows(results)
    if not rows:
        return []
    return [
        "## Paired comparisons",
        "",
        "The same questions scored by both methods: the mean per-question difference with "
        "its paired bootstrap 95% interval, the two-sided p-value of a sign-flip "
        "permutation test, and the questions each side wins (`quillian bench retrieval "
        "--compare A:B` for any other pair).",
        "",
        *rows,
        "",
    ]


def build_rows(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| index | passages | build s | stages (s) | peak RSS MB | entities | relations |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        idx = r["_run"]["index"]
        stages = ", ".join(f"{k} {v}" for k, v in idx.get("stage_seconds", {}).items())
        lines.append(
            f"| {name} | {r['_run']['passages']} | {idx['build_seconds']} | {stages} "
            f"| {idx['peak_rss_mb']} | {idx.get('entities')} | {idx.get('relations')} |"
        )
    return "\n".join(lines)


def serve_section(serve: dict[str, Any] | None) -> list[str]:
    """``quillian serve`` under load (saved JSON of ``python -m quillian.server.load``)."""
    if not serve:
        return []

    def row(name: str, r: dict[str, Any], ratio: str = "") -> str:
        return (
            f"| {name} | {r['clients']} | {r['seconds']} | {r['requests']} | {r['rps']} | "
            f"{r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['errors']} | {ratio} |"
        )

    inside = serve["in_process"]
    rows = [
        f"| retrieve `{serve['method']}` in process (Engine.aretrieve, no HTTP) | 1 |  "
        f"| {inside['requests']} "
        f"|  | {inside['p50_ms']} | {inside['p95_ms']} | {inside['p99_ms']} |  | 1.0 |"
    ]
    rows += [
        row(f"retrieve `{serve['method']}`", r, str(r["p50_over_in_process"]))
        for r in serve["retrieve"]
    ]
    rows += [
        row(f"retrieve `{serve['method']}`, {entry['replicas']} servers", r)
        for entry in serve.get("replicas", [])
        for r in entry["retrieve"]
    ]
    if "answer" in serve:
        rows.append(row("answer `sa-rag`, scripted model", serve["answer"]))
    ingest = serve.get("during_ingestion")
    if ingest:
        rows.append(
            row(
                f"retrieve `{serve['method']}` while {ingest['passages']} passages are ingested",
                ingest["retrieval"],
            )
        )
    command = serve.get("_command", "python -m quillian.server.load")
    lines = [
        "",
        "## Serving: `quillian serve` under load",
        "",
        f"`{command}`: a copy of {serve['index']} served on loopback by a "
        "`quillian serve` subprocess (with N servers, one copy each, the requests spread "
        "over them in turn); the clients (httpx, asyncio) run on the same "
        f"{serve['cpus']} cores. Load average {serve['load_average_at_start']} at the start, "
        f"{serve['load_average_at_end']} at the end (other work shared the machine). "
        "Latencies in ms; the last column is the p50 over the in-process p50.",
        "",
        "| workload | clients | s | requests | req/s | p50 | p95 | p99 | errors "
        "| p50 / in-process |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    if ingest:
        stages = ", ".join(f"{k} {v}" for k, v in ingest["job_stage_seconds"].items())
        lines += [
            "",
            f"The upload of {ingest['passages']} passages was job `{ingest['job_state']}` "
            f"after {ingest['job_seconds']} s ({stages}); queries were answered throughout.",
        ]
    return lines
