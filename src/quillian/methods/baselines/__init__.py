"""The baselines users compare against, on the papers' prompts (see :mod:`.pipelines`)."""

from quillian.methods.baselines.pipelines import (
    CoTRAG,
    DecompositionRAG,
    NoRetrieval,
    QueryExpansion,
    SelfAsk,
    VanillaRAG,
)
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

SPECS = (
    MethodSpec("no-retrieval", NoRetrieval, "the question alone (KG-Infused RAG Table 9)"),
    MethodSpec(
        "vanilla-rag",
        VanillaRAG,
        "top-k passages, a passage note, a short answer",
        "dense",
    ),
    MethodSpec(
        "query-expansion",
        QueryExpansion,
        "an LLM-expanded second query, k/2 passages for each",
        "dense",
    ),
    MethodSpec(
        "cot-rag",
        CoTRAG,
        "iterative retrieval with reasoning steps (SA-RAG Listing 2)",
        "dense",
    ),
    MethodSpec(
        "decomposition",
        DecompositionRAG,
        "sub-questions answered in order (SA-RAG Listing 3)",
        "dense",
    ),
    MethodSpec(
        "self-ask",
        SelfAsk,
        "follow-up questions answered from passages (KG-Infused RAG Table 19)",
        "dense",
    ),
)
