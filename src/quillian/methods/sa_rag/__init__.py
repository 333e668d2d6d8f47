"""SA-RAG: spreading activation over the documents' knowledge graph (see :mod:`.pipelines`)."""

from quillian.methods.sa_rag.pipelines import SARAG, SARAGCoT, SARAGDecomposition
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

SPECS = (
    MethodSpec(
        "sa-rag",
        SARAG,
        "spreading-activation retrieval, then SA-RAG's answer over passages and relations",
        "sa",
    ),
    MethodSpec(
        "sa-rag-cot",
        SARAGCoT,
        "SA retrieval inside the CoT loop (SA-RAG Listing 7)",
        "sa",
    ),
    MethodSpec(
        "sa-rag-decomposition",
        SARAGDecomposition,
        "SA retrieval inside query decomposition",
        "sa",
    ),
)
