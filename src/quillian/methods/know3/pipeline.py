"""Know3-RAG (Liu et al. 2025, section 4; spec section 2): a closed loop in which a
KG-embedding model decides when to retrieve and which references to keep.

    D_0 = {}
    for t = 0..T:
        a_t = answer(Q, D_t)                                   P1, eq. 1
        if t == T: output a_t
        s_t = aggregate S(triples of a_t)                      P4, eq. 2
        if s_t < θ_t: output a_t                               adaptive retrieval
        q   = Q if t == 0 else new_query(Q, D_t, a_t)          P3, eq. 3
        E   = related_entities(q)                              Algorithm 1
        D_m = {K_j(q), K_j([E; q]) for each knowledge model}   P2, eqs. 4-5
        R   = {d in D_m : relevant(d, Q, E_Q)}                 P5, eq. 6
        D_{t+1} = D_t + the k + t of R with the lowest s(d)     eq. 7

Beyond the paper, ``corpus_passages`` adds the top passages of the index's retriever
to D_m, so Know3-RAG also runs over a user's corpus; they pass the same filter. The
switches of the configuration are the paper's ablations (Table 3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from quillian.components.concurrency import Offload
from quillian.components.generation.evidence import Reference
from quillian.components.generation.know3_outputs import ChainAnswer
from quillian.components.llm.tasks import TaskFailed, TaskRunner, Transcript
from quillian.components.retrieval.base import Retriever
from quillian.errors import ConfigError, LLMError
from quillian.methods.base import PipelineBase, Run
from quillian.methods.know3.check import KGECheck
from quillian.methods.know3.config import Know3Config
from quillian.methods.know3.knowledge import EntityCard, Know3Knowledge, TextScore, format_entities
from quillian.methods.know3.tasks import (
    ANSWER,
    ENTITY_NOTE,
    QUERY,
    REFERENCE,
    RELEVANCE,
    answer_task,
    example_turns,
    format_references,
    numbered_entities,
)
from quillian.methods.steps import ReferenceFilter, RelatedEntities, TurnAnswer

__all__ = ["Candidate", "Know3RAG", "KnowledgeModel"]

T = TypeVar("T")


@dataclass(frozen=True)
class KnowledgeModel:
    """A model that writes references: its name (its LLM spec) and its task runner."""

    name: str
    runner: TaskRunner


#: How a candidate taken from the index's passages names its source.
PASSAGE_SOURCE = "passage:"


@dataclass
class Candidate:
    """A candidate reference and what the filter found."""

    text: str
    source: str
    """Who wrote it: a knowledge model's name, or :data:`PASSAGE_SOURCE` and the chunk id."""
    query: str
    """raw, kg or corpus."""
    title: str = ""
    """A corpus passage's title (its text then reads ``title: passage``), so a benchmark
    can tell a gold passage from another; empty for a written reference."""
    relevant: bool = True
    scored: TextScore | None = None
    kept: bool = False
    error: str = ""
    """Why the knowledge model wrote nothing (its backend failed, or its reply was
    unusable twice); such a candidate is recorded and skipped."""

    def as_dict(self) -> dict[str, object]:
        if self.error:
            return {
                "source": self.source,
                "query": self.query,
                "text": "",
                "error": self.error,
                "relevant": False,
                "score": None,
                "triples": [],
                "kept": False,
            }
        return {
            "source": self.source,
            "query": self.query,
            **({"title": self.title} if self.title else {}),
            "text": self.text,
            "relevant": self.relevant,
            "score": None
            if self.scored is None or self.scored.score is None
            else round(self.scored.score, 4),
            "triples": [t.as_dict() for t in self.scored.triples] if self.scored else [],
            "dropped": list(self.scored.dropped) if self.scored else [],
            "parse_notes": list(self.scored.parse_notes) if self.scored else [],
            "kept": self.kept,
        }


class Know3RAG(PipelineBase):
    """Know3-RAG over a knowledge graph with its trained ComplEx model."""

    name = "know3-rag"
    needs_retriever = False
    config_class = Know3Config
    config: Know3Config

    def __init__(
        self,
        runner: TaskRunner,
        retriever: Retriever | None,
        knowledge: Know3Knowledge,
        config: Know3Config | None = None,
        *,
        offload: Offload | None = None,
        knowledge_models: Callable[[str], Awaitable[TaskRunner]] | None = None,
    ) -> None:
        super().__init__(runner, retriever, config, offload=offload)
        if self.config.corpus_passages and retriever is None:
            raise ConfigError(
                "know3-rag: corpus_passages needs an index and a retriever (--retriever)"
            )
        self.knowledge = knowledge
        self.check = KGECheck(runner, knowledge, offload=self.offload)
        if self.config.model_specs() and knowledge_models is None:
            raise ConfigError("know3-rag: knowledge_models given, but no way to open them")
        self._open_model = knowledge_models
        self._models: list[KnowledgeModel] | None = None

    async def models(self) -> list[KnowledgeModel]:
        """The knowledge models (the answering model unless ``knowledge_models``)."""
        if self._models is None:
            specs = self.config.model_specs()
            if not specs or self._open_model is None:
                self._models = [KnowledgeModel("answering model", self.runner)]
            else:
                self._models = [KnowledgeModel(s, await self._open_model(s)) for s in specs]
        return self._models

    async def _answer(self, run: Run) -> str:
        config = self.config
        references: list[str] = []
        last = config.max_turns if config.reference else 0
        for turn in range(last + 1):
            shown = {"references": format_references(references), "question": run.question}
            examples, asking = "", ""
            if config.example_check:
                prompt = self.runner.prompts.get(ANSWER.prompt)
                examples, asking = example_turns(prompt.render(**shown))
            task = answer_task(run.question, config.open_answers, examples, asking)
            answer = await self.runner.run(task, run.transcript, **shown)
            run.steps.append(TurnAnswer(turn, answer.answer, answer.reasoning, len(references)))
            if turn == last:
                return answer.answer
            if config.adaptive and await self._accepted(run, answer, turn):
                return answer.answer
            query = run.question
            if turn > 0:
                query = await self.runner.run(
                    QUERY,
                    run.transcript,
                    references=format_references(references),
                    question=run.question,
                    answer=answer.reasoning,
                )
            references.extend(await self._references(run, query, turn, references))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _accepted(self, run: Run, answer: ChainAnswer, turn: int) -> bool:
        """The adaptive decision: the answer's score below θ_t."""
        scored = await self.check.score(answer.reasoning, run.transcript, self.config.how)
        step = KGECheck.step(turn, scored, self.config.theta(turn))
        run.steps.append(step)
        return step.accepted

    async def _references(self, run: Run, query: str, turn: int, kept: Sequence[str]) -> list[str]:
        """One round of knowledge-enhanced generation and filtering: the new references."""
        config = self.config
        cards: list[EntityCard] = []
        if config.kg_query:
            cards = await self.offload(
                self.knowledge.related_entities,
                query,
                local_tails=config.local_tails,
                global_relations=config.global_relations,
                max_entities=config.max_query_entities,
            )
            run.steps.append(
                RelatedEntities(
                    query,
                    tuple(f"{c.label} ({c.source})" for c in cards),
                    tuple(f for c in cards for f in c.facts),
                )
            )
        candidates = await self._candidates(run, query, cards)
        fresh = [c for c in candidates if c.error or c.text not in kept]
        usable = [c for c in fresh if not c.error]
        selected = (await self._filter(run, usable, cards))[: config.k + turn]
        for candidate in selected:
            candidate.kept = True
        run.steps.append(
            ReferenceFilter(turn, query, tuple(c.as_dict() for c in fresh), len(selected))
        )
        run.evidence.add_references(
            Reference(c.text, f"{c.source} ({c.query})", c.scored.score if c.scored else None)
            for c in selected
            if not c.source.startswith(PASSAGE_SOURCE)  # an index passage is a passage
        )
        return [c.text for c in selected]

    async def _candidates(
        self, run: Run, query: str, cards: Sequence[EntityCard]
    ) -> list[Candidate]:
        config = self.config
        entities = numbered_entities(format_entities(cards, config.description_chars))
        jobs: list[tuple[KnowledgeModel, str, str, str]] = []  # model, query kind, P2 blocks
        for model in await self.models():
            if config.raw_query:
                jobs.append((model, "raw", "", ""))
            if config.kg_query and cards:
                jobs.append((model, "kg", ENTITY_NOTE, "\nRelated Entities:" + entities))
        texts = await _in_order(
            run,
            [
                partial(_written, model.runner, question=query, entity_note=note, entities=block)
                for model, _, note, block in jobs
            ],
        )
        candidates = [
            Candidate(text, model.name, kind, error=error)
            for (model, kind, _, _), (text, error) in zip(jobs, texts, strict=True)
        ]
        if config.corpus_passages:
            passages, _ = await self.retrieve(run, query, config.corpus_passages)
            candidates += [
                Candidate(
                    f"{p.title}: {p.text}" if p.title else p.text,
                    f"{PASSAGE_SOURCE}{p.chunk_id}",
                    "corpus",
                    title=p.title,
                )
                for p in passages
            ]
        unique: dict[str, Candidate] = {}
        for c in candidates:
            unique.setdefault(f"{c.source}/{c.query}" if c.error else c.text, c)
        return list(unique.values())

    async def _filter(
        self, run: Run, candidates: list[Candidate], cards: Sequence[EntityCard]
    ) -> list[Candidate]:
        """The relevant candidates (P5), ranked by relative score, lowest first; without
        the triple check they keep their order."""
        config = self.config
        if config.relevance_check:
            question_cards = [c for c in cards if c.source == "question"]
            lines = format_entities(question_cards, config.description_chars)
            entities = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, 1))
            block = f"Entities:\n{entities}" if lines else ""
            check = partial(self.runner.run, RELEVANCE, question=run.question, entities=block)
            verdicts = await _in_order(run, [partial(check, passage=c.text) for c in candidates])
            for candidate, verdict in zip(candidates, verdicts, strict=True):
                candidate.relevant = verdict
        relevant = [c for c in candidates if c.relevant]
        if config.triple_check and relevant:
            scores = await _in_order(
                run, [partial(self.check.score, c.text, how=config.how) for c in relevant]
            )
            for candidate, scored in zip(relevant, scores, strict=True):
                candidate.scored = scored
            relevant.sort(key=lambda c: c.scored.rank_key if c.scored else float("inf"))
        return relevant


async def _in_order(run: Run, calls: Sequence[Callable[[Transcript], Awaitable[T]]]) -> list[T]:
    """Run the calls at once, each into its own transcript, then record their calls in
    the run's transcript in order (readable whatever order the calls finish in)."""
    transcripts = [Transcript() for _ in calls]
    values = await asyncio.gather(
        *(call(transcript) for call, transcript in zip(calls, transcripts, strict=True))
    )
    for transcript in transcripts:
        run.transcript.calls.extend(transcript.calls)
    return list(values)


async def _written(runner: TaskRunner, transcript: Transcript, **values: str) -> tuple[str, str]:
    """One reference (P2) and "", or "" and why the knowledge model failed: one
    failing model (an endpoint down, unusable replies) does not end the question."""
    try:
        return await runner.run(REFERENCE, transcript, **values), ""
    except (LLMError, TaskFailed) as exc:
        return "", f"{type(exc).__name__}: {exc}"
