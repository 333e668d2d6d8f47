"""``evaluate`` runs questions concurrently and reports the run's own wall time beside
each question's seconds (which, under concurrency, include waiting for the others)."""

import asyncio
import json

from quillian.components.generation.evidence import Evidence
from quillian.components.llm.tasks import Transcript
from quillian.eval.datasets import Question
from quillian.eval.qa import evaluate
from quillian.methods.base import AnswerResult


class Gathered:
    """Answers only once ``expected`` questions are in flight at the same time."""

    name = "gathered"

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.started = 0
        self.all_in = asyncio.Event()

    async def answer(self, question: str) -> AnswerResult:
        self.started += 1
        if self.started == self.expected:
            self.all_in.set()
        await asyncio.wait_for(self.all_in.wait(), timeout=30)
        return AnswerResult(self.name, question, "London", Evidence(), Transcript(), [], 0.5)


def test_questions_run_together_and_the_summary_has_the_run_time(tmp_path):
    questions = [Question(str(i), f"q{i}", frozenset(), ("London",)) for i in range(4)]
    report = asyncio.run(
        evaluate(Gathered(4), questions, tmp_path, dataset="hotpotqa", manifest={}, concurrency=4)
    )
    summary = report.summary
    assert summary["questions"] == 4 and summary["em"] == 1.0
    assert summary["concurrency"] == 4 and summary["seconds_per_question"] == 0.5
    assert summary["wall_seconds"] >= 0 and summary["questions_per_minute"] > 0
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["wall_seconds"] == summary["wall_seconds"]
    lines = [json.loads(line)["id"] for line in (tmp_path / "predictions.jsonl").open()]
    assert lines == ["0", "1", "2", "3"]  # question order, whatever finished first
