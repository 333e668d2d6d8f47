"""Explicit, lazy registries: a backend name maps to a factory imported on first use.

A missing optional dependency surfaces as :class:`~quillian.errors.MissingExtraError`
naming the extra to install; nothing is installed at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from quillian.components.chunking.base import Chunker
from quillian.components.embedding.base import Embedder
from quillian.components.extraction.base import Extractor
from quillian.components.generation.tasks import TaskRunner
from quillian.components.kg.base import ExternalGraph
from quillian.components.retrieval.base import Retriever
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import ConfigError
from quillian.methods.base import Pipeline, PipelineBase

if TYPE_CHECKING:
    from quillian.components.extraction.llm_budget import ExtractionBudget

__all__ = [
    "CHUNKERS",
    "EMBEDDERS",
    "EXTRACTORS",
    "KG_METHODS",
    "METHODS",
    "RETRIEVERS",
    "make_chunker",
    "make_embedder",
    "make_extractor",
    "make_graph",
    "make_pipeline",
    "make_retriever",
]

CHUNKERS = ("passage", "words")
EMBEDDERS = ("minilm", "hash")
EXTRACTORS = ("spacy", "precomputed", "llm")
RETRIEVERS = ("sa", "sa-paper", "ppr", "dense", "bm25")


def make_chunker(name: str, size: int = 500, overlap: int = 200) -> Chunker:
    from quillian.components.chunking.chunkers import PassageChunker, WordWindowChunker

    if name == "passage":
        return PassageChunker()
    if name == "words":
        return WordWindowChunker(size=size, overlap=overlap)
    raise ConfigError(f"unknown chunker {name!r}; choose one of {', '.join(CHUNKERS)}")


def make_embedder(name: str) -> Embedder:
    if name == "minilm":
        from quillian.components.embedding.sentence_transformers import (
            SentenceTransformerEmbedder,
        )

        return SentenceTransformerEmbedder()
    if name == "hash":
        from quillian.testing.fakes import HashEmbedder

        return HashEmbedder()
    raise ConfigError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")


def make_extractor(
    name: str,
    extractions: Path | None = None,
    titles: Sequence[str] = (),
    *,
    runner: TaskRunner | None = None,
    budget: ExtractionBudget | None = None,
) -> Extractor:
    """An extractor by name. ``titles`` are all document titles of the corpus, which the
    spaCy and LLM extractors use to keep title aliases unambiguous (spaCy also to link
    title mentions). The LLM extractor needs ``runner`` (its chat model and prompts) and
    takes an optional ``budget``."""
    if name == "spacy":
        from quillian.components.extraction.spacy_ner import SpacyExtractor

        return SpacyExtractor(corpus_titles=titles)
    if name == "precomputed":
        if extractions is None:
            raise ConfigError("the precomputed extractor needs --extractions FILE")
        from quillian.components.extraction.precomputed import PrecomputedExtractor

        return PrecomputedExtractor(extractions)
    if name == "llm":
        if runner is None:
            raise ConfigError("the llm extractor needs a chat model (--llm SPEC)")
        from quillian.components.extraction.llm import LLMExtractor

        return LLMExtractor(runner, budget=budget, corpus_titles=titles)
    raise ConfigError(f"unknown extractor {name!r}; choose one of {', '.join(EXTRACTORS)}")


def make_retriever(context: RetrievalContext, name: str, **options: object) -> Retriever:
    """A retriever over ``context``; ``options`` override its config fields."""
    from quillian.components.retrieval.bm25 import BM25Index, BM25Retriever
    from quillian.components.retrieval.dense import DenseRetriever
    from quillian.components.retrieval.ppr import PPRConfig, PPRRetriever
    from quillian.components.retrieval.sa import SAConfig, SARetriever

    if name == "sa":
        return SARetriever(context, SAConfig(**options))  # type: ignore[arg-type]
    if name == "sa-paper":
        return SARetriever(context, SAConfig.paper(**options))
    if name == "ppr":
        return PPRRetriever(context, PPRConfig(**options))  # type: ignore[arg-type]
    if name == "dense":
        return DenseRetriever(context)
    if name == "bm25":
        if not isinstance(context.bm25, BM25Index):
            raise ConfigError("this index has no BM25 index")
        return BM25Retriever(context, context.bm25)
    raise ConfigError(f"unknown retrieval method {name!r}; choose one of {', '.join(RETRIEVERS)}")


#: Question-answering methods and the retriever each uses unless told otherwise.
METHODS: dict[str, str | None] = {
    "no-retrieval": None,
    "vanilla-rag": "dense",
    "query-expansion": "dense",
    "cot-rag": "dense",
    "decomposition": "dense",
    "self-ask": "dense",
    "sa-rag": "sa",
    "sa-rag-cot": "sa",
    "sa-rag-decomposition": "sa",
    "kg-infused-rag": "dense",
    "self-ask-kg": "dense",
    "cot-rag-kg": "dense",
}
#: Methods that read a knowledge graph (``graph=``) besides the corpus.
KG_METHODS = ("kg-infused-rag", "self-ask-kg", "cot-rag-kg")


def make_pipeline(
    name: str,
    runner: TaskRunner,
    retriever: Retriever | None = None,
    *,
    graph: ExternalGraph | None = None,
    **options: object,
) -> Pipeline:
    """A question-answering method by name; ``options`` override its config fields.
    The KG-Infused methods also need ``graph``, the knowledge graph they activate."""
    from quillian.methods import baselines as b
    from quillian.methods import kg_infused as k
    from quillian.methods import kg_infused_plugins as kp
    from quillian.methods import sa_rag as s

    kg_factories: dict[str, tuple[type[PipelineBase], type]] = {
        "kg-infused-rag": (k.KGInfusedRAG, k.KGInfusedConfig),
        "self-ask-kg": (kp.SelfAskKG, kp.SelfAskKGConfig),
        "cot-rag-kg": (kp.CoTRAGKG, kp.CoTKGConfig),
    }
    if name in kg_factories:
        if graph is None:
            raise ConfigError(f"method {name!r} needs a knowledge graph (--kg)")
        kg_cls, kg_config = kg_factories[name]
        return kg_cls(runner, retriever, graph, _config(name, kg_config, options))  # type: ignore[call-arg]

    factories: dict[str, tuple[type[PipelineBase], type | None]] = {
        "no-retrieval": (b.NoRetrieval, None),
        "vanilla-rag": (b.VanillaRAG, b.RAGConfig),
        "query-expansion": (b.QueryExpansion, b.RAGConfig),
        "cot-rag": (b.CoTRAG, b.CoTConfig),
        "decomposition": (b.DecompositionRAG, b.DecompositionConfig),
        "self-ask": (b.SelfAsk, b.SelfAskConfig),
        "sa-rag": (s.SARAG, s.SARAGConfig),
        "sa-rag-cot": (s.SARAGCoT, b.CoTConfig),
        "sa-rag-decomposition": (s.SARAGDecomposition, b.DecompositionConfig),
    }
    if name not in factories:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    cls, config_cls = factories[name]
    if config_cls is None:
        if options:
            raise ConfigError(f"method {name!r} takes no options, got {sorted(options)}")
        return cls(runner, retriever)
    return cls(runner, retriever, _config(name, config_cls, options))  # type: ignore[call-arg]


def _config(method: str, config_cls: type, options: dict[str, object]) -> object:
    try:
        return config_cls(**options)
    except TypeError as exc:
        raise ConfigError(f"method {method!r}: {exc}") from exc


def make_graph(spec: str, context: RetrievalContext | None = None) -> ExternalGraph:
    """A knowledge graph for the KG-Infused methods: ``index`` (the index's own document
    graph), ``index+inverse`` (the same, relations also followed from object to subject)
    or the directory of a graph written by ``quillian kg import``."""
    if spec in ("index", "index+inverse"):
        from quillian.components.kg.document_graph import DocumentGraph

        if context is None:
            raise ConfigError(f"--kg {spec} needs an index")
        return DocumentGraph(context, inverse=spec.endswith("+inverse"))
    from quillian.components.kg.store import ImportedGraph

    return ImportedGraph.open(spec)
