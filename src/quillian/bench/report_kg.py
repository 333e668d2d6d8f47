"""The knowledge-graph results' text on the benchmark pages: linking an index to an
imported graph, retrieval across both, and Know3-RAG's calibration. The studies of the
graph import at scale, description search and link prediction have their own page,
drawn by ``research/kg_studies.py``."""

from __future__ import annotations

from typing import Any


def know3_section(kg: dict[str, Any]) -> list[str]:
    """Know3-RAG's θ0 calibration, when recorded."""
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
    return parts


def kg_sections(kg: dict[str, Any]) -> list[str]:
    """External knowledge graphs: linking an index to one, and retrieval across both."""
    parts: list[str] = []
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
