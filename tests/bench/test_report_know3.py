"""The benchmark page's Know3-RAG parts: turn shares, --verify, calibration."""

from quillian.bench.report_kg import know3_section
from quillian.bench.report_qa import turns_and_verification


def test_turn_shares_and_verification_rows():
    methods = {
        "know3-rag": {
            "answered_at_turn": {"0": 0.25, "1": 0.75},
            "reference_filter": {
                "gold_passage": {"candidates": 4, "relevant_share": 0.5, "kept_share": 0.25},
                "written": {"candidates": 2, "relevant_share": 1.0, "kept_share": 1.0},
            },
            "verification": {
                "verified": {"questions": 1, "em": 0.0, "f1": 0.5, "accuracy": 0.0},
                "not_verified": {"questions": 3, "em": 0.0, "f1": 0.0, "accuracy": 0.0},
                "unscorable": 2,
            },
        },
        "no-retrieval": {},
    }
    lines = turns_and_verification(methods)
    assert "know3-rag: answers output at each turn: t=0: 25%, t=1: 75%." in lines
    assert (
        "know3-rag: candidate references passed by the relevance check / kept by the filter: "
        "gold passages 50% / 25% of 4; written references 100% / 100% of 2."
    ) in lines
    assert "| know3-rag | 1 | 0.500 | 0.000 | 3 | 0.000 | 0.000 | 2 |" in lines
    assert turns_and_verification({"no-retrieval": {}}) == []


def test_the_calibration_section():
    kg = {
        "know3_calibration": {
            "questions": 4,
            "target_share_at_turn_0": 0.3,
            "unscorable_at_turn_0": 2,
            "chosen": {
                "theta0": 0.3277,
                "thresholds": [11.28, 14.18],
                "answered_at_turn": {"0": 0.25, "1": 0.75},
                "reference_filter": {
                    "gold_passage": {"candidates": 4, "relevant_share": 0.5, "kept_share": 0.25},
                    "written": {"candidates": 2, "relevant_share": 1.0, "kept_share": 1.0},
                },
            },
            "_command": "quillian know3 calibrate ...",
        },
    }
    text = "\n".join(know3_section(kg))
    assert "chosen θ0 = 0.3277" in text and "t=0: 25%, t=1: 75%" in text
    assert know3_section({}) == []
