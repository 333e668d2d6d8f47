"""KAGS's judged metrics (faithfulness, answer relevance) and their place in the QA
evaluation, with a scripted judge and the keyword embedder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.generation.evidence import Evidence
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.structured import ParseError
from quillian.components.llm.tasks import TaskRunner, Transcript
from quillian.components.prompts import default_registry
from quillian.components.retrieval.base import ScoredPassage, UsedRelation
from quillian.eval.datasets import Question
from quillian.eval.judge import Judge, evidence_text, parse_statements, parse_verdict
from quillian.eval.qa import evaluate
from quillian.methods.base import AnswerResult

STATEMENTS = "Statement: Babbage was born in London.\nStatement 2: Babbage was a poet."
VERDICTS = ["The context says so. Verdict: Yes", "Nothing about poetry.\nVerdict: No"]


def judge(**routes: object) -> tuple[Judge, ScriptedChatModel]:
    names = {k: "kags." + k.removeprefix("kags_").replace("_", "-") for k in routes}
    model = ScriptedChatModel({names[k]: v for k, v in routes.items()})  # type: ignore[misc]
    return Judge(TaskRunner(model, default_registry()), KeywordEmbedder()), model


def evidence() -> Evidence:
    found = Evidence()
    found.add_passages([ScoredPassage(0, "c0", 1.0, "Babbage", "Babbage was born in London.")])
    found.add_relations(
        [UsedRelation(0, "Babbage", "born in", "London", "", 0.9, "Babbage was born in London.")]
    )
    return found


def test_parsers_read_statements_and_verdicts_strictly() -> None:
    assert parse_statements(STATEMENTS) == ["Babbage was born in London.", "Babbage was a poet."]
    assert [parse_verdict(v) for v in VERDICTS] == [True, False]
    assert parse_verdict("Verdict: **Incorrect**. Verdict: Yes") is False  # the first counts
    assert parse_verdict("verdict: correct") is True
    for parse, raw in ((parse_statements, "London."), (parse_verdict, "Yes, supported.")):
        with pytest.raises(ParseError):
            parse(raw)


def test_faithfulness_is_the_share_of_supported_statements() -> None:
    j, model = judge(kags_judge_statements=STATEMENTS, kags_judge_verdict=VERDICTS)
    transcript = Transcript()
    score = asyncio.run(j.faithfulness("Who?", "London; a poet", evidence(), transcript))
    assert score == 0.5
    first, second = (call.messages[-1].content for call in model.calls[1:])
    assert first.endswith("Statement: Babbage was born in London.")
    assert second.endswith("Statement: Babbage was a poet.")
    assert "Babbage born in London (Babbage was born in London.)" in first
    assert len(transcript.calls) == 3 and transcript.parse_failures == 0


def test_an_unusable_verdict_leaves_the_metric_unscored_and_recorded() -> None:
    j, _ = judge(kags_judge_statements=STATEMENTS, kags_judge_verdict="Verdicts for 2 statements.")
    transcript = Transcript()
    assert asyncio.run(j.faithfulness("Who?", "x", evidence(), transcript)) is None
    assert transcript.parse_failures == 2  # the reply and its repair
    assert "no 'Verdict: Yes'" in transcript.calls[-1].error
    assert transcript.calls[-1].raw == "Verdicts for 2 statements."


def test_answer_relevance_compares_the_regenerated_question() -> None:
    j, _ = judge(kags_judge_question="Where was Babbage born?")
    score = asyncio.run(j.answer_relevance("where was babbage born", "London", Transcript()))
    assert score == pytest.approx(1.0)  # the same words: {babbage, born, where}
    j, _ = judge(kags_judge_question="Which city is the capital of England?")
    score = asyncio.run(j.answer_relevance("where was babbage born", "London", Transcript()))
    assert score == pytest.approx(0.0)
    # an empty answer scores 0 without asking
    assert asyncio.run(j.answer_relevance("q", "  ", Transcript())) == 0.0
    assert asyncio.run(j.faithfulness("q", "", Evidence(), Transcript())) == 0.0
    assert evidence_text(Evidence()) == "(no evidence)"


class Fixed:
    """A pipeline answering every question with the same text from fixed evidence."""

    name = "fixed"

    def __init__(self, answer: str) -> None:
        self.text = answer

    async def answer(self, question: str) -> AnswerResult:
        return AnswerResult(self.name, question, self.text, evidence(), Transcript(), [], 0.0)


def test_evaluate_scores_selected_metrics_and_records_the_judge(tmp_path: Path) -> None:
    j, _ = judge(
        kags_judge_statements=STATEMENTS,
        kags_judge_verdict=VERDICTS,
        kags_judge_question="Where was Babbage born?",
    )
    questions = [Question("1", "where was babbage born", frozenset(), ("London",))]
    metrics = ["token_containment", "fuzzy_containment", "faithfulness", "answer_relevance"]
    report = asyncio.run(
        evaluate(
            Fixed("London London"),
            questions,
            tmp_path,
            dataset="hotpotqa",
            manifest={},
            metrics=metrics,
            judge=j,
        )
    )
    [row] = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    assert row["token_containment"] == 1.0 and row["fuzzy_containment"] == 1.0
    assert row["faithfulness"] == 0.5 and row["answer_relevance"] == 1.0
    assert len(row["judge"]["calls"]) == 4 and row["llm_calls"] == 0
    summary = report.summary
    assert summary["faithfulness"] == 0.5 and summary["faithfulness_unscored"] == 0
    assert summary["answer_relevance"] == 1.0 and summary["judge_parse_failures"] == 0
    # without a judge, the judged metrics are refused; unselected ones are not scored
    with pytest.raises(ValueError, match="need a judge"):
        asyncio.run(
            evaluate(
                Fixed("x"), questions, tmp_path, dataset="hotpotqa", manifest={}, metrics=metrics
            )
        )
    plain = asyncio.run(
        evaluate(Fixed("x"), questions, tmp_path, dataset="hotpotqa", manifest={}, metrics=())
    )
    assert "token_containment" not in plain.summary and "em" in plain.summary
