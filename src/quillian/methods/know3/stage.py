"""Know3-RAG's build stage: a ComplEx model of the index's document graph.

Run after the graph stage when an index is built for ``know3-rag``
(``quillian index ... --for know3-rag``); the model is saved in ``INDEX/kge``, as
``quillian kg train-kge INDEX`` would save it. A model already trained on the same graph
(same fingerprint) is kept, so resuming or re-running a build does not train again.
"""

from __future__ import annotations

import logging

from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.sources import triples_from_knowledge_graph
from quillian.components.kge.storage import model_directory, read_manifest
from quillian.errors import ModelLoadError
from quillian.index.stages import BuildState

__all__ = ["KGEStage"]

logger = logging.getLogger(__name__)


class KGEStage:
    """Trains ComplEx on the document graph the graph stage built."""

    name = "kge"

    def __init__(self, config: ComplExConfig | None = None) -> None:
        self.config = config or ComplExConfig()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KGEStage) and other.config == self.config

    def __hash__(self) -> int:
        return hash((KGEStage, self.config))

    def run(self, state: BuildState) -> None:
        triples = triples_from_knowledge_graph(state.graph())
        directory = model_directory(state.storage.directory)
        try:
            if read_manifest(directory)["graph"]["fingerprint"] == triples.fingerprint:
                logger.info("KG-embedding model of %s is up to date", directory)
                state.counts["kge_triples"] = len(triples)
                return
        except (ModelLoadError, KeyError, TypeError):
            pass  # none yet, or unreadable: train anew
        # imported on use: training needs torch, and every other build stage does not
        from quillian.components.kge.train import train_and_save

        result = train_and_save(triples, directory, self.config, progress=state.progress)
        state.counts["kge_triples"] = len(triples)
        state.counts["kge_epochs"] = result.epochs
