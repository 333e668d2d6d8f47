"""SA-RAG end to end (section 5, Appendix B): spreading-activation retrieval, then the
answering prompt (Listing 6) over the passages and the relations between activated
entities; and SA-RAG as the retriever inside the CoT and decomposition loops, with the
reasoning prompt (Listing 7) at each CoT step."""

from __future__ import annotations

from dataclasses import dataclass

from quillian.components.generation.evidence import context_values, strongest
from quillian.components.generation.tasks import ANSWER_SA, REASON_SA, for_question
from quillian.errors import ConfigError
from quillian.methods.base import PipelineBase, Run
from quillian.methods.baselines.pipelines import CoTRAG, DecompositionRAG, OpenAnswers
from quillian.methods.steps import AnswerReasoning

__all__ = ["SARAG", "SARAGCoT", "SARAGConfig", "SARAGDecomposition"]


@dataclass(frozen=True)
class SARAGConfig(OpenAnswers):
    k: int = 6
    """Passages in the context (the same budget as vanilla RAG's k_p)."""
    max_relations: int = 10
    """Relations between activated entities added to the context (the paper's r_1..r_k2),
    strongest first."""

    def __post_init__(self) -> None:
        if self.k <= 0 or self.max_relations < 0:
            raise ConfigError(
                f"k must be > 0 and max_relations >= 0, got {self.k}, {self.max_relations}"
            )


class SARAG(PipelineBase):
    """One SA retrieval, then SA-RAG's answering prompt."""

    name = "sa-rag"

    config_class = SARAGConfig
    config: SARAGConfig

    async def _answer(self, run: Run) -> str:
        passages, relations = await self.retrieve(run, run.question, self.config.k)
        answer = await self.runner.run(
            for_question(ANSWER_SA, run.question, self.config.open_answers),
            run.transcript,
            question=run.question,
            **context_values("", passages, strongest(relations, self.config.max_relations)),
        )
        run.steps.append(AnswerReasoning(answer.reasoning))
        return answer.final_answer


class SARAGCoT(CoTRAG):
    """SA-RAG inside the CoT loop: SA retrieval per step, Listing 7, then Listing 6."""

    name = "sa-rag-cot"
    step_task = REASON_SA
    answer_task = ANSWER_SA
    uses_relations = True


class SARAGDecomposition(DecompositionRAG):
    """SA-RAG inside query decomposition, answering with Listing 6."""

    name = "sa-rag-decomposition"
    answer_task = ANSWER_SA
    uses_relations = True
