"""KAG's build stage: the typed graph with its mutual index and alignment, written next
to the index's other artifacts, and how the solver opens it again.

Layout under the index directory: ``kag/graph.json`` (nodes, edges, build issues),
``kag/extraction_issues.jsonl`` (the extractor's recorded issues, :mod:`.issues`) and
the vector collections ``kag-names`` and ``kag-descs`` (one row per entity node, in
node order among the entities). BM25 over chunks and the chunk vectors are the index's
own (the default stages).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from quillian.components.extraction.base import Extraction
from quillian.components.kag.alignment import (
    SIMILAR_THRESHOLD,
    Aligner,
    ConceptSource,
    LLMConcepts,
    WordNetHypernyms,
    link_similar,
    without_alignment,
)
from quillian.components.kag.graph import GRAPH_FILE, BuildIssue, TypedGraph, TypedGraphBuilder
from quillian.components.kag.knowledge import KagKnowledge
from quillian.components.kag.schema import Schema, default_schema, load_schema
from quillian.components.kag.typing import NERTyper, TypingReport
from quillian.components.llm.tasks import TaskRunner
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import ConfigError, IndexStageMissingError, MissingExtraError
from quillian.index.artifacts import replace_dir
from quillian.index.stages import BuildState
from quillian.index.storage import open_storage
from quillian.methods.kag.issues import save_extraction_issues
from quillian.stores.protocols import KeyValueStore

__all__ = ["CONCEPT_SOURCES", "GRAPH_FILE", "KAGGraphStage", "open_knowledge", "stored_schema"]

#: The schema a build was given, copied beside the graph as ``kag/schema.yaml|json``.
SCHEMA_STEM = "schema"
#: Where the alignment's concept chains come from.
CONCEPT_SOURCES = ("wordnet", "llm")
#: How entities an extractor left untyped get a class: spaCy's NER, or not at all.
TYPINGS = ("spacy", "none")
NAMES, DESCS = "kag-names", "kag-descs"


class KAGGraphStage:
    """Build KAG's typed graph from the index's extractions (whatever extractor made
    them), align it, and store it with its schema and its name and description vectors.

    ``schema_file``: a schema (YAML or JSON); without one, the schema the index was
    built with before (kept as ``kag/schema.*``), else the shipped open-domain one.
    ``align``: add concept nodes with isA chains and synonym edges; ``concepts``: where
    the chains come from, ``wordnet`` (offline hypernyms) or ``llm`` (the model's
    concept completion, cached in the index's key-value store so a rebuild asks only
    about new types; with no ``runner``, only the stored chains are used and the types
    left without one are recorded as build issues); ``similar``: the name cosine at
    which two entities of one class are linked ``similar`` (1 links only identical
    vectors); ``typing``: ``spacy`` gives entities an extractor left untyped (recorded
    OpenIE extractions) the NER label of their name in their chunk or corpus.
    """

    name = "kag-graph"

    def __init__(
        self,
        schema_file: str | Path | None = None,
        *,
        align: bool = True,
        concepts: str = "wordnet",
        runner: TaskRunner | None = None,
        similar: float = SIMILAR_THRESHOLD,
        typing: str = "spacy",
    ) -> None:
        if concepts not in CONCEPT_SOURCES:
            raise ConfigError(
                f"unknown concept source {concepts!r}; choose one of {', '.join(CONCEPT_SOURCES)}"
            )
        self.schema_file = Path(schema_file) if schema_file else None
        self.align = align
        self.concepts = concepts
        self.runner = runner
        if not 0.0 < similar <= 1.0:
            raise ConfigError(f"the similar-edge threshold must be in (0, 1], got {similar}")
        self.similar = similar
        if typing not in TYPINGS:
            raise ConfigError(f"unknown typing {typing!r}; choose one of {', '.join(TYPINGS)}")
        self.typing = typing

    def configured(self, options: Mapping[str, Any], runner: TaskRunner | None) -> KAGGraphStage:
        """This stage with a build's options (``kag_schema``, ``kag_concepts``,
        ``kag_similar``, ``kag_typing``; one not set keeps this stage's value). A
        rebuild with no model (after a deletion) keeps ``llm`` concepts from the stored
        chains."""
        return KAGGraphStage(
            options.get("kag_schema") or self.schema_file,
            align=self.align,
            concepts=str(options.get("kag_concepts") or self.concepts),
            runner=runner,
            similar=float(options.get("kag_similar") or self.similar),
            typing=str(options.get("kag_typing") or self.typing),
        )

    def concept_source(self, kv: KeyValueStore) -> ConceptSource:
        """Where concept chains come from: WordNet's hypernyms, or the model's
        completions stored in ``kv``."""
        if self.concepts == "llm":
            return LLMConcepts(self.runner, store=kv)
        return WordNetHypernyms()

    def schema_source(self, directory: Path) -> Path | None:
        """The schema file this build uses: the one given, else the index's own."""
        if self.schema_file is not None:
            return self.schema_file
        return stored_schema(directory)

    def _typed(self, state: BuildState) -> tuple[list[Extraction], BuildIssue | None]:
        """The extractions with untyped entities typed by spaCy's NER (``typing``
        ``spacy``); without spaCy installed they stay untyped, recorded as an issue."""
        if self.typing == "none":
            return list(state.extractions), None
        try:
            typed, report = NERTyper(state.storage.kv).type(state.chunks, state.extractions)
        except MissingExtraError as exc:
            return list(state.extractions), BuildIssue("", str(exc), "entities left untyped")
        state.counts.update(_typing_counts(report))
        return typed, None

    def run(self, state: BuildState) -> None:
        directory = state.storage.directory
        source = self.schema_source(directory)
        schema = load_schema(source) if source else default_schema()
        schema_text = source.read_bytes() if source else None
        extractions, typing_issue = self._typed(state)
        builder = TypedGraphBuilder(schema)
        builder.add_all(extractions)
        graph = builder.build()
        if typing_issue is not None:
            graph.issues.append(typing_issue)
        state.progress("kag-graph", 1, 3)
        names = state.embedder.embed([graph.nodes[i].name for i in graph.entity_nodes()])
        if self.align:
            graph = link_similar(graph, names, self.similar)
            concepts = self.concept_source(state.storage.kv)
            graph = Aligner(schema, concepts).align(graph)
            failures = getattr(concepts, "failures", [])
            graph.issues.extend(
                BuildIssue("", f"concept completion: {f}", "types left without concepts")
                for f in failures
            )
        state.progress("kag-graph", 2, 3)

        def write(path: Path) -> None:
            graph.save(path / GRAPH_FILE.name)
            save_extraction_issues(path, state.extraction_issues)
            if source is not None and schema_text is not None:
                (path / f"{SCHEMA_STEM}{source.suffix or '.yaml'}").write_bytes(schema_text)

        replace_dir(directory / GRAPH_FILE.parent, write)
        # alignment adds concept nodes only: the entities keep their order and vectors
        entities = graph.entity_nodes()
        if len(entities) != len(names):
            names = state.embedder.embed([graph.nodes[i].name for i in entities])
        descs = [graph.nodes[i].desc or graph.nodes[i].name for i in entities]
        for collection, vectors in ((NAMES, names), (DESCS, state.embedder.embed(descs))):
            index = state.storage.vectors(collection, state.embedder.dim, fresh=True)
            try:
                if len(vectors):
                    index.add(np.arange(len(vectors)), vectors)
                index.flush()
            finally:
                index.close()
        state.counts.update(graph.counts())
        state.progress("kag-graph", 3, 3)


def _typing_counts(report: TypingReport) -> dict[str, int]:
    return {
        "kag_typed_in_chunk": report.typed_in_chunk,
        "kag_typed_in_corpus": report.typed_in_corpus,
        "kag_untyped": report.untyped,
    }


def stored_schema(directory: Path) -> Path | None:
    """The schema file an index's KAG graph was built with, if one was given."""
    found = sorted((directory / GRAPH_FILE.parent).glob(f"{SCHEMA_STEM}.*"))
    return found[0] if found else None


@lru_cache(maxsize=4)
def _load(
    directory: str, stamp: float
) -> tuple[TypedGraph, npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    path = Path(directory)
    graph = TypedGraph.load(path / GRAPH_FILE)
    n = len(graph.entity_nodes())
    with open_storage(path) as storage:
        vectors = []
        for collection in (NAMES, DESCS):
            index = storage.vectors(collection)
            try:
                vectors.append(
                    index.get(np.arange(n)) if n else np.zeros((0, index.dim), np.float32)
                )
            finally:
                index.close()
    return graph, vectors[0], vectors[1]


def open_knowledge(
    context: RetrievalContext, schema: Schema, *, alignment: bool = True
) -> KagKnowledge:
    """The KAG graph of the index ``context`` was opened from (with the context's
    embedder), with or without its alignment edges; kept while the file, the context and
    the schema stay the same, so its caches (concept vectors) serve every question."""
    if context.directory is None or not (context.directory / GRAPH_FILE).is_file():
        raise IndexStageMissingError(
            "this index has no KAG graph; build it with `quillian index ... --for kag`"
        )
    stamp = (context.directory / GRAPH_FILE).stat().st_mtime
    return _knowledge(context, stamp, schema, alignment)


@lru_cache(maxsize=8)
def _knowledge(
    context: RetrievalContext, stamp: float, schema: Schema, alignment: bool
) -> KagKnowledge:
    assert context.directory is not None
    graph, names, descs = _load(str(context.directory), stamp)
    texts = dict(zip(context.kg.chunk_ids, context.chunk_texts, strict=True))
    return KagKnowledge(
        graph if alignment else without_alignment(graph),
        schema,
        context.embedder,
        chunk_text=lambda chunk_id: texts.get(chunk_id, ""),
        name_vectors=names,
        desc_vectors=descs,
    )
