"""KG-Infused RAG: LLM-guided spreading activation over a knowledge graph (see
:mod:`.pipeline`), its plug-ins for Self-Ask and CoT (:mod:`.plugins`) and DPO data
(:mod:`.dpo`)."""

from quillian.methods.kg_infused.pipeline import KGInfusedRAG
from quillian.methods.kg_infused.plugins import CoTRAGKG, SelfAskKG
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

SPECS = (
    MethodSpec(
        "kg-infused-rag",
        KGInfusedRAG,
        "KG spreading activation, KG query expansion and fact-enhanced notes",
        "dense",
        needs_graph=True,
        aliases=("kg-infused",),
    ),
    MethodSpec(
        "self-ask-kg",
        SelfAskKG,
        "Self-Ask with each follow-up answered through the KG modules",
        "dense",
        needs_graph=True,
    ),
    MethodSpec(
        "cot-rag-kg",
        CoTRAGKG,
        "the CoT loop reasoning over a fact-enhanced note per query",
        "dense",
        needs_graph=True,
    ),
)
