"""KAG's build stage: the typed graph with its mutual index and alignment, written next
to the index's other artifacts, and how the solver opens it again.

Layout under the index directory: ``kag/graph.json`` (nodes, edges, build issues) and
the vector collections ``kag-names`` and ``kag-descs`` (one row per entity node, in
node order among the entities). BM25 over chunks and the chunk vectors are the index's
own (the default stages).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quillian.components.kag.alignment import (
    Aligner,
    ConceptSource,
    WordNetHypernyms,
    without_alignment,
)
from quillian.components.kag.graph import TypedGraph, TypedGraphBuilder
from quillian.components.kag.knowledge import KagKnowledge
from quillian.components.kag.schema import Schema, default_schema, load_schema
from quillian.components.retrieval.context import RetrievalContext
from quillian.errors import IndexIncompleteError
from quillian.index.artifacts import replace_dir
from quillian.index.stages import BuildState
from quillian.index.storage import open_storage

__all__ = ["GRAPH_FILE", "KAGGraphStage", "open_knowledge"]

GRAPH_FILE = Path("kag") / "graph.json"
NAMES, DESCS = "kag-names", "kag-descs"


class KAGGraphStage:
    """Build KAG's typed graph from the index's extractions (whatever extractor made
    them), align it, and store it with its name and description vectors.

    ``schema_file``: a schema (YAML or JSON), else the shipped open-domain one;
    ``align``: add concept nodes with isA chains (WordNet hypernyms) and synonym edges.
    """

    name = "kag-graph"

    def __init__(self, schema_file: str | None = None, *, align: bool = True) -> None:
        self.schema_file = schema_file
        self.align = align

    def concept_source(self) -> ConceptSource:
        """Where concept chains come from (WordNet's hypernyms)."""
        return WordNetHypernyms()

    def schema(self) -> Schema:
        return load_schema(self.schema_file) if self.schema_file else default_schema()

    def run(self, state: BuildState) -> None:
        schema = self.schema()
        builder = TypedGraphBuilder(schema)
        builder.add_all(state.extractions)
        graph = builder.build()
        state.progress("kag-graph", 1, 3)
        if self.align:
            graph = Aligner(schema, self.concept_source()).align(graph)
        state.progress("kag-graph", 2, 3)
        directory = state.storage.directory
        replace_dir(directory / GRAPH_FILE.parent, lambda p: graph.save(p / GRAPH_FILE.name))
        entities = graph.entity_nodes()
        names = [graph.nodes[i].name for i in entities]
        descs = [graph.nodes[i].desc or graph.nodes[i].name for i in entities]
        for collection, texts in ((NAMES, names), (DESCS, descs)):
            index = state.storage.vectors(collection, state.embedder.dim, fresh=True)
            try:
                if texts:
                    index.add(np.arange(len(texts)), state.embedder.embed(texts))
                index.flush()
            finally:
                index.close()
        state.counts.update(graph.counts())
        state.progress("kag-graph", 3, 3)


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
        raise IndexIncompleteError(
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
