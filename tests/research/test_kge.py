"""The link-prediction benchmark on a tiny data set written in PyKEEN's file format."""

from __future__ import annotations

import json

import pytest

from kge import PRESETS, load_splits, main, run, run_scoring, settings_for
from quillian.components.kge.config import ComplExConfig
from quillian.errors import InputError


def write_dataset(directory, ring):
    rows = [f"e{h}\tr{r}\te{t}\n" for h, r, t in ring.as_array().tolist()]
    parts = {"train": rows[::3] + rows[1::3], "valid": rows[2::6], "test": rows[5::6]}
    for split, lines in parts.items():
        (directory / f"{split}.txt").write_text("".join(lines), encoding="utf-8")


def test_splits_share_one_numbering(ring, tmp_path):
    write_dataset(tmp_path, ring)
    splits = load_splits(tmp_path)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (48, 12, 12)
    assert splits.train.n_entities == splits.test.n_entities == len(splits.entities) == 24
    assert splits.relations == ("r0", "r1", "r2")


def test_run_reports_test_metrics_and_the_epochs_chosen_on_valid(ring, tmp_path):
    write_dataset(tmp_path, ring)
    config = ComplExConfig(dim=16, batch_size=16, epochs=10, eval_every=5, init_scale=0.1)
    result = run(tmp_path, config)
    for key in ("mrr", "hits@1", "hits@3", "hits@10", "train_s", "epochs", "valid_mrr"):
        assert key in result
    assert 0 < result["mrr"] <= 1 and result["epochs"] in (5, 10)
    assert result["settings"]["dim"] == 16 and result["triples"]["test"] == 12


def test_main_prints_one_json_object(ring, tmp_path, capsys):
    write_dataset(tmp_path, ring)
    main(["--data", str(tmp_path), "--dim", "8", "--epochs", "2", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["settings"]["epochs"] == 2 and result["threads"] == 1


def test_scoring_times_single_and_batched_queries_and_the_int8_top_tails():
    result = run_scoring(3000, dim=16, queries=3, batch=2)
    assert result["entities"] == 3000 and result["batch"] == 2
    for key in (
        "score_sp_ms",
        "read_floor_ms",
        "blas_score_sp_ms",
        "matrix_vector_ms",
        "score_sp_batch_ms_per_query",
        "blas_batch_ms_per_query",
        "top_tails_float32_ms",
        "sorted_top_tails_ms",
    ):
        assert set(result[key]) == {"p50", "p95"} and result[key]["p50"] >= 0
    assert result["int8_top10_exact_share"] == 1.0 and result["threads"] >= 1
    assert result["scan_threads"] >= 1


def test_presets_apply_by_folder_name_under_the_flags(tmp_path):
    assert settings_for(tmp_path / "kinships", {}).dim == PRESETS["kinships"]["dim"]
    assert settings_for(tmp_path / "kinships", {"dim": 64}).dim == 64
    assert settings_for(tmp_path / "other", {}) == ComplExConfig()


def test_a_malformed_line_is_named(ring, tmp_path):
    write_dataset(tmp_path, ring)
    (tmp_path / "valid.txt").write_text("e1\tr0\te2\ne1 r0 e3\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"valid\.txt, line 2"):
        load_splits(tmp_path)
    (tmp_path / "test.txt").unlink()
    with pytest.raises(InputError, match=r"no test\.txt"):
        load_splits(tmp_path)
