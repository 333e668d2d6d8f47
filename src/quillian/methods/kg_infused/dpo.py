"""Preference data for KG-guided knowledge augmentation (KG-Infused RAG section 3.6,
Appendix F).

For each input of the knowledge-augmentation step (Table 17: the question, the passage
note and the subgraph summary) the generator writes six candidates, one per
(temperature, top-p) of :data:`DPO_DECODINGS`; a judge (Table 18; GPT-4o-mini in the
paper) names the best and the worst. Ambiguous judgements are filtered, as the paper
does, and counted in :class:`DPOStats`: a tie (``best_id == worst_id``, Table 18 rule
4), a best and worst whose texts are identical, and a judgement still unusable after
the repair attempt. The paper builds its inputs from 2WikiMultiHopQA training questions
after one and after two activation rounds (D_KA^1 and D_KA^2, Table 20): run
:func:`ka_inputs` with ``rounds=1`` and ``rounds=2`` pipelines and pool the inputs.

Rows are written in TRL's conversational preference format, which ``DPOTrainer``
accepts as is and renders with the model's chat template::

    {"prompt": [{"role": "user", "content": "<Table 17 rendered>"}],
     "chosen": [{"role": "assistant", "content": "<best output>"}],
     "rejected": [{"role": "assistant", "content": "<worst output>"}]}
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quillian.components.generation.kg_outputs import (
    Judgement,
    parse_enhanced_passage,
    parse_judgement,
)
from quillian.components.llm.base import ChatMessage, Decoding
from quillian.components.llm.tasks import Task, TaskFailed, TaskRunner, Transcript
from quillian.errors import ConfigError
from quillian.methods.base import Run
from quillian.methods.kg_infused.pipeline import AUGMENT_KNOWLEDGE, KGInfusedRAG

__all__ = [
    "DPO_DECODINGS",
    "DPOStats",
    "KAInput",
    "PreferencePair",
    "PreferenceSampler",
    "collect_preferences",
    "ka_inputs",
    "write_dpo_jsonl",
]

log = logging.getLogger(__name__)

#: Appendix F: the six (temperature, top-p) candidates are sampled with.
DPO_DECODINGS: tuple[tuple[float, float], ...] = (
    (0.0, 1.0),
    (0.3, 0.95),
    (0.5, 0.9),
    (0.7, 0.9),
    (0.9, 0.8),
    (1.0, 0.7),
)

JUDGE_DECODING = Decoding(max_tokens=64)


@dataclass(frozen=True)
class KAInput:
    """One input of the knowledge-augmentation step (Table 17's variables)."""

    question: str
    passage: str
    triples_summary: str

    def values(self) -> dict[str, str]:
        return {
            "question": self.question,
            "passage": self.passage,
            "triples_summary": self.triples_summary,
        }


@dataclass(frozen=True)
class PreferencePair:
    """A judged input: the rendered prompt, the candidates and the judge's choice."""

    input: KAInput
    prompt: tuple[ChatMessage, ...]
    candidates: tuple[str, ...]
    best_id: int
    worst_id: int

    @property
    def chosen(self) -> str:
        return self.candidates[self.best_id]

    @property
    def rejected(self) -> str:
        return self.candidates[self.worst_id]

    def row(self) -> dict[str, Any]:
        """The row in TRL's conversational preference format."""
        return {
            "prompt": [{"role": m.role, "content": m.content} for m in self.prompt],
            "chosen": [{"role": "assistant", "content": self.chosen}],
            "rejected": [{"role": "assistant", "content": self.rejected}],
        }


@dataclass
class DPOStats:
    """What became of the inputs: pairs kept, and why the others were dropped."""

    inputs: int = 0
    pairs: int = 0
    ties: int = 0
    identical: int = 0
    unparsable: int = 0
    generation_failed: int = 0
    transcript: Transcript = field(default_factory=Transcript)

    def as_dict(self) -> dict[str, Any]:
        usage = self.transcript.usage
        return {
            "inputs": self.inputs,
            "pairs": self.pairs,
            "ties": self.ties,
            "identical": self.identical,
            "unparsable": self.unparsable,
            "generation_failed": self.generation_failed,
            "llm_calls": len(self.transcript.calls),
            "parse_failures": self.transcript.parse_failures,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        }


def _outputs(candidates: Sequence[str]) -> str:
    """Table 18's ``outputs``: a JSON array of ``{"_id", "output"}`` objects."""
    return json.dumps(
        [{"_id": i, "output": c} for i, c in enumerate(candidates)], ensure_ascii=False, indent=1
    )


class PreferenceSampler:
    """Samples and judges knowledge-augmentation outputs. ``judge`` defaults to the
    generator's runner (the paper uses GPT-4o-mini for both)."""

    def __init__(
        self,
        generator: TaskRunner,
        judge: TaskRunner | None = None,
        *,
        decodings: Sequence[tuple[float, float]] = DPO_DECODINGS,
        max_tokens: int = AUGMENT_KNOWLEDGE.decoding.max_tokens,
    ) -> None:
        if len(decodings) < 2:
            raise ConfigError(f"at least two decodings are needed, got {len(decodings)}")
        self.generator = generator
        self.judge_runner = judge or generator
        self.tasks = [
            Task(AUGMENT_KNOWLEDGE.prompt, parse_enhanced_passage, Decoding(t, p, max_tokens))
            for t, p in decodings
        ]

    async def candidates(self, item: KAInput, transcript: Transcript) -> list[str]:
        """One output per decoding, in order (raises TaskFailed on an unusable one)."""
        return [await self.generator.run(task, transcript, **item.values()) for task in self.tasks]

    async def judge(
        self, item: KAInput, candidates: Sequence[str], transcript: Transcript
    ) -> Judgement:
        name = "kg-infused.dpo-judge"
        parse = functools.partial(parse_judgement, n_outputs=len(candidates), prompt=name)
        return await self.judge_runner.run(
            Task(name, parse, JUDGE_DECODING),
            transcript,
            outputs=_outputs(candidates),
            **item.values(),
        )

    async def pair(self, item: KAInput, stats: DPOStats) -> PreferencePair | None:
        """The judged pair for ``item``, or None (counted in ``stats``) when filtered."""
        stats.inputs += 1
        try:
            candidates = await self.candidates(item, stats.transcript)
        except TaskFailed as exc:
            log.warning("knowledge augmentation output unusable, input dropped: %s", exc)
            stats.generation_failed += 1
            return None
        try:
            verdict = await self.judge(item, candidates, stats.transcript)
        except TaskFailed:
            stats.unparsable += 1
            return None
        if verdict.is_tie:
            stats.ties += 1
            return None
        if candidates[verdict.best_id].strip() == candidates[verdict.worst_id].strip():
            stats.identical += 1
            return None
        stats.pairs += 1
        prompt = self.generator.prompts.get(AUGMENT_KNOWLEDGE.prompt).render(**item.values())
        return PreferencePair(
            item, tuple(prompt), tuple(candidates), verdict.best_id, verdict.worst_id
        )

    async def collect(
        self, items: Iterable[KAInput], *, concurrency: int = 1
    ) -> tuple[list[PreferencePair], DPOStats]:
        """Pairs for every input that survives the filters, in input order."""
        if concurrency <= 0:
            raise ConfigError(f"concurrency must be greater than 0, got {concurrency}")
        stats = DPOStats()
        limit = asyncio.Semaphore(concurrency)

        async def one(item: KAInput) -> PreferencePair | None:
            async with limit:
                return await self.pair(item, stats)

        found = await asyncio.gather(*(one(item) for item in items))
        return [p for p in found if p is not None], stats


async def ka_inputs(pipeline: KGInfusedRAG, questions: Iterable[str]) -> list[KAInput]:
    """The knowledge-augmentation inputs the pipeline reaches for ``questions`` (a
    question whose earlier steps fail is skipped and logged)."""
    if not pipeline.config.uses_kg:
        raise ConfigError("the pipeline reads no KG (no query expansion, no augmentation)")
    out: list[KAInput] = []
    for question in questions:
        run = Run(question)
        try:
            fact = await pipeline.prepare(run)
        except TaskFailed as exc:
            log.warning("question skipped, its pipeline failed: %s", exc)
            continue
        out.append(KAInput(question, fact.note, fact.summary))
    return out


async def collect_preferences(
    pipelines: Sequence[KGInfusedRAG],
    questions: Sequence[str],
    generator: TaskRunner,
    judge: TaskRunner | None = None,
) -> tuple[list[PreferencePair], DPOStats]:
    """Preference pairs from the knowledge-augmentation inputs every pipeline reaches
    (one pipeline per number of activation rounds, pooled as the paper pools D_KA^1 and
    D_KA^2), six decodings each, judged by ``judge`` (default: the generator)."""
    items: list[KAInput] = []
    for pipeline in pipelines:
        items += await ka_inputs(pipeline, questions)
    return await PreferenceSampler(generator, judge).collect(items)


def write_dpo_jsonl(pairs: Iterable[PreferencePair], path: str | Path) -> int:
    """Write one TRL preference row per pair; returns the number of rows."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(pair.row(), ensure_ascii=False) + "\n")
            n += 1
    return n
