"""The KG-embedding check of a text, shared by Know3-RAG and by ``--verify``.

A text's entity mentions are linked, its triples extracted (prompt P4), each triple
linked and scored (eq. 2), and the scores aggregated (eq. 1, or the code's mean):
:class:`KGECheck`. :func:`verify_answer` applies it to any method's answer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from quillian.components.concurrency import Offload, to_thread
from quillian.components.kge.confidence import Aggregation
from quillian.components.llm.tasks import TaskRunner, Transcript
from quillian.methods.know3.knowledge import Know3Knowledge, TextScore
from quillian.methods.know3.tasks import TRIPLES
from quillian.methods.steps import ConfidenceCheck

__all__ = ["KGECheck", "Verification", "verify_answer"]


class KGECheck:
    """Scores texts against a KG and its KG-embedding model."""

    def __init__(
        self, runner: TaskRunner, knowledge: Know3Knowledge, *, offload: Offload = to_thread
    ) -> None:
        self.runner = runner
        self.knowledge = knowledge
        self.offload = offload

    async def score(self, text: str, transcript: Transcript, how: Aggregation) -> TextScore:
        """Link, extract (P4), link the triples and score them."""
        mentions = await self.offload(self.knowledge.mentions, text)
        names = ", ".join(dict.fromkeys(m.text for m in mentions))
        extracted = await self.runner.run(TRIPLES, transcript, text=text, entities=names)
        scored = await self.offload(self.knowledge.score_text, extracted.triples, mentions, how)
        return replace(scored, dropped=extracted.dropped, parse_notes=extracted.notes)

    @staticmethod
    def step(turn: int, scored: TextScore, threshold: float) -> ConfidenceCheck:
        """The check as a step; accepted when scored and below ``threshold``."""
        accepted = scored.score is not None and scored.score < threshold
        return ConfidenceCheck(
            turn=turn,
            score=None if scored.score is None else round(scored.score, 4),
            threshold=round(threshold, 4),
            accepted=accepted,
            triples=tuple(t.as_dict() for t in scored.triples),
            entities=scored.mentions,
            dropped=scored.dropped,
            parse_notes=scored.parse_notes,
        )


@dataclass(frozen=True)
class Verification:
    """The KGE verdict on one answer."""

    check: ConfidenceCheck
    transcript: Transcript

    @property
    def verified(self) -> bool:
        return self.check.accepted

    def as_dict(self) -> dict[str, object]:
        usage = self.transcript.usage
        return {
            **self.check.as_dict(),
            "verified": self.verified,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "parse_failures": self.transcript.parse_failures,
        }


async def verify_answer(
    check: KGECheck,
    question: str,
    answer: str,
    *,
    threshold: float,
    how: Aggregation = "mean",
) -> Verification:
    """Score ``answer`` to ``question`` (read as the statement "question answer") and
    judge it against ``threshold``, as Know3-RAG judges its own turn-0 answers."""
    transcript = Transcript()
    text = f"Question: {question}\nAnswer: {answer}"
    scored = await check.score(text, transcript, how)
    return Verification(KGECheck.step(0, scored, threshold), transcript)
