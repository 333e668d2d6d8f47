"""θ0 calibration: stopping turns evaluated exactly from full trajectories."""

import math

import pytest

from quillian.eval.calibrate import Trajectory, calibrate, evaluate_theta, stop_turn
from quillian.methods.know3.config import Know3Config

CONFIG = Know3Config()
PATHS = [
    Trajectory("q1", ("a", "b", "c"), (1.0, 1.0), ("a",)),
    Trajectory("q2", ("x", "y", "z"), (50.0, 10.0), ("y",)),
    Trajectory("q3", ("m", "n", "o"), (None, None), ("o",)),
    Trajectory("q4", ("p", "q", "r"), (20.0, 500.0), ("p",)),
]


def test_stop_turn_follows_the_thresholds():
    # θ0 = 1: θ_0 = 34.4, θ_1 = 64
    assert [stop_turn(p, 1.0, CONFIG) for p in PATHS] == [0, 1, 2, 0]
    report = evaluate_theta(PATHS, 1.0, CONFIG)
    assert report.answered_at_turn == (0.5, 0.25, 0.25)
    assert report.em == 1.0  # a, y, o, p all gold
    assert evaluate_theta(PATHS, 0.0, CONFIG).answered_at_turn == (0.0, 0.0, 1.0)


def test_calibrate_hits_the_target_share_at_turn_zero():
    result = calibrate(PATHS, 0.25, CONFIG)
    assert result.chosen.answered_at_turn[0] == 0.25
    # the turn-0 threshold sits half-way between 1.0 and 20.0
    assert result.chosen.thresholds[0] == pytest.approx(10.5)
    assert result.chosen.theta0 == pytest.approx(10.5 * (1 + math.e) / 128)
    assert result.unscorable_at_turn_0 == 1
    capped = calibrate(PATHS, 1.0, CONFIG)
    assert capped.chosen.answered_at_turn[0] == 0.75 and capped.notes
    with pytest.raises(ValueError):
        calibrate(PATHS, 1.5, CONFIG)
