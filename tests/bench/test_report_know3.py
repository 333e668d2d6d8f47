"""The benchmark page's Know3-RAG parts: turn shares, --verify, calibration, scoring."""

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


def test_calibration_and_scoring_sections():
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
        "kge_scoring": {
            "entities": 4300000,
            "dim": 128,
            "queries": 30,
            "score_sp_ms": {"p50": 75.0, "p95": 80.0},
            "matrix_vector_ms": {"p50": 74.0, "p95": 79.0},
            "ratio_p50": 1.01,
            "batch": 8,
            "score_sp_batch_ms_per_query": {"p50": 25.0, "p95": 30.0},
            "threads": 2,
        },
        "kge_synthetic": {
            "entities": 4300000,
            "triples": 21000000,
            "examples": 42000000,
            "epoch_s": 678.9,
            "examples_per_s": 61869,
            "peak_rss_mb": 4961.8,
            "parameters_mb": 2100.4,
            "threads": 2,
            "settings": {"dim": 128, "negatives": 1024, "batch_size": 1024},
        },
    }
    text = "\n".join(know3_section(kg))
    assert "chosen θ0 = 0.3277" in text and "t=0: 25%, t=1: 75%" in text
    assert "4,300,000 entities" in text and "ratio 1.01" in text
    assert "`score_sp_batch` of 8 queries" in text and "p50 25.0 ms a query" in text
    assert "3.0x score_sp's throughput. 2 threads." in text
    assert "one epoch 678.9 s (61,869 examples/s), peak RSS 4,962 MB" in text
    assert know3_section({}) == []
    scan = {
        **kg["kge_scoring"],
        "blas_score_sp_ms": {"p50": 150.0, "p95": 160.0},
        "ratio_p50": 0.5,
        "blas_batch_ms_per_query": {"p50": 50.0, "p95": 55.0},
        "scan_threads": 2,
        "read_floor_ms": {"p50": 60.0, "p95": 70.0},
    }
    text = "\n".join(know3_section({"kge_scoring": scan}))
    assert "(the memory floor of any exact float32 scan on this machine): p50 60.0 ms" in text
    assert "score_sp takes 1.25x it." in text
    assert "score_sp (the row scan, 2 blocks) p50 75.0 ms" in text
    assert "as score_sp ran before, p50 150.0 ms (p95 160.0): ratio 0.5" in text
    assert "through BLAS 50.0 ms a query." in text
