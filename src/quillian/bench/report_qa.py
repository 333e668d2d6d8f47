"""The question-answering runs' text on the benchmark pages: each ``bench qa`` run's
table, its command, and Know3-RAG's turns and checks."""

from __future__ import annotations

from typing import Any

from quillian.bench.qa import score, summary_table


def qa_sections(qa: dict[str, Any]) -> list[str]:
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
        parts += _passage_rows(run)
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


def _passage_rows(run: dict[str, Any]) -> list[str]:
    """Per method, the passages ``bench qa`` put in front of the model, their recall of
    the gold passages and that of the first three, from its summary; a run recorded
    before summaries held them keeps the figures read from its predictions then."""
    recorded = run.get("_passages") or {}
    rows = [(m, f["passages"], f["recall"], f["recall_first3"]) for m, f in recorded.items()] or [
        (m, s["passages_per_question"], s["evidence_recall"], s["recall@3"])
        for m, s in run.get("methods", {}).items()
        if s.get("passages_per_question")
    ]
    if not rows:
        return []
    return [
        "",
        "Passages in front of the model (at most 6: single-query retrieval takes the top 6; "
        "query expansion and KG-Infused RAG's dual retrieval take the top 3 of the question "
        "and of the expanded query, duplicates dropped, as in eq. 7):",
        "",
        "| method | passages/q | recall of gold passages | recall of the first 3 |",
        "|---|---|---|---|",
        *(f"| {m} | {p} | {score(r)} | {score(r3)} |" for m, p, r, r3 in rows),
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
