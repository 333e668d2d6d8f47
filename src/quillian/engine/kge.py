"""Training the KG-embedding model a method reads (Know3-RAG's ComplEx) on a graph
Quillian holds: an imported knowledge graph or an index's document graph. The model is
written beside the graph (``DIR/kge/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from quillian.components.kg.report import Progress, no_progress
from quillian.components.kg.store import KIND, MANIFEST, ImportedGraph
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.sources import (
    triples_from_imported_graph,
    triples_from_knowledge_graph,
)
from quillian.components.kge.storage import model_directory
from quillian.components.kge.triples import TripleSet
from quillian.errors import IndexIncompleteError
from quillian.index import load_graph, open_storage, read_manifest

if TYPE_CHECKING:
    from quillian.components.kge.train import TrainResult

__all__ = ["graph_triples", "is_imported_graph", "train_kge"]


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
            f"{location}: index is incomplete; rerun `quillian index` before training on it"
        )
    with open_storage(location) as storage:
        return triples_from_knowledge_graph(load_graph(storage))


def train_kge(
    location: str | Path,
    config: ComplExConfig | None = None,
    *,
    resume: bool = True,
    on_progress: Progress = no_progress,
) -> TrainResult:
    """Train ComplEx on the graph at ``location`` and save it in ``location/kge``; an
    interrupted run resumes from its last checkpoint unless ``resume`` is False."""
    # imported on use: training needs torch (installed first, CPU build), scoring does not,
    # and every other command would otherwise pay for importing it
    from quillian.components.kge.train import train_and_save

    triples = graph_triples(location)
    return train_and_save(
        triples, model_directory(location), config, resume=resume, progress=on_progress
    )
