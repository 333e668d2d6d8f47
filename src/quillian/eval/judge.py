"""KAGS's LLM-judged answer metrics (supplement section 3), for any method's answers.

* **faithfulness** (eq. 8): the judge splits the answer into statements
  (``kags.judge-statements``), then judges each against the method's evidence, one
  call per statement (``kags.judge-verdict``); the score is the share judged
  supported. An empty answer scores 0, as in the authors' code.
* **answer relevance** (eq. 9, which the code follows; the prose speaks of answers):
  the judge writes the question the answer answers (``kags.judge-question``); the
  score is the cosine of its embedding with the original question's. An empty answer
  scores 0.

Parsing is strict: a verdict reply must hold a ``Verdict: Yes|No`` (or
``Correct|Incorrect``); the first one counts. A reply still unusable after the runner's
repair attempt leaves that metric ``None`` for the question (left out of the mean, counted in
the summary), never a guess; every judge call and its raw text is kept in the row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quillian.components.embedding.base import Embedder
from quillian.components.generation.evidence import Evidence
from quillian.components.generation.outputs import parse_line
from quillian.components.llm.base import Decoding
from quillian.components.llm.structured import ParseError
from quillian.components.llm.tasks import Task, TaskFailed, TaskRunner, Transcript

__all__ = [
    "JUDGED_METRICS",
    "QUESTION_TASK",
    "STATEMENTS_TASK",
    "VERDICT_TASK",
    "Judge",
    "evidence_text",
    "parse_statements",
    "parse_verdict",
]

#: The metrics a judge computes.
JUDGED_METRICS = ("faithfulness", "answer_relevance")
#: Characters of evidence shown to the verdict judge.
EVIDENCE_CHARS = 6000

_STATEMENT = re.compile(r"^\s*(?:[-*\d.)\s]*)statement\s*\d*\s*[:.-]\s*(.+?)\s*$", re.IGNORECASE)
_VERDICT = re.compile(r"verdict\s*:\s*\**\s*(yes|no|correct|incorrect)\b", re.IGNORECASE)


def parse_statements(raw: str, prompt: str = "") -> list[str]:
    """The ``Statement: ...`` lines of a reply; a reply with none raises."""
    found = [m.group(1) for line in raw.splitlines() if (m := _STATEMENT.match(line))]
    if not found:
        raise ParseError("no 'Statement:' line", raw, prompt)
    return list(dict.fromkeys(found))


def parse_verdict(raw: str, prompt: str = "") -> bool:
    """The first ``Verdict: Yes|No|Correct|Incorrect`` of a reply; none raises."""
    found = _VERDICT.search(raw)
    if found is None:
        raise ParseError("no 'Verdict: Yes' or 'Verdict: No' found", raw, prompt)
    return found.group(1).lower() in ("yes", "correct")


STATEMENTS_TASK: Task[list[str]] = Task(
    "kags.judge-statements", parse_statements, Decoding(max_tokens=256)
)
VERDICT_TASK: Task[bool] = Task("kags.judge-verdict", parse_verdict, Decoding(max_tokens=192))
QUESTION_TASK: Task[str] = Task("kags.judge-question", parse_line, Decoding(max_tokens=64))


def evidence_text(evidence: Evidence, limit: int = EVIDENCE_CHARS) -> str:
    """What a method's answer rests on, as the verdict judge reads it: the relations
    (with their source sentences), then the passages."""
    lines = []
    for r in evidence.relations:
        line = f"- {r.subject} {r.predicate} {r.object}"
        lines.append(f"{line} ({r.sentence})" if r.sentence else line)
    lines += [f"{p.title}: {' '.join(p.text.split())}" for p in evidence.passages]
    lines += [f"- {t.subject_name} {t.relation} {t.object_name}" for t in evidence.kg_triples]
    return "\n".join(lines)[:limit] or "(no evidence)"


@dataclass
class Judge:
    """Computes the judged metrics with its own model (through ``runner``) and the
    embedder of the answer-relevance cosine."""

    runner: TaskRunner
    embedder: Embedder

    async def faithfulness(
        self, question: str, answer: str, evidence: Evidence, transcript: Transcript
    ) -> float | None:
        if not answer.strip():
            return 0.0
        try:
            statements = await self.runner.run(
                STATEMENTS_TASK, transcript, question=question, answer=answer
            )
            context = evidence_text(evidence)
            verdicts = [
                await self.runner.run(VERDICT_TASK, transcript, context=context, statement=s)
                for s in statements
            ]
        except TaskFailed:
            return None
        return sum(verdicts) / len(statements)

    async def answer_relevance(
        self, question: str, answer: str, transcript: Transcript
    ) -> float | None:
        if not answer.strip():
            return 0.0
        try:
            generated = await self.runner.run(QUESTION_TASK, transcript, answer=answer)
        except TaskFailed:
            return None
        vectors = self.embedder.embed([question, generated])
        return float(np.clip(vectors[0] @ vectors[1], -1.0, 1.0))


def judged_means(values: Sequence[float | None]) -> tuple[float | None, int]:
    """The mean of the scored values and how many could not be scored."""
    scored = [v for v in values if v is not None]
    mean = round(sum(scored) / len(scored), 4) if scored else None
    return mean, len(values) - len(scored)
