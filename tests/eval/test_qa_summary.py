"""bench qa summaries: recall of the final ranking and KAG's graph shares, by hand."""

from quillian.eval.qa import summarize


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
    s = summarize(rows)
    # retrieval steps: graph-exact, chunks, hybrid -> 1 of 3 answered from the graph, 2 hit it
    assert s["graph_answered_share"] == round(1 / 3, 4)
    assert s["graph_hit_share"] == round(2 / 3, 4)
    assert s["failed_step_share"] == 0.2  # of the 5 steps run: the repeat did not run
    assert s["repeated_step_share"] == round(1 / 6, 4)
    assert s["rounds_per_question"] == 1.5
    assert (s["recall@2"], s["recall@5"]) == (0.25, 0.75)


def test_methods_without_kag_steps_report_no_graph_share() -> None:
    s = summarize([row([{"kind": "retrieval"}], None, None)])
    assert "graph_answered_share" not in s and s["recall@2"] is None
