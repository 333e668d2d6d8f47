"""The local-model benchmark's comparisons between dtypes (no model loaded)."""

from __future__ import annotations

import pytest

from llm_local import PER_CALL_INT8, _agreement, _parse


def test_next_token_agreement_counts_every_prompt_position() -> None:
    reference = [[1, 2, 3], [4, 5]]
    assert _agreement([[1, 9, 3], [4, 6]], reference) == 0.6
    assert _agreement(reference, reference) == 1.0


def test_rows_of_different_prompts_are_refused() -> None:
    with pytest.raises(ValueError):
        _agreement([[1, 2]], [[1, 2, 3]])


def test_the_old_int8_is_a_default_baseline_row() -> None:
    assert _parse([]).dtypes.split(",") == ["float32", "bfloat16", "int8", PER_CALL_INT8]
