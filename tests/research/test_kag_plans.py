"""The plan stop-rule benchmark on a scripted planner: both arms decode every
question, the stopped plan is the free one cut at its first repeat, and the counts
add up (the figures themselves come from the real model: docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import json

from kag_plans import run

LOOP = (
    "Step1: Who?\nAction1: Retrieval(s=s1:Person[Ada], p=p1:child, o=o1:Person)\n"
    "Step2: Born?\nAction2: Retrieval(s=o1, p=p2:born, o=o2:Date)\n"
    "Step3: Born?\nAction3: Retrieval(s=o1, p=p3:born, o=o3:Date)\n"
)


def test_both_arms_run_on_every_question_and_the_plans_agree(tmp_path) -> None:
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps({"kag.plan": LOOP}))
    questions = tmp_path / "questions.json"
    records = [
        {"_id": f"q{i}", "question": f"When was Ada's child {i} born?", "supporting_facts": []}
        for i in range(3)
    ]
    questions.write_text(json.dumps(records))
    result = asyncio.run(run(f"scripted:{routes}", "hotpotqa", questions, limit=2))
    assert result["questions"] == 2 and len(result["per_question"]) == 2
    assert result["free_plans_repeating"] == 2 and result["same_plan"] == 2
    assert set(result["tokens"]) == {"free", "stopped", "ratio", "ratio_ci"}
