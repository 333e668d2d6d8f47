"""The vector-index bench: one JSON object, the sketched and the scanning exact search
timed side by side and checked to return the same ids."""

from __future__ import annotations

import json

import pytest

import vectors as bench
from quillian.stores.embedded import vectors as vectors_module


def test_the_bench_times_the_sketch_against_the_scan(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_module, "SKETCH_MIN_ROWS", 100)  # 400 rows get a sketch
    bench.main(["--n", "400", "--dim", "16", "--queries", "12", "--k", "5", "--ef-search", "16"])
    out = json.loads(capsys.readouterr().out)
    for dtype in ("exact_float32", "exact_float16", "exact_int8"):
        figures = out[dtype]
        assert figures["recall_at_5"] >= (0.9 if dtype == "exact_int8" else 0.99)
        scan = figures["scan"]
        assert scan["same_ids"] is True
        assert scan["p50_ms"] > 0 and scan["sketched_p50_ms"] > 0
        assert scan["speedup_p50"] == pytest.approx(
            scan["p50_ms"] / scan["sketched_p50_ms"], rel=0.02
        )
        assert scan["sketch_build_s"] >= 0
    assert set(out["faiss_hnsw"]["by_ef_search"]) == {"16"}
