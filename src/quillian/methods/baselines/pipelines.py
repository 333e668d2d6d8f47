"""The baselines users compare against, on the papers' prompts.

- ``no-retrieval`` and ``vanilla-rag`` / ``query-expansion`` follow KG-Infused RAG
  (section 4.2, Tables 9-12): top ``k_p`` = 6 passages, or 3 for the question and 3
  for an LLM-expanded query, a passage note, then a short answer.
- ``cot-rag`` and ``decomposition`` follow SA-RAG's Appendix A (Listings 1-3).
- ``self-ask`` follows KG-Infused RAG's Table 19 with the local retriever answering each
  follow-up question (Appendix G).

The retriever inside every loop is pluggable (dense, BM25, SA, PPR); SA-RAG's own
pipelines in :mod:`quillian.methods.sa_rag.pipelines` are these loops with its prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quillian.components.generation.evidence import (
    context_values,
    format_passages,
    strongest,
    with_memory,
)
from quillian.components.generation.outputs import (
    Decomposition,
    ReasonedAnswer,
    ReasoningStep,
    SubQuestion,
)
from quillian.components.generation.tasks import (
    ANSWER_BASELINE,
    ANSWER_CLOSED,
    ANSWER_PASSAGES,
    DECOMPOSE,
    EXPAND_QUERY,
    PASSAGE_NOTE,
    REASON_COT,
    SELF_ASK,
    for_question,
)
from quillian.components.llm.tasks import Task, TaskFailed
from quillian.components.retrieval.base import ScoredPassage
from quillian.errors import ConfigError
from quillian.methods.base import PipelineBase, Run, dual_retrieve
from quillian.methods.steps import (
    AnswerReasoning,
    ExpandedQuery,
    FollowUp,
    Note,
    Reasoning,
)
from quillian.methods.steps import SubQuestion as SubQuestionStep

__all__ = [
    "CoTConfig",
    "CoTRAG",
    "DecompositionConfig",
    "DecompositionRAG",
    "NoRetrieval",
    "OpenAnswers",
    "QueryExpansion",
    "RAGConfig",
    "SelfAsk",
    "SelfAskConfig",
    "VanillaRAG",
]


def _positive(**values: int) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ConfigError(f"{name} must be greater than 0, got {value}")


class NoRetrieval(PipelineBase):
    """The question alone (KG-Infused RAG Table 9)."""

    name = "no-retrieval"
    needs_retriever = False

    async def _answer(self, run: Run) -> str:
        return await self.runner.run(ANSWER_CLOSED, run.transcript, question=run.question)


@dataclass(frozen=True)
class RAGConfig:
    k: int = 6
    """Passages in the prompt (k_p; the expanded query gets half, the question half)."""
    note: bool = True
    """Write a passage note first (Table 12), as KG-Infused RAG's baselines do."""

    def __post_init__(self) -> None:
        _positive(k=self.k)


class VanillaRAG(PipelineBase):
    """Top-k passages for the question, a passage note, a short answer."""

    name = "vanilla-rag"

    config_class = RAGConfig
    config: RAGConfig

    async def _answer(self, run: Run) -> str:
        passages, _ = await self.retrieve(run, run.question, self.config.k)
        return await self._generate(run, passages)

    async def _generate(self, run: Run, passages: list[ScoredPassage]) -> str:
        context = format_passages(passages)
        if self.config.note:
            context = await self.runner.run(
                PASSAGE_NOTE, run.transcript, question=run.question, passages=context
            )
            run.steps.append(Note(context))
        return await self.runner.run(
            ANSWER_PASSAGES, run.transcript, question=run.question, passages=context
        )


class QueryExpansion(VanillaRAG):
    """An LLM-written second query (Table 11); k/2 passages for each query, merged
    without duplicates (eq. 7, as in KG-Infused RAG)."""

    name = "query-expansion"

    async def _answer(self, run: Run) -> str:
        expanded = await self.runner.run(EXPAND_QUERY, run.transcript, question=run.question)
        run.steps.append(ExpandedQuery(expanded))
        passages = await dual_retrieve(self.retrieve, run, run.question, expanded, self.config.k)
        return await self._generate(run, passages)


@dataclass(frozen=True)
class OpenAnswers:
    """The answer check of the methods that answer in JSON (SA-RAG's listings)."""

    open_answers: bool = field(default=True, kw_only=True)
    """Beyond the papers: a bare "yes" or "no" to a question that does not ask one is
    refused (a parse failure, recorded) and asked again with a hint; a second one is
    kept (:mod:`quillian.components.generation.polar`). False: the papers' parse."""


@dataclass(frozen=True)
class CoTConfig(OpenAnswers):
    k: int = 5
    """Passages retrieved per step (SA-RAG's CoT baseline uses 5 or 10)."""
    max_steps: int = 3
    """Reasoning steps before answering from what was gathered (the paper's three)."""
    max_relations: int = 10
    """Relations shown per step when the step prompt takes them (SA-RAG)."""

    def __post_init__(self) -> None:
        _positive(k=self.k, max_steps=self.max_steps, max_relations=self.max_relations)


class CoTRAG(PipelineBase):
    """Iterative retrieval (SA-RAG Appendix A, Listing 2): each step reasons over the new
    passages and a summarised memory, then answers or asks a follow-up question that
    drives the next retrieval; the final answer uses the answering prompt."""

    name = "cot-rag"
    step_task: Task[ReasoningStep] = REASON_COT
    answer_task: Task[ReasonedAnswer] = ANSWER_BASELINE
    uses_relations = False

    config_class = CoTConfig
    config: CoTConfig

    async def _gather(self, run: Run, query: str) -> dict[str, str]:
        """The knowledge one step reasons over, as prompt variables: the top-k passages
        for ``query`` (and the strongest relations, for SA-RAG's prompts)."""
        passages, found = await self.retrieve(run, query, self.config.k)
        relations = strongest(found, self.config.max_relations) if self.uses_relations else None
        return context_values("", passages, relations)

    async def _answer(self, run: Run) -> str:
        memory, query = "", run.question
        knowledge: dict[str, str] = {}
        for _ in range(self.config.max_steps):
            knowledge = await self._gather(run, query)
            step = await self.runner.run(
                for_question(self.step_task, run.question, self.config.open_answers),
                run.transcript,
                question=run.question,
                **with_memory(knowledge, memory),
            )
            memory = step.provided_context or memory
            run.steps.append(Reasoning(**step.model_dump()))
            if step.answer_possible and step.final_answer.strip():
                break
            if not step.additional_question.strip():
                break
            query = step.additional_question
        answer = await self.runner.run(
            for_question(self.answer_task, run.question, self.config.open_answers),
            run.transcript,
            question=run.question,
            **with_memory(knowledge, memory),
        )
        run.steps.append(AnswerReasoning(answer.reasoning))
        return answer.final_answer


@dataclass(frozen=True)
class DecompositionConfig(OpenAnswers):
    k: int = 5
    """Passages retrieved per sub-question and for the final step."""
    max_subquestions: int = 4
    """Sub-questions answered at most; a longer plan is cut."""

    def __post_init__(self) -> None:
        _positive(k=self.k, max_subquestions=self.max_subquestions)


class DecompositionRAG(PipelineBase):
    """Query decomposition (SA-RAG Listing 3): sub-questions answered in order, each
    retrieving with the earlier questions and answers; a final retrieval with the
    original question, and the answer from everything gathered."""

    name = "decomposition"
    answer_task: Task[ReasonedAnswer] = ANSWER_BASELINE
    uses_relations = False

    config_class = DecompositionConfig
    config: DecompositionConfig

    async def _decompose(self, run: Run) -> list[str]:
        try:
            plan = await self.runner.run(DECOMPOSE, run.transcript, question=run.question)
        except TaskFailed:  # recorded in the transcript; answer the question directly
            plan = Decomposition(subquestions=[SubQuestion(question=run.question)])
        questions = [s.question for s in plan.subquestions if s.question.strip()]
        return questions[: self.config.max_subquestions] or [run.question]

    async def _answer(self, run: Run) -> str:
        solved: list[str] = []
        for sub in await self._decompose(run):
            query = " ".join([*solved, sub])
            passages, relations = await self.retrieve(run, query, self.config.k)
            context = context_values(
                " ".join(solved), passages, relations if self.uses_relations else None
            )
            answer = await self.runner.run(
                for_question(self.answer_task, sub, self.config.open_answers),
                run.transcript,
                question=sub,
                **context,
            )
            solved.append(f"Q: {sub} A: {answer.final_answer}")
            run.steps.append(SubQuestionStep(sub, answer.final_answer))
        passages, relations = await self.retrieve(run, run.question, self.config.k)
        memory = " ".join(solved)
        final = await self.runner.run(
            for_question(self.answer_task, run.question, self.config.open_answers),
            run.transcript,
            question=run.question,
            **context_values(memory, passages, relations if self.uses_relations else None),
        )
        return final.final_answer


@dataclass(frozen=True)
class SelfAskConfig:
    k: int = 6
    """Passages retrieved for each follow-up question (KG-Infused RAG's Self-Ask: 6)."""
    max_follow_ups: int = 4
    """Follow-up questions at most before answering from what they found."""

    def __post_init__(self) -> None:
        _positive(k=self.k, max_follow_ups=self.max_follow_ups)


class SelfAsk(PipelineBase):
    """Self-Ask (Table 19): the model asks follow-up questions one at a time; each is
    answered from retrieved passages (Table 10) and appended as an intermediate answer."""

    name = "self-ask"

    config_class = SelfAskConfig
    config: SelfAskConfig

    async def _answer_follow_up(self, run: Run, question: str) -> str:
        """Answer one follow-up question from its top-k passages (Table 10)."""
        passages, _ = await self.retrieve(run, question, self.config.k)
        return await self.runner.run(
            ANSWER_PASSAGES, run.transcript, question=question, passages=format_passages(passages)
        )

    async def _answer(self, run: Run) -> str:
        trace = ""
        for _ in range(self.config.max_follow_ups + 1):
            step = await self.runner.run(
                SELF_ASK, run.transcript, question=run.question, steps=trace
            )
            if step.final_answer:
                return step.final_answer
            answer = await self._answer_follow_up(run, step.follow_up)
            trace += f"Follow up: {step.follow_up}\nIntermediate answer: {answer}\n"
            run.steps.append(FollowUp(step.follow_up, answer))
        return await self.runner.run(
            ANSWER_PASSAGES,
            run.transcript,
            question=run.question,
            passages=trace or "(none)",
        )
