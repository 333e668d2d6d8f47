"""KAGS end to end: retrieval by triples with metadata filtration and h-hop traversal
(:mod:`quillian.components.retrieval.kags`), then an answer from the relations grouped
by hop and predicate, with their source sentences unless switched off
(:mod:`quillian.components.generation.kags`).

The generator reads only the relation context, as in the authors' ``kga.py``; the
supporting passages of the kept relations are kept as evidence (for faithfulness and
the retrieval benchmarks), not shown to the generator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from quillian.components.concurrency import Offload
from quillian.components.generation.kags import ANSWER_KAGS, format_hop_context
from quillian.components.llm.tasks import TaskRunner
from quillian.components.retrieval.base import Retriever
from quillian.components.retrieval.kags import KAGSRetriever
from quillian.errors import ConfigError
from quillian.methods.base import PipelineBase, Run

__all__ = ["KAGS", "KAGSConfig"]

#: What the generator reads when retrieval kept nothing.
NO_CONTEXT = "No relevant knowledge was found."


@dataclass(frozen=True)
class KAGSConfig:
    k: int = 7
    """Triples found by vector search (the paper's ablation: 3 to 11)."""
    tau: float = 0.5
    """Metadata filtration threshold on cos(query, source sentence) (ablation: 0.6 to 0.9)."""
    h: int = 2
    """Hops of traversal from the kept triples' ends (ablation: 2 to 6)."""
    max_nodes_per_hop: int = 10
    """Nodes explored per hop."""
    keep_best: bool = True
    """When the filtration keeps none of the k triples, keep the one whose source
    sentence is closest to the question (false: the authors' code, no context)."""
    sentences: bool = True
    """Pass the source sentences to the generator (the authors' code does not)."""
    passages: int = 5
    """Supporting passages kept as evidence (the generator does not read them)."""

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.k <= 100:
            problems.append(f"k must be in [1, 100], got {self.k}")
        if not -1.0 <= self.tau <= 1.0:
            problems.append(f"tau must be in [-1, 1], got {self.tau}")
        if not 0 <= self.h <= 10:
            problems.append(f"h must be in [0, 10], got {self.h}")
        if not 1 <= self.max_nodes_per_hop <= 1000:
            problems.append(f"max_nodes_per_hop must be in [1, 1000], got {self.max_nodes_per_hop}")
        if self.passages < 1:
            problems.append(f"passages must be >= 1, got {self.passages}")
        if problems:
            raise ConfigError("; ".join(problems))


class KAGS(PipelineBase):
    """KAGS retrieval over the index's triples, then the KAGS answer prompt."""

    name = "kags"
    config_class = KAGSConfig
    config: KAGSConfig

    def __init__(
        self,
        runner: TaskRunner,
        retriever: Retriever | None = None,
        config: Any = None,
        *,
        offload: Offload | None = None,
    ) -> None:
        super().__init__(runner, retriever, config, offload=offload)
        if not isinstance(self.retriever, KAGSRetriever):
            raise ConfigError(
                f"method 'kags' needs the kags retriever, not {self.retriever.name!r}"
            )
        cfg = self.config
        search = replace(
            self.retriever.config,
            top_k=cfg.k,
            tau=cfg.tau,
            hops=cfg.h,
            max_nodes_per_hop=cfg.max_nodes_per_hop,
            keep_best=cfg.keep_best,
        )
        self._retriever = self.retriever.with_config(search)

    async def _answer(self, run: Run) -> str:
        run.evidence.passages_read = False  # the generator reads the relations only
        _, relations = await self.retrieve(run, run.question, self.config.passages)
        context = format_hop_context(relations, sentences=self.config.sentences)
        return await self.runner.run(
            ANSWER_KAGS, run.transcript, context=context or NO_CONTEXT, question=run.question
        )
