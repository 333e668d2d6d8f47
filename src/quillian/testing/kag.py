"""Small typed worlds for KAG's solver tests: a corpus, its extractions written by
hand (typed entities and triples, as KAG's extraction would give), and an index built
through the real build with KAG's graph stage, opened for the solver."""

from __future__ import annotations

__all__ = ["ConceptStage", "HandExtractor", "build_world", "last_user", "solver"]

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import HashEmbedder
from quillian.components.extraction.base import ExtractedEntity, Extraction
from quillian.components.kag.alignment import MappedConcepts
from quillian.components.kag.knowledge import KagKnowledge
from quillian.components.kag.schema import default_schema
from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import PromptRegistry
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.kag import KAGChunkRetriever
from quillian.index import DEFAULT_STAGES, build_index, open_index
from quillian.methods.kag.pipeline import KAG, KAGConfig
from quillian.methods.kag.stages import KAGGraphStage
from quillian.stores.protocols import KeyValueStore
from quillian.types import Chunk, Document, Provenance, Triple

Entity = tuple[str, str]  # (name, class or semantic type)
Fact = tuple[str, str, str]


class HandExtractor:
    """Extractions by document title: typed entities and triples."""

    name = "hand"

    def __init__(self, world: Mapping[str, tuple[Sequence[Entity], Sequence[Fact]]]) -> None:
        self.world = world

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        out = []
        for c in chunks:
            entities, facts = self.world.get(c.title, ((), ()))
            out.append(
                Extraction(
                    c.id,
                    c.doc_id,
                    tuple(ExtractedEntity(n, t, description=f"{n}: {t}") for n, t in entities),
                    tuple(
                        Triple(s, p, o, f"{s} {p} {o}", Provenance(c.doc_id, c.id, 0, 1, c.text))
                        for s, p, o in facts
                    ),
                )
            )
        return out


class ConceptStage(KAGGraphStage):
    """KAG's stage with concept chains given as data instead of WordNet."""

    def __init__(self, chains: Mapping[str, list[str]]) -> None:
        super().__init__(align=bool(chains))
        self.chains = MappedConcepts(chains)

    def concept_source(self, kv: KeyValueStore) -> MappedConcepts:
        return self.chains


def build_world(
    tmp_path: Path,
    corpus: Mapping[str, str],
    world: Mapping[str, tuple[Sequence[Entity], Sequence[Fact]]],
    chains: Mapping[str, list[str]] | None = None,
) -> RetrievalContext:
    """Index ``corpus`` (title to text) with ``world``'s extractions and KAG's stage
    (concept chains from ``chains``; none: no alignment) and open it."""
    build_index(
        [Document(text, title) for title, text in corpus.items()],
        tmp_path / "index",
        chunker=PassageChunker(),
        extractor=HandExtractor(world),
        embedder=HashEmbedder(64),
        stages=(*DEFAULT_STAGES, ConceptStage(chains or {})),
    )
    return open_index(tmp_path / "index", HashEmbedder(64)).context


def solver(
    context: RetrievalContext,
    routes: Mapping[str, Any],
    knowledge: KagKnowledge | None = None,
    **options: Any,
) -> tuple[KAG, ScriptedChatModel]:
    """KAG over ``context`` (and ``knowledge`` instead of the index's own KAG graph)
    with a scripted model answering by ``routes`` (the question NER, ``kag.query_ner``,
    names nothing unless ``routes`` script it)."""
    # the question NER finds nothing unless a test scripts it
    model = ScriptedChatModel({"kag.query_ner": "[]", **routes})
    registry: PromptRegistry = default_registry()
    pipeline = KAG(
        TaskRunner(model, registry),
        KAGChunkRetriever(context),
        KAGConfig(**options),
        schema=default_schema(),
        knowledge=knowledge,
    )
    return pipeline, model


def last_user(messages: Sequence[ChatMessage]) -> str:
    """The text of the last user message (what a scripted route reads)."""
    return next(m.content for m in reversed(messages) if m.role == "user")
