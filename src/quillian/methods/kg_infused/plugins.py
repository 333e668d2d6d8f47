"""KG-Infused RAG as a plug-in inside iterative RAG loops (Appendix G, H.1).

* ``self-ask-kg`` - Self-Ask (Table 19) whose sub-question answering is enhanced as in
  Appendix G: "we first perform KG-Based QE on each sub-question to retrieve new
  passages, followed by KG-Aug Gen to enhance the retrieved passages with relevant KG
  triples. Answers are then generated based on the fact-enhanced notes." Each follow-up
  question runs the KG modules of :class:`~quillian.methods.kg_infused.pipeline.KGInfusion`
  (spreading activation seeded by the follow-up question, its summary, KG-based QE with
  ``k/2`` + ``k/2`` passages, passage note, knowledge augmentation) and is answered with
  Table 10 from the fact-enhanced note.
* ``cot-rag-kg`` - the CoT loop (SA-RAG Listing 2). The paper has no CoT plug-in; this
  one follows the Self-Ask integration: every query the loop retrieves for (the
  question, then each follow-up question) runs the KG modules, and the reasoning step
  and the final answer read the fact-enhanced note where the baseline reads the raw
  passages (with the summary of earlier steps first, as in the baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

from quillian.components.generation.tasks import ANSWER_PASSAGES
from quillian.methods.base import Run
from quillian.methods.baselines.pipelines import CoTConfig, CoTRAG, SelfAsk, SelfAskConfig
from quillian.methods.kg_infused.pipeline import KGModuleConfig, KGModules

__all__ = ["CoTKGConfig", "CoTRAGKG", "SelfAskKG", "SelfAskKGConfig"]


@dataclass(frozen=True)
class SelfAskKGConfig(SelfAskConfig, KGModuleConfig):
    """Self-Ask's settings (``k`` passages per follow-up, 6) and the KG modules'."""

    def __post_init__(self) -> None:
        SelfAskConfig.__post_init__(self)
        KGModuleConfig.__post_init__(self)
        self.check_passages(self.k)


@dataclass(frozen=True)
class CoTKGConfig(CoTConfig, KGModuleConfig):
    """The CoT loop's settings (``k`` passages per step, 5) and the KG modules'."""

    def __post_init__(self) -> None:
        CoTConfig.__post_init__(self)
        KGModuleConfig.__post_init__(self)
        self.check_passages(self.k)


class SelfAskKG(KGModules, SelfAsk):
    """Self-Ask with each follow-up question answered through the KG modules."""

    name = "self-ask-kg"
    config_class = SelfAskKGConfig  # type: ignore[assignment]  # adds the KG modules' fields
    config: SelfAskKGConfig

    async def _answer_follow_up(self, run: Run, question: str) -> str:
        """Answer a follow-up question from its fact-enhanced note (Appendix G)."""
        fact = await self.kg.fact_note(run, question, self.retrieve, self.config.k)
        return await self.runner.run(
            ANSWER_PASSAGES, run.transcript, question=question, passages=fact.final
        )


class CoTRAGKG(KGModules, CoTRAG):
    """The CoT loop reasoning over a fact-enhanced note for each query."""

    name = "cot-rag-kg"
    config_class = CoTKGConfig  # type: ignore[assignment]  # adds the KG modules' fields
    config: CoTKGConfig

    async def _gather(self, run: Run, query: str) -> dict[str, str]:
        """The fact-enhanced note for ``query`` in place of the raw passages."""
        note = await self.kg.fact_note(run, query, self.retrieve, self.config.k)
        return {"passages": note.final}
