"""Training the KG-embedding model a method reads (Know3-RAG's ComplEx) on a graph
Quillian holds: an imported knowledge graph or an index's document graph. The model is
written beside the graph (``DIR/kge/``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from quillian.components.embedding.base import Embedder
from quillian.components.kg.document_graph import DocumentGraph
from quillian.components.kg.mentions import RelationIndex
from quillian.components.kg.report import Progress, no_progress
from quillian.components.kg.spec import GraphSpec
from quillian.components.kg.store import KIND, MANIFEST, ImportedGraph
from quillian.components.kg.writer import record_in_manifest
from quillian.components.kge.confidence import TripleConfidence
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.sources import (
    triples_from_imported_graph,
    triples_from_knowledge_graph,
)
from quillian.components.kge.storage import MANIFEST as MODEL_MANIFEST
from quillian.components.kge.storage import MODEL_DIR, load_model, model_directory
from quillian.components.kge.storage import read_manifest as read_model_manifest
from quillian.components.kge.triples import TripleSet
from quillian.errors import ConfigError, IndexIncompleteError, IndexStageMissingError
from quillian.index import Index, load_graph, open_storage, read_manifest
from quillian.index.layout import is_server_location, location_name
from quillian.methods.know3.knowledge import Know3Knowledge

if TYPE_CHECKING:
    from quillian.components.kge.train import TrainResult

__all__ = ["graph_triples", "is_imported_graph", "open_knowledge", "train_kge"]


def is_imported_graph(location: str | Path) -> bool:
    """Whether ``location`` holds a graph written by ``quillian kg import`` (else it
    should be an index)."""
    path = Path(location) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("kind") == KIND


def graph_triples(location: str | Path) -> TripleSet:
    """The triples of the imported graph or the index's document graph at ``location``."""
    if is_imported_graph(location):
        with ImportedGraph.open(location) as graph:
            return triples_from_imported_graph(graph)
    manifest = read_manifest(location)
    if manifest.get("state") != "complete":
        raise IndexIncompleteError(
            f"{location_name(location)}: index is incomplete; rerun `quillian index` before "
            "training on it"
        )
    with open_storage(location) as storage:
        return triples_from_knowledge_graph(load_graph(storage))


def train_kge(
    location: str | Path,
    config: ComplExConfig | None = None,
    *,
    resume: bool = True,
    on_progress: Progress = no_progress,
    threads: int | None = None,
) -> TrainResult:
    """Train ComplEx on the graph at ``location`` and save it in ``location/kge``; an
    interrupted run resumes from its last checkpoint unless ``resume`` is False.
    ``threads``: torch threads for the training (None: torch's default, every core).
    ``config.valid_share`` of the triples are held out: training stops when their
    filtered MRR stops improving, and the manifest records it."""
    # imported on use: training needs torch (installed first, CPU build), scoring does not,
    # and every other command would otherwise pay for importing it
    from quillian.components.kge.train import torch_threads

    with torch_threads(threads):
        return _train(location, config, resume, on_progress)


def _train(
    location: str | Path, config: ComplExConfig | None, resume: bool, on_progress: Progress
) -> TrainResult:
    from quillian.components.kge.train import train_and_save

    triples = graph_triples(location)
    if is_imported_graph(location):
        result = train_and_save(
            triples, model_directory(location), config, resume=resume, progress=on_progress
        )
        _record_model(Path(location))
        return result
    if is_server_location(location):  # trained in the local cache, sent to the server at close
        with open_storage(location) as storage:
            return train_and_save(
                triples,
                model_directory(storage.directory),
                config,
                resume=resume,
                progress=on_progress,
            )
    return train_and_save(
        triples, model_directory(location), config, resume=resume, progress=on_progress
    )


def _record_model(graph: Path) -> None:
    """Name the model just saved in the imported graph's manifest (``kge``: its
    directory, format, the graph fingerprint it was trained on, dim, epochs, time). The
    model's own manifest stays what loading checks; this says a graph has one."""
    model = read_model_manifest(model_directory(graph))
    record = {
        "directory": MODEL_DIR,
        "format": model["format"],
        "model": model["model"],
        "fingerprint": model["graph"]["fingerprint"],
        "dim": model["dim"],
        "epochs": model["epochs"],
        "created": model["created"],
    }
    record_in_manifest(graph, "kge", record)


def open_knowledge(
    kg: str | None, index: Callable[[], Index], location: Path | None, embedder: Embedder
) -> Know3Knowledge:
    """The graph a KG-embedding method reads, with its trained model: the imported graph
    of ``--kg DIR`` (model in ``DIR/kge``), else the index's document graph (``--kg
    index`` or none; model in ``INDEX/kge``). ``index`` opens the index on demand. A
    missing model, or one trained on another graph, is refused with the command that
    trains it."""
    spec = GraphSpec.parse(kg) if kg is not None else GraphSpec(None, True, False)
    if spec.directory is not None and spec.documents:
        raise ConfigError(
            f"--kg {kg}: a KG-embedding model is trained on one graph; give --kg DIR "
            "(an imported graph) or --kg index"
        )
    if spec.directory is not None:
        graph = ImportedGraph.open(spec.directory)
        triples = triples_from_imported_graph(graph)
        directory = spec.directory
        relation_embedder: Embedder = _LazyEmbedder(graph)
        relation_aliases: list[tuple[str, ...]] | None = graph.relation_aliases
        source: Any = graph
    else:
        if location is None:
            raise ConfigError(
                "a KG-embedding method needs an index, or an imported graph (--kg DIR)"
            )
        opened = index()
        source = DocumentGraph(opened.context, inverse=spec.inverse)
        triples = triples_from_knowledge_graph(opened.context.kg)
        directory = location
        relation_embedder = embedder
        relation_aliases = None  # a document graph's predicates are their own names
    model = model_directory(directory)
    if not (model / MODEL_MANIFEST).is_file():
        what = "imported graph" if spec.directory is not None else "index"
        raise IndexStageMissingError(
            f"this {what} has no trained KG-embedding model; train one with "
            f"`quillian kg train-kge {'KG' if spec.directory is not None else 'INDEX'}`"
        )
    stored = load_model(model, triples)
    confidence = TripleConfidence(stored.model, triples)
    relations = RelationIndex(triples.relation_names, relation_embedder, aliases=relation_aliases)
    return Know3Knowledge(source, confidence, relations, relation_embedder)


class _LazyEmbedder:
    """An imported graph's query embedder, opened only when a text must be embedded: a
    question whose relations all match by name never needs it."""

    def __init__(self, graph: ImportedGraph) -> None:
        self.graph = graph

    @property
    def model_id(self) -> str:
        return self.graph.embedder_id

    @property
    def dim(self) -> int:
        return self.graph.query_embedder().dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.graph.query_embedder().embed(list(texts))
