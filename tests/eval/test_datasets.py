"""Question files of the three data sets: the kind of each question."""

import json
from pathlib import Path

from quillian.eval.datasets import load_questions


def test_each_data_set_says_the_kind_of_its_questions(tmp_path: Path) -> None:
    hotpot = [
        {"_id": "a", "question": "Q?", "answer": "x", "type": "comparison",
         "supporting_facts": [["Ada", 0]]},
        {"_id": "b", "question": "Q?", "answer": "y", "supporting_facts": [["Ada", 0]]},
    ]  # fmt: skip
    (tmp_path / "h.json").write_text(json.dumps(hotpot))
    assert [q.kind for q in load_questions("hotpotqa", tmp_path / "h.json")] == ["comparison", ""]
    musique = [{"id": i, "question": "Q?", "paragraphs": []} for i in ("2hop__7", "11")]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in musique))
    assert [q.kind for q in load_questions("musique", tmp_path / "m.jsonl")] == ["2hop", ""]
    two = {"question": "Q?", "supporting_titles": ["Ada"], "type": "bridge_comparison"}
    (tmp_path / "w.jsonl").write_text(json.dumps(two))
    assert [q.kind for q in load_questions("2wiki", tmp_path / "w.jsonl")] == ["bridge_comparison"]


def test_musique_keeps_each_hops_gold_answer(tmp_path: Path) -> None:
    record = {
        "id": "2hop__1_2",
        "question": "Who was the first president of the publisher of the journal?",
        "paragraphs": [],
        "answer": "G. Stanley Hall",
        "answer_aliases": ["Stanley Hall"],
        "question_decomposition": [
            {"question": "Who publishes the journal?", "answer": "APA"},
            {"question": "Who was the first president of #1 ?", "answer": "G. Stanley Hall"},
        ],
    }
    (tmp_path / "m.jsonl").write_text(json.dumps(record))
    (question,) = load_questions("musique", tmp_path / "m.jsonl")
    # the last hop answers the question, so the question's aliases are that hop's too
    assert question.hop_answers == (("APA",), ("G. Stanley Hall", "Stanley Hall"))
    assert question.answers == ("G. Stanley Hall", "Stanley Hall")
