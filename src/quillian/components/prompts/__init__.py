"""The papers' prompts as versioned data, one module per paper.

Every prompt is a module-level :class:`~quillian.components.llm.prompts.Prompt` whose
``description`` names its source (paper, listing or table), what each variable holds and
how to format it, and the output format to parse. ``default_registry()`` holds them all;
users override one through :meth:`PromptRegistry.override_from_file`.
"""

from __future__ import annotations

from quillian.components.llm.prompts import Prompt, PromptRegistry
from quillian.components.prompts import kag, kags, kg_infused, know3, sa_rag

__all__ = ["ALL_PROMPTS", "default_registry"]

ALL_PROMPTS: tuple[Prompt, ...] = (
    sa_rag.BASELINE_ANSWER,
    sa_rag.COT,
    sa_rag.DECOMPOSE,
    sa_rag.NER,
    sa_rag.RELATIONS,
    sa_rag.SA_ANSWER,
    sa_rag.SA_REASON,
    kg_infused.ANSWER_CLOSED,
    kg_infused.ANSWER,
    kg_infused.QUERY_EXPANSION,
    kg_infused.PASSAGE_NOTE,
    kg_infused.TRIPLE_SELECT,
    kg_infused.TRIPLE_UPDATE,
    kg_infused.SUBGRAPH_SUMMARY,
    kg_infused.KG_QUERY_EXPANSION,
    kg_infused.KNOWLEDGE_AUGMENT,
    kg_infused.DPO_JUDGE,
    kg_infused.SELF_ASK,
    know3.ANSWER,
    know3.REFERENCE,
    know3.QUERY,
    know3.TRIPLES,
    know3.RELEVANCE,
    kags.EXTRACT,
    kags.ANSWER,
    kags.JUDGE_STATEMENTS,
    kags.JUDGE_VERDICT,
    kags.JUDGE_QUESTION,
    *kag.PROMPTS,
)


def default_registry() -> PromptRegistry:
    """A fresh registry holding every built-in prompt (callers may override in it)."""
    return PromptRegistry(ALL_PROMPTS)
