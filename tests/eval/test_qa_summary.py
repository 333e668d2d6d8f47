"""bench qa summaries: recall of the final ranking, KAG's graph shares and Know3-RAG's
reference filter, by hand."""

import asyncio
import json

from quillian.bench.qa import summary_table
from quillian.components.generation.evidence import Evidence
from quillian.components.llm.tasks import Transcript
from quillian.components.retrieval.base import ScoredPassage
from quillian.eval.datasets import Question, passage_key
from quillian.eval.qa import evaluate, summarize
from quillian.methods.base import AnswerResult
from quillian.methods.steps import ReferenceFilter


def row(steps, recall2, recall5):
    return {
        "em": 1.0,
        "f1": 1.0,
        "accuracy": 1.0,
        "evidence_recall": 1.0,
        "recall@2": recall2,
        "recall@5": recall5,
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "seconds": 1.0,
        "calls": [],
        "error": "",
        "steps": steps,
        "evidence": {"passages": []},
    }


def step(layer, executor="retrieval", hit=False):
    return {"kind": "kag-step", "executor": executor, "layer": layer, "graph_hit": hit}


def test_graph_shares_and_rounds() -> None:
    rows = [
        row(
            [
                step("graph-exact", hit=True),
                step("chunks"),
                step("math", "math"),
                {"kind": "kag-reflection", "round": 1},
            ],
            0.5,
            1.0,
        ),
        row(
            [
                step("hybrid", hit=True),
                step("failed", "math"),
                step("repeat", "repeat"),
                {"kind": "kag-reflection", "round": 1},
                {"kind": "kag-reflection", "round": 2},
            ],
            0.0,
            0.5,
        ),
    ]
    rows[0]["calls"] = [call("kag.plan@1", 80, 1.0, stopped=True), call("kag.judge@1", 3, 0.5)]
    rows[1]["calls"] = [call("kag.plan@1", 60, 1.0), call("kag.plan@1", 90, 1.0)]
    s = summarize(rows)
    # retrieval steps: graph-exact, chunks, hybrid -> 1 of 3 answered from the graph, 2 hit it
    assert s["graph_answered_share"] == round(1 / 3, 4)
    assert s["graph_hit_share"] == round(2 / 3, 4)
    assert s["failed_step_share"] == 0.2  # of the 5 steps run: the repeat did not run
    assert s["plan_cut_share"] == round(1 / 3, 4)  # one of three plans ended at a repeat
    assert s["repeated_step_share"] == round(1 / 6, 4)  # a run from before plans ended so
    assert s["rounds_per_question"] == 1.5
    assert (s["recall@2"], s["recall@5"]) == (0.25, 0.75)
    assert s["by_prompt"]["kag.plan@1"]["stopped"] == 1
    rows[1]["steps"] = [s for s in rows[1]["steps"] if s.get("layer") != "repeat"]
    assert "repeated_step_share" not in summarize(rows)  # none skipped: no such column


def test_steps_are_checked_against_the_gold_hop_answers_by_source() -> None:
    def answered(layer, answer):
        return {**step(layer, hit=layer != "chunks"), "answer": answer}

    first = row(
        [
            answered("graph-fuzzy", "Jennifer Callahan"),  # the wrong fact picked
            answered("hybrid", "It was the APA."),  # names hop 1's answer
            answered("chunks", "G. Stanley Hall was its first president."),
            answered("chunks", "I don't know."),
            {**step("math", "math"), "answer": "APA"},  # not a retrieval step
        ],
        1.0,
        1.0,
    )
    first["hop_answers"] = [["APA"], ["G. Stanley Hall", "Stanley Hall"]]
    unchecked = row([answered("graph-exact", "anything")], 1.0, 1.0)  # no gold hops
    s = summarize([first, unchecked])
    assert s["gold_hop_by_source"] == {
        "graph": {"steps": 1, "names_gold_hop": 0.0},
        "hybrid": {"steps": 1, "names_gold_hop": 1.0},
        "chunks": {"steps": 2, "names_gold_hop": 0.5},
    }
    assert (s["graph_gold_hop_share"], s["chunk_gold_hop_share"]) == (0.5, 0.5)
    assert "gold_hop_by_source" not in summarize([unchecked])


def test_methods_without_kag_steps_report_a_null_graph_share() -> None:
    s = summarize([row([{"kind": "retrieval"}], None, None)])
    assert s["graph_answered_share"] is None and s["recall@2"] is None
    assert "graph_hit_share" not in s and "rounds_per_question" not in s


def test_a_run_with_no_retrieval_steps_reports_null_step_shares() -> None:
    """KAG's CR preset plans no steps: its shares of steps are null, not 0.0."""
    cr = [row([{"kind": "retrieval"}, {"kind": "kag-reflection", "round": 1}], 1.0, 1.0)]
    s = summarize(cr)
    assert s["graph_answered_share"] is None and s["graph_hit_share"] is None
    assert s["failed_step_share"] is None and s["rounds_per_question"] == 1.0
    # only math steps: steps were run, none of them a retrieval
    maths = [row([step("math", "math"), {"kind": "kag-reflection", "round": 1}], 1.0, 1.0)]
    s = summarize(maths)
    assert s["graph_answered_share"] is None and s["failed_step_share"] == 0.0


def test_the_summary_table_leaves_a_null_share_blank() -> None:
    kag = summarize([row([step("graph-exact", hit=True)], 1.0, 1.0)])
    cr = summarize([row([{"kind": "kag-reflection", "round": 1}], 1.0, 1.0)])
    plain = summarize([row([{"kind": "retrieval"}], 1.0, 1.0)])
    table = summary_table({"methods": {"kag": kag, "kag-cr": cr, "vanilla-rag": plain}})
    header, _, *lines = table.splitlines()
    column = header.split(" | ").index("answered from graph")
    assert [line.split(" | ")[column] for line in lines] == ["100.0%", "", ""]
    assert json.loads(json.dumps(cr))["graph_answered_share"] is None  # null in the JSON


def call(prompt, tokens, seconds, **extra):
    return {
        "prompt": prompt,
        "completion_tokens": tokens,
        "seconds": seconds,
        "cached": False,
        **extra,
    }


def test_calls_are_counted_per_prompt() -> None:
    first, second = row([], 1.0, 1.0), row([], 1.0, 1.0)
    first["calls"] = [call("kag.plan@1", 512, 20.0, truncated=True), call("kag.judge@1", 3, 0.5)]
    second["calls"] = [call("kag.plan@1", 100, 4.0, error="no ActionN: lines found", raw="x")]
    by_prompt = summarize([first, second])["by_prompt"]
    assert list(by_prompt) == ["kag.judge@1", "kag.plan@1"]
    assert by_prompt["kag.plan@1"] == {
        "calls": 2,
        "parse_failures": 1,
        "truncated": 1,
        "stopped": 0,
        "completion_tokens": 612,
        "seconds": 24.0,
    }
    assert by_prompt["kag.judge@1"]["calls"] == 1 and summarize([row([], 0, 0)])["by_prompt"] == {}


class Filtered:
    """Answers with one reference filter over a written reference and two passages."""

    name = "filtered"

    async def answer(self, question: str) -> AnswerResult:
        def passage(title: str, relevant: bool, kept: bool) -> dict:
            return {
                "source": f"passage:{title}",
                "query": "corpus",
                "title": title,
                "text": f"{title}: About {title}.",
                "relevant": relevant,
                "score": None,
                "triples": [],
                "kept": kept,
            }

        written = {**passage("", True, True), "source": "model", "query": "raw", "text": "x"}
        del written["title"]
        failed = {**written, "error": "LLMError: down", "relevant": False, "kept": False}
        candidates = (
            written,
            failed,
            passage("Ada Lovelace", True, True),  # gold, kept
            passage("Charles Babbage", False, False),  # gold, refused by the check
            passage("London", True, False),  # not gold, passed, not kept
        )
        steps = [ReferenceFilter(turn=1, query=question, candidates=candidates, kept=2)]
        return AnswerResult(self.name, question, "x", Evidence(), Transcript(), steps, 0.1)


class Listed:
    """Answers each question with the passages listed for it, in that order (dual
    retrieval lists the question's own top 3 first, then the expanded query's)."""

    name = "listed"

    def __init__(self, passages: dict[str, list[tuple[str, str]]]) -> None:
        self.passages = passages

    async def answer(self, question: str) -> AnswerResult:
        found = [
            ScoredPassage(i, f"c{i}", 1.0, title, text)
            for i, (title, text) in enumerate(self.passages[question])
        ]
        return AnswerResult(self.name, question, "x", Evidence(found), Transcript(), [], 0.1)


def test_the_passages_in_front_of_the_model_and_their_recall_are_summarized(tmp_path) -> None:
    """Passages per question over every question; recall of the gold passages among them
    and among the first three (MuSiQue's keys: title and text) over those with gold."""
    a, b, x, y = (("A", "About a."), ("B", "About b."), ("X", "About x."), ("B", "Other b."))
    pipeline = Listed({"q1": [a, x, y, b], "q2": [x, a], "q3": [x, y, a]})
    gold = frozenset(passage_key("musique", *p) for p in (a, b))
    questions = [Question(q, q, g, ("x",)) for q, g in (("q1", gold), ("q2", gold))]
    questions.append(Question("q3", "q3", frozenset(), ("x",)))  # no gold passages
    report = asyncio.run(evaluate(pipeline, questions, tmp_path, dataset="musique", manifest={}))
    # q1: b comes fourth (y has b's title, not its text); q2: a among its two passages
    assert [r["recall@3"] for r in report.rows] == [0.5, 0.5, None]
    s = report.summary
    assert (s["passages_per_question"], s["evidence_recall"], s["recall@3"]) == (3.0, 0.75, 0.5)
    assert json.loads((tmp_path / "summary.json").read_text())["recall@3"] == 0.5


def test_reference_filter_shares_split_gold_passages_from_others(tmp_path) -> None:
    gold = frozenset(
        {passage_key("hotpotqa", "Ada Lovelace"), passage_key("hotpotqa", "Charles Babbage")}
    )
    questions = [Question("1", "Who?", gold, ("Ada",))]
    report = asyncio.run(evaluate(Filtered(), questions, tmp_path, dataset="hotpotqa", manifest={}))
    marks = [
        c.get("gold") for c in report.rows[0]["steps"][0]["candidates"]
    ]  # written references are never marked
    assert marks == [None, None, True, True, False]
    shares = report.summary["reference_filter"]
    assert shares["written"] == {"candidates": 1, "relevant_share": 1.0, "kept_share": 1.0}
    assert shares["gold_passage"] == {"candidates": 2, "relevant_share": 0.5, "kept_share": 0.5}
    assert shares["other_passage"] == {"candidates": 1, "relevant_share": 1.0, "kept_share": 0.0}


def test_reference_filter_passages_without_gold_stay_one_group(tmp_path) -> None:
    questions = [Question("1", "Who?", frozenset(), ("Ada",))]
    report = asyncio.run(evaluate(Filtered(), questions, tmp_path, dataset="hotpotqa", manifest={}))
    assert report.summary["reference_filter"]["passage"]["candidates"] == 3
    assert "gold_passage" not in report.summary["reference_filter"]


def test_answer_scores_average_only_the_questions_with_gold_answers() -> None:
    unanswered = {**row([], 1.0, 1.0), "em": None, "f1": None, "accuracy": None}
    wrong = {**row([], 0.0, 0.5), "em": 0.0, "f1": 0.5, "accuracy": 0.0}
    s = summarize([unanswered, wrong])
    assert (s["em"], s["f1"], s["accuracy"], s["answers_scored"]) == (0.0, 0.5, 0.0, 1)
    assert s["recall@5"] == 0.75  # the ranking is scored for both
    none = summarize([unanswered, {**unanswered, "kind": "bridge"}])
    assert (none["em"], none["f1"], none["accuracy"], none["answers_scored"]) == (
        None,
        None,
        None,
        0,
    )
    assert none["by_kind"]["bridge"] == {"questions": 1, "em": None, "f1": None, "accuracy": None}
