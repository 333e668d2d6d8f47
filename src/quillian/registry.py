"""Explicit, lazy registries: a backend name maps to a factory imported on first use.

A missing optional dependency surfaces as :class:`~quillian.errors.MissingExtraError`
naming the extra to install; nothing is installed at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
    from quillian.components.kg.link import Alignment
    from quillian.components.retrieval.sa import Bridges

__all__ = [
    "CHUNKERS",
    "EMBEDDERS",
    "EXTRACTORS",
    "KG_METHODS",
    "METHODS",
    "METHOD_ALIASES",
    "RETRIEVERS",
    "SA_RETRIEVERS",
    "GraphSpec",
    "make_bridges",
    "make_chunker",
    "make_embedder",
    "make_extractor",
    "make_graph",
    "make_pipeline",
    "make_retriever",
]

CHUNKERS = ("passage", "words")
EMBEDDERS = ("minilm", "hash", "keyword")
EXTRACTORS = ("spacy", "precomputed", "llm")
RETRIEVERS = ("sa", "sa-paper", "ppr", "dense", "bm25")
#: The retrievers that can cross into another graph (:func:`make_bridges`).
SA_RETRIEVERS = ("sa", "sa-paper")


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
    if name == "keyword":
        from quillian.testing.fakes import KeywordEmbedder

        return KeywordEmbedder()
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


def make_retriever(
    context: RetrievalContext, name: str, bridges: Bridges | None = None, **options: object
) -> Retriever:
    """A retriever over ``context``; ``options`` override its config fields. ``bridges``
    (:func:`make_bridges`) let SA retrieval cross into another graph."""
    from quillian.components.retrieval.bm25 import BM25Index, BM25Retriever
    from quillian.components.retrieval.dense import DenseRetriever
    from quillian.components.retrieval.ppr import PPRConfig, PPRRetriever
    from quillian.components.retrieval.sa import SAConfig, SARetriever

    if name == "sa":
        return SARetriever(context, SAConfig(**options), bridges=bridges)  # type: ignore[arg-type]
    if name == "sa-paper":
        return SARetriever(context, SAConfig.paper(**options), bridges=bridges)
    if bridges is not None:
        raise ConfigError(f"only SA retrieval crosses into another graph, not {name!r}")
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
#: Other names accepted for methods (the issue tracker's short names).
METHOD_ALIASES: dict[str, str] = {"kg-infused": "kg-infused-rag"}
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


@dataclass(frozen=True)
class GraphSpec:
    """A parsed ``--kg`` value (see :func:`make_graph`)."""

    directory: Path | None
    """An imported graph's directory, or None for the index's own graph."""
    documents: bool
    """Whether the index's document graph takes part."""
    inverse: bool
    """Document relations are also followed from object to subject."""

    @classmethod
    def parse(cls, spec: str) -> GraphSpec:
        rest, inverse = (
            (spec[: -len("+inverse")], True) if spec.endswith("+inverse") else (spec, False)
        )
        if rest == "index":
            return cls(None, True, inverse)
        if rest.endswith("+index"):
            return cls(Path(rest[: -len("+index")]), True, inverse)
        if inverse:
            raise ConfigError(f"--kg {spec}: +inverse applies to the index's graph only")
        return cls(Path(rest), False, False)


def make_graph(
    spec: str, context: RetrievalContext | None = None, index_dir: Path | None = None
) -> ExternalGraph:
    """A knowledge graph for the KG-Infused methods:

    * ``index``: the index's own document graph; ``index+inverse``: the same, relations
      also followed from object to subject;
    * ``DIR``: a graph written by ``quillian kg import``;
    * ``DIR+index`` (or ``DIR+index+inverse``): both, joined through the alignment
      ``quillian kg link DIR --documents INDEX`` saved (one graph across sources).
    """
    parsed = GraphSpec.parse(spec)
    if parsed.documents and context is None:
        raise ConfigError(f"--kg {spec} needs an index")
    if parsed.directory is None:
        from quillian.components.kg.document_graph import DocumentGraph

        assert context is not None
        return DocumentGraph(context, inverse=parsed.inverse)
    from quillian.components.kg.store import ImportedGraph

    external = ImportedGraph.open(parsed.directory)
    if not parsed.documents:
        return external
    from quillian.components.kg.document_graph import DocumentGraph
    from quillian.components.kg.linked import LinkedGraph

    assert context is not None
    documents = DocumentGraph(context, inverse=parsed.inverse)
    return LinkedGraph(external, documents, _alignment(parsed.directory, spec, index_dir))


def make_bridges(spec: str | None, index_dir: Path | None) -> Bridges | None:
    """Bridges through an imported graph for SA retrieval when ``spec`` joins one to
    the index (``DIR+index``), else None."""
    if spec is None:
        return None
    parsed = GraphSpec.parse(spec)
    if parsed.directory is None or not parsed.documents:
        return None
    from quillian.components.kg.linked import LinkBridges
    from quillian.components.kg.store import ImportedGraph

    alignment = _alignment(parsed.directory, spec, index_dir)
    return LinkBridges(ImportedGraph.open(parsed.directory), alignment)


def _alignment(directory: Path, spec: str, index_dir: Path | None) -> Alignment:
    from quillian.components.kg.link import Alignment

    if index_dir is None:
        raise ConfigError(f"--kg {spec} needs the index directory to find its alignment")
    return Alignment.load(directory, index_dir)
