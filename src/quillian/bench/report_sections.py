"""The benchmark pages' text, built from recorded results (``docs/benchmarks.json``).

Pure functions from the recorded JSON to markdown lines; :mod:`quillian.bench.report_pages`
lays them out into pages and :mod:`quillian.bench.report` runs the benchmarks.
"""

from __future__ import annotations

from typing import Any

from quillian.bench.qa import score, summary_table

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
        "sa, ppr and kag fused by reciprocal rank (RRF, k = 1, cross-validated), "
        "the first two passages' second hops after them (no LLM)"
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


def qa_sections(qa: dict[str, Any], llm_local: dict[str, Any] | None) -> list[str]:
    parts: list[str] = []
    for name, run in qa.items():
        parts += [
            "",
            f"## Question answering: {name}",
            "",
            f"{run['questions']} questions, model `{run['model']}` on this machine, every "
            "method in one run on the same index and backbone. Accuracy: a gold answer "
            "(or alias) occurs in the prediction; evidence recall: share of the gold "
            "passages among the passages the method put in front of the model; parse "
            "failures: share of LLM outputs that failed to parse (each recorded with its "
            "raw text; a repair attempt follows).",
            "",
            summary_table(run),
            "",
            f"Command: `{run.get('_command', '')}`",
        ]
        cached = [
            f"{m} {s['cached_calls']} of {s['llm_calls']}"
            for m, s in run.get("methods", {}).items()
            if s.get("cached_calls")
        ]
        if cached:
            parts += [
                "",
                "LLM calls answered from the response cache (their seconds are near 0, so "
                f"s/q understates the model's time): {', '.join(cached)}.",
            ]
        if "kags" in run.get("methods", {}):
            parts += ["", KAGS_PAPER]
        parts += turns_and_verification(run.get("methods", {}))
        if run.get("_passages"):
            parts += ["", *_passage_rows(run["_passages"])]
    if llm_local:
        rows = [
            f"| {r['dtype']} | {r['load_s']} | {r['prompt_tok_s']} | {r['gen_tok_s']} | "
            f"{r['peak_rss_mb']} | {r['same_greedy_as']} | {r.get('next_token_agreement', '')} |"
            for r in llm_local["results"]
        ]
        parts += [
            "",
            "## Local model backends",
            "",
            "`python research/llm_local.py --json`: Qwen2.5-Coder-0.5B-Instruct Q4_K_M "
            "through transformers, a 1,042-token prompt, 100 new tokens, median of 3, "
            f"{llm_local['machine']['cpus']} threads ({llm_local['machine']['cpu_capability']}). "
            "`int8` holds weights per output channel and activations per token in int8; "
            "`int8-per-call` (the baseline) is torch's dynamic quantization, one activation "
            "scale per call, which `local-int8` used before. Next-token agreement: the share "
            "of prompt positions where the most likely next token is float32's.",
            "",
            "| dtype | load s | prompt tokens/s | generated tokens/s | peak RSS MB | "
            "greedy answers equal to float32's | next-token agreement |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            "llama-cpp-python was not built (a 14-22 minute source build here); the figures "
            "measured for it on this kind of machine (../shared/DEPENDENCIES.md) are a 0.6 s "
            "load, 11-13 generated tokens/s and about 1.3 s for a 100-token prompt.",
        ]
    return parts


#: How the Know3-RAG reference filter's kinds of candidate read in the report.
_FILTERED = {
    "written": "written references",
    "gold_passage": "gold passages",
    "other_passage": "other passages",
    "passage": "passages",
}


def turns_and_verification(methods: dict[str, Any]) -> list[str]:
    """The share answered at each turn (Know3-RAG), the shares of its candidate references
    the relevance check passed and the filter kept, and, with ``--verify``, the scores
    of answers the KG-embedding check verified beside the others."""
    parts: list[str] = []
    for method, s in methods.items():
        if s.get("answered_at_turn"):
            shares = ", ".join(f"t={t}: {v:.0%}" for t, v in s["answered_at_turn"].items())
            parts += ["", f"{method}: answers output at each turn: {shares}."]
        if s.get("reference_filter"):
            groups = "; ".join(
                f"{_FILTERED[name]} {g['relevant_share']:.0%} / {g['kept_share']:.0%} "
                f"of {g['candidates']}"
                for name, g in s["reference_filter"].items()
            )
            parts += [
                "",
                f"{method}: candidate references passed by the relevance check / kept by "
                f"the filter: {groups}.",
            ]
    checked = {m: s["verification"] for m, s in methods.items() if s.get("verification")}
    if not checked:
        return parts
    rows = []
    for method, v in checked.items():
        yes, no = v["verified"], v["not_verified"]
        cells = [
            method,
            *(f"{g['questions']} | {score(g['f1'])} | {score(g['accuracy'])}" for g in (yes, no)),
            str(v["unscorable"]),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return [
        *parts,
        "",
        "`--verify`: each answer's triples scored against the KG-embedding model and judged "
        "against θ at turn 0; unscorable: no triple of the answer could be scored (counted "
        "as not verified).",
        "",
        "| method | verified | F1 | accuracy | not verified | F1 | accuracy | unscorable |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def know3_section(kg: dict[str, Any]) -> list[str]:
    """Know3-RAG's θ0 calibration and ComplEx scoring latency, when recorded."""
    parts: list[str] = []
    calibration = kg.get("know3_calibration")
    if calibration:
        chosen = calibration["chosen"]
        shares = ", ".join(f"t={t}: {v:.0%}" for t, v in chosen["answered_at_turn"].items())
        parts += [
            "",
            "## Know3-RAG: θ0 calibration",
            "",
            f"{calibration['questions']} questions run to the last turn once, then every θ0 "
            "evaluated offline (θ only decides where the loop stops). Target: "
            f"{calibration['target_share_at_turn_0']:.0%} answered at turn 0; chosen θ0 = "
            f"{chosen['theta0']:.4g} (θ_t = {', '.join(str(t) for t in chosen['thresholds'])}):"
            f" {shares}; turn-0 answers with no scorable triple: "
            f"{calibration['unscorable_at_turn_0']}.",
            "",
            f"Command: `{calibration.get('_command', '')}`",
        ]
    synthetic = kg.get("kge_synthetic")
    if synthetic:
        parts += [
            "",
            "## ComplEx training at Wikidata5M scale: one epoch of shared negatives",
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
        parts += ["", "## ComplEx scoring: every tail of one query", ""]
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


def _passage_rows(figures: dict[str, dict[str, float]]) -> list[str]:
    return [
        "Passages in front of the model (at most 6: single-query retrieval takes the top 6; "
        "query expansion and KG-Infused RAG's dual retrieval take the top 3 of the question "
        "and of the expanded query, duplicates dropped, as in eq. 7):",
        "",
        "| method | passages/q | recall of gold passages | recall of the first 3 |",
        "|---|---|---|---|",
        *(
            f"| {m} | {f['passages']} | {f['recall']:.3f} | {f['recall_first3']:.3f} |"
            if "recall_first3" in f
            else f"| {m} | {f['passages']} | {f['recall']:.3f} | |"
            for m, f in figures.items()
        ),
    ]


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
        "## KG-Infused RAG: a Wikidata5M-shaped graph at full size",
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
        "## Entity-description search on real text: WordNet glosses with MiniLM",
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


def kg_sections(kg: dict[str, Any]) -> list[str]:
    """External knowledge graphs: the import at scale, description search, linking."""
    parts: list[str] = []
    if kg.get("scale"):
        parts += _kg_scale_rows(kg["scale"])
    if kg.get("ann"):
        parts += _kg_ann_rows(kg["ann"])
    link = kg.get("link")
    if link:
        rows = [
            f"| {r['score']:.2f} | {r['source']} | {r['target']} | {r['name_score']:.2f} | "
            f"{r['description_score']:.2f} | {r['kind']} |"
            for r in link.get("examples", [])
        ]
        kinds = ", ".join(f"{k} {v}" for k, v in link["by_kind"].items())
        parts += [
            "",
            "## One graph across sources: linking an index to WordNet",
            "",
            "WordNet imported with `quillian kg import wordnet --out kg/wordnet` (MiniLM "
            "description vectors), the index built from the recorded GPT-3.5 triples.",
            "",
            f"`{link.get('_command', '')}`: {link['links']} of {link['source_entities']} "
            f"document entities linked ({kinds}) "
            f"in {link['seconds']} s, {link['candidates_scored']} candidates scored. "
            "Best-scoring links:",
            "",
            "| score | document entity | WordNet synset | name | description | kind |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    cross = kg.get("cross")
    if cross:
        methods = [m for m in cross if not m.startswith("_")]
        metrics = [k for k in ("R@2", "R@5", "p50_ms", "p95_ms") if k in cross[methods[0]]]
        parts += [
            "",
            "SA retrieval with and without crossing into the linked graph, same questions, "
            "same index, one run "
            f"(`{cross.get('_command', '')}`):",
            "",
            "| method | " + " | ".join(metrics) + " |",
            "|---" * (len(metrics) + 1) + "|",
            *(f"| {m} | " + " | ".join(str(cross[m][k]) for k in metrics) + " |" for m in methods),
        ]
    return parts


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
        "## Link prediction: ComplEx (N3, reciprocal relations), filtered, both directions",
        "",
        "Trained on train.txt with early stopping on valid.txt only, scored on test.txt; "
        "the published column is ComplEx-N3's filtered MRR.",
        "",
        "| data set | MRR | Hits@1 | Hits@3 | Hits@10 | train s | published MRR | command |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


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
    rows.append(row("answer `sa-rag`, scripted model", serve["answer"]))
    ingest = serve["during_ingestion"]
    rows.append(
        row(
            f"retrieve `{serve['method']}` while {ingest['passages']} passages are ingested",
            ingest["retrieval"],
        )
    )
    stages = ", ".join(f"{k} {v}" for k, v in ingest["job_stage_seconds"].items())
    command = serve.get("_command", "python -m quillian.server.load")
    return [
        "",
        "## Serving: `quillian serve` under load",
        "",
        f"`{command}`: a copy of {serve['index']} served on loopback by a "
        "`quillian serve` subprocess; the clients (httpx, asyncio) run on the same "
        f"{serve['cpus']} cores. Load average {serve['load_average_at_start']} at the start, "
        f"{serve['load_average_at_end']} at the end (other work shared the machine). "
        "Latencies in ms; the last column is the p50 over the in-process p50.",
        "",
        "| workload | clients | s | requests | req/s | p50 | p95 | p99 | errors "
        "| p50 / in-process |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"The upload of {ingest['passages']} passages was job `{ingest['job_state']}` after "
        f"{ingest['job_seconds']} s ({stages}); queries were answered throughout.",
    ]


#: Beside any QA run with KAGS: what the paper reports, and why it is not comparable.
KAGS_PAPER = (
    "The KAGS paper reports answer relevance 0.4701, token containment 28.29% and fuzzy "
    "containment 51.56% (abstract; the supplement gives no table), with a generator, a "
    "judge and a data set it does not name; the authors' run logs give token containment "
    "0.23-0.30 and fuzzy 0.31-0.48 with FLAN-T5-XL and Mistral-7B. Ours use the bundled "
    "0.5B model as generator and judge and MiniLM for answer relevance, on the questions "
    "above: a like-for-like comparison with the paper is not possible. Faithfulness and "
    "answer relevance are judged per question; a judge reply that stays unusable leaves "
    "the question unscored (counted in the run's summary.json), never guessed; judge "
    "tokens are not in tokens/q. For kags, evidence recall and the passages below are the "
    "supporting passages of its kept relations: its generator reads the relations and "
    "their source sentences, not the passages."
)
KAGS_SENTENCES = {
    "kags_sentences": "with the metadata filter (tau 0.5, `keep_best`)",
    "kags_sentences_unfiltered": "without the filter (every top-7 hit kept)",
}
KAGS_FIGURES = [
    "sentence_precision",
    "sentence_recall",
    "hop0_sentence_precision",
    "hop0_sentence_recall",
    "sentences",
    "relations",
    "empty",
    "below_tau",
]


def kags_section(kags: dict[str, Any]) -> list[str]:
    """The ``--kags`` runs (``python research/kags.py``): KAGS beside the other
    retrievers on one index, and on HotpotQA its source sentences against the gold ones."""
    if not kags:
        return []
    parts = [
        "",
        "## KAGS without an LLM",
        "",
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
        "question is kept (`keep_best`; the authors' code keeps nothing).",
    ]
    for name, run in kags.items():
        metric = ["perfect@8", "multihop_perfect@8"] if "2wiki" in name else ["R@2", "R@5"]
        parts += ["", f"### {name}", "", table({name: run}, [name], [*metric, "p50_ms"])]
        rows = [k for k in KAGS_SENTENCES if k in run]
        if rows:
            parts += [
                "",
                "KAGS's kept source sentences (all hops; `hop0_`: the filtered top-k "
                "triples only) against HotpotQA's gold supporting sentences:",
                "",
                "| setting | " + " | ".join(KAGS_FIGURES) + " |",
                "|---|" + "---|" * len(KAGS_FIGURES),
            ]
            for key in rows:
                cells = [f"{run[key].get(f, '')}" for f in KAGS_FIGURES]
                parts.append(f"| {KAGS_SENTENCES[key]} | " + " | ".join(cells) + " |")
        triples = run.get("_run", {}).get("index", {}).get("kags_triples")
        parts += ["", f"KAGS triples stored: {triples}. Command: `{run.get('_command', '')}`"]
    return parts
