"""The page of the local model's backends (``research/llm_local_page.py``): a row per
dtype with its command, a new run replacing the recorded one, and a run refused
without its command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_local_page import COMMAND, TITLE, main, render


def _row(dtype: str, gen_tok_s: float, same: str) -> dict[str, Any]:
    return {
        "dtype": dtype,
        "load_s": 40.0,
        "prompt_tokens": 1042,
        "prompt_tok_s": 217.3,
        "new_tokens": 100,
        "gen_tok_s": gen_tok_s,
        "peak_rss_mb": 3822,
        "same_greedy_as": same,
        "next_token_agreement": 0.9656,
    }


RUN: dict[str, Any] = {
    "machine": {"cpus": 2, "cpu_capability": "AVX512"},
    "results": [_row("float32", 6.81, "4/4 float32"), _row("int8", 23.55, "2/4 float32")],
}


def test_the_page_is_a_section_with_a_row_per_dtype() -> None:
    text = render(RUN)
    assert text.startswith(f"## {TITLE}\n")
    assert "## " not in text.split("\n", 1)[1]  # one section
    assert f"`{COMMAND}`: Qwen2.5-Coder-0.5B-Instruct Q4_K_M" in text  # recorded without one
    assert "a 1,042-token prompt, 100 new tokens, median of 3, 2 threads (AVX512)." in text
    assert "| int8 | 40.0 | 217.3 | 23.55 | 3822 | 2/4 float32 | 0.9656 |" in text
    assert "`python research/llm_local.py --dtypes int8 --json`:" in render(
        {**RUN, "_command": "python research/llm_local.py --dtypes int8 --json"}
    )


def test_a_run_replaces_the_recorded_one_and_one_without_its_command_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, out = tmp_path / "llm-local.json", tmp_path / "llm-local.md"
    results.write_text(json.dumps(RUN))
    main(["--results", str(results), "--out", str(out)])
    assert json.loads(results.read_text()) == RUN and out.read_text() == render(RUN)
    run = tmp_path / "bf16.json"
    run.write_text(json.dumps({**RUN, "results": [_row("bfloat16", 13.4, "4/4 bfloat16")]}))
    (tmp_path / "bf16.cmd").write_text("python research/llm_local.py --dtypes bfloat16 --json\n")
    args = ["--results", str(results), "--out", str(out)]
    main([*args, "--run", str(run)])
    saved = json.loads(results.read_text())
    assert [r["dtype"] for r in saved["results"]] == ["bfloat16"]
    assert saved["_command"] == "python research/llm_local.py --dtypes bfloat16 --json"
    assert "| bfloat16 |" in out.read_text() and "| int8 |" not in out.read_text()
    bare = tmp_path / "int8.json"
    bare.write_text(json.dumps(RUN))
    out.unlink()
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--run", str(bare)])
    assert exit_info.value.code == 2 and "no command recorded" in capsys.readouterr().err
    assert json.loads(results.read_text()) == saved and not out.exists()  # nothing written
    with pytest.raises(SystemExit):
        main(["--results", str(tmp_path / "none.json"), "--out", str(out)])
    assert "no run recorded" in capsys.readouterr().err and not out.exists()
