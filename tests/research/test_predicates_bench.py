"""The predicates benchmark's pairing of two retrieval runs (the extraction timing is
a script, run by hand)."""

import pytest

from predicates import compare_runs
from quillian.errors import InputError


def run(scores):
    return {"_per_question": {"ids": ["q1", "q2", "q3", "q4"], "sa": {"R@5": scores}}}


def test_two_runs_are_paired_question_by_question():
    out = compare_runs(run([1.0, 0.5, 0.0, 1.0]), run([1.0, 1.0, 0.5, 1.0]))
    sa = out["sa"]["R@5"]
    assert (sa["before"], sa["after"]) == (0.625, 0.875)
    assert sa["diff"] == 0.25 and (sa["wins"], sa["losses"], sa["ties"]) == (2, 0, 2)


def test_runs_over_other_questions_are_refused():
    other = run([1.0, 1.0, 1.0, 1.0])
    other["_per_question"]["ids"] = ["q1", "q2", "q3", "q5"]
    with pytest.raises(InputError, match="different questions"):
        compare_runs(run([1.0, 0.5, 0.0, 1.0]), other)
    with pytest.raises(InputError, match="no _per_question"):
        compare_runs({}, other)
