"""Components by name, for the method table and the edges: chunkers, extractors and
retrievers (embedders are in :mod:`quillian.components.embedding.factory`).

Each backend's heavy dependency (spaCy, torch, bm25s) is imported when it is first used,
not here; a missing optional one raises :class:`~quillian.errors.MissingExtraError`
naming the extra to install.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from quillian.components.chunking.base import Chunker
from quillian.components.chunking.chunkers import PassageChunker, WordWindowChunker
from quillian.components.embedding.factory import DEFAULT_EMBEDDER, EMBEDDERS, make_embedder
from quillian.components.extraction.base import Extractor
from quillian.components.extraction.llm import LLMExtractor
from quillian.components.extraction.llm_budget import ExtractionBudget
from quillian.components.extraction.precomputed import PrecomputedExtractor
from quillian.components.extraction.quads import QUAD_EXTRACTOR, QuadExtractor
from quillian.components.extraction.spacy_ner import SpacyExtractor
from quillian.components.kag.extraction import KAGExtractor
from quillian.components.kag.schema import load_schema
from quillian.components.kag.walk import typed_chunk_walk
from quillian.components.llm.tasks import TaskRunner
from quillian.components.retrieval.base import Retriever
from quillian.components.retrieval.bm25 import BM25Retriever
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.dense import DenseRetriever
from quillian.components.retrieval.fusion import FusedConfig, FusedRetriever
from quillian.components.retrieval.kag import KAGChunkConfig, KAGChunkRetriever
from quillian.components.retrieval.kags import KAGSRetriever, KAGSSearch
from quillian.components.retrieval.ppr import PPRConfig, PPRRetriever
from quillian.components.retrieval.sa import Bridges, SAConfig, SARetriever
from quillian.errors import ConfigError

__all__ = [
    "CHUNKERS",
    "DEFAULT_EMBEDDER",
    "EMBEDDERS",
    "EMBEDS_QUERY",
    "EXTRACTORS",
    "RETRIEVERS",
    "RETRIEVER_CONFIGS",
    "SA_RETRIEVERS",
    "make_chunker",
    "make_embedder",
    "make_extractor",
    "make_retriever",
]

CHUNKERS = ("passage", "words")
EXTRACTORS = ("spacy", "precomputed", "llm", QUAD_EXTRACTOR, "kag-llm")
RETRIEVERS = (
    "sa",
    "sa-paper",
    "ppr",
    "dense",
    "bm25",
    "kags",
    "kag",
    "kag-typed",
    "kag-mi",
    "fused",
)
#: Each retriever's configuration dataclass (its options), None for those with none.
RETRIEVER_CONFIGS: dict[str, type | None] = {
    "sa": SAConfig,
    "sa-paper": SAConfig,
    "ppr": PPRConfig,
    "dense": None,
    "bm25": None,
    "kags": KAGSSearch,
    "kag": KAGChunkConfig,
    "kag-typed": KAGChunkConfig,
    "kag-mi": KAGChunkConfig,
    "fused": FusedConfig,
}
#: The retrievers that embed the query (the others ignore a query vector).
EMBEDS_QUERY = ("sa", "sa-paper", "ppr", "dense", "kags", "kag", "kag-typed", "kag-mi", "fused")
#: KAG's chunk retrievers and the graph each walks: ``kag`` the index's entity+chunk
#: graph (the default: the best on the report's sets), ``kag-typed`` the typed graph
#: with its alignment (K_Alignment), ``kag-mi`` the typed graph without it (M_Indexing).
KAG_WALKS: dict[str, dict[str, bool]] = {
    "kag": {},
    "kag-typed": {"typed_graph": True, "alignment": True},
    "kag-mi": {"typed_graph": True, "alignment": False},
}
#: Options of a retriever when it is a member of ``fused``: KAG's BM25 swap-in only
#: replaces the 50th passage of the member's list there (a BM25 search per query for
#: 1/51 of one passage's fused score).
FUSED_MEMBER_OPTIONS: dict[str, dict[str, object]] = {
    name: {"bm25_swap": False} for name in KAG_WALKS
}
#: The retrievers that can cross into another graph (``bridges``).
SA_RETRIEVERS = ("sa", "sa-paper")


def make_chunker(name: str, size: int = 500, overlap: int = 200) -> Chunker:
    """``passage`` (one chunk per passage; a document over 8,000 characters cut into
    passages of at most that) or ``words`` (windows of ``size`` words)."""
    if name == "passage":
        return PassageChunker()
    if name == "words":
        return WordWindowChunker(size=size, overlap=overlap)
    raise ConfigError(f"unknown chunker {name!r}; choose one of {', '.join(CHUNKERS)}")


def make_extractor(
    name: str,
    extractions: Path | None = None,
    titles: Sequence[str] = (),
    *,
    runner: TaskRunner | None = None,
    budget: ExtractionBudget | None = None,
    schema: Path | None = None,
) -> Extractor:
    """An extractor by name. ``titles`` are all document titles of the corpus, which the
    spaCy and LLM extractors use to keep title aliases unambiguous (spaCy also to link
    title mentions). The LLM extractor needs ``runner`` (its chat model and prompts) and
    takes an optional ``budget``; KAG's extractor types entities by ``schema`` (a file;
    None: the shipped open-domain schema)."""
    if name == "spacy":
        return SpacyExtractor(corpus_titles=titles)
    if name == "precomputed":
        if extractions is None:
            raise ConfigError("the precomputed extractor needs --extractions FILE")
        return PrecomputedExtractor(extractions)
    if name == "llm":
        if runner is None:
            raise ConfigError("the llm extractor needs a chat model (--llm SPEC)")
        return LLMExtractor(runner, budget=budget, corpus_titles=titles)
    if name == QUAD_EXTRACTOR:
        if runner is None:
            raise ConfigError(f"the {QUAD_EXTRACTOR} extractor needs a chat model (--llm SPEC)")
        if budget is not None and budget != ExtractionBudget():
            raise ConfigError(f"the {QUAD_EXTRACTOR} extractor takes no budget")
        return QuadExtractor(runner)
    if name == "kag-llm":
        if runner is None:
            raise ConfigError("the kag-llm extractor needs a chat model (--llm SPEC)")
        return KAGExtractor(runner, load_schema(schema) if schema else None)
    raise ConfigError(f"unknown extractor {name!r}; choose one of {', '.join(EXTRACTORS)}")


def make_retriever(
    context: RetrievalContext, name: str, bridges: Bridges | None = None, **options: object
) -> Retriever:
    """A retriever over ``context``; ``options`` override its config fields. ``bridges``
    let SA retrieval cross into another graph."""
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
    if name in KAG_WALKS:
        settings = {**KAG_WALKS[name], **options}
        return KAGChunkRetriever(
            context,
            KAGChunkConfig(**settings),  # type: ignore[arg-type]
            typed=typed_chunk_walk,
        )
    if name == "bm25":
        if context.bm25 is None:
            raise ConfigError("this index has no BM25 index")
        return BM25Retriever(context, context.bm25)
    if name == "kags":
        return KAGSRetriever(context, KAGSSearch(**options))  # type: ignore[arg-type]
    if name == "fused":
        config = FusedConfig(**options)  # type: ignore[arg-type]
        if "fused" in config.names:
            raise ConfigError("a fused retriever cannot fuse itself")
        members = [
            make_retriever(context, m, None, **FUSED_MEMBER_OPTIONS.get(m, {}))
            for m in config.names
        ]
        return FusedRetriever(members, config, context)
    raise ConfigError(f"unknown retrieval method {name!r}; choose one of {', '.join(RETRIEVERS)}")
