"""KAGS's token and fuzzy containment on worked examples."""

from __future__ import annotations

import pytest

from quillian.eval.metrics import fuzzy_containment, token_containment


@pytest.mark.parametrize(
    ("prediction", "gold", "token", "fuzzy"),
    [
        ("Paris", "Paris", 1.0, 1.0),
        ("The answer is Paris.", "paris", 1.0, 1.0),
        # the gold answer repeated twice counts once: token sets, and it occurs whole
        ("Paris Paris", "Paris", 1.0, 1.0),
        # an empty answer contains nothing
        ("", "Paris", 0.0, 0.0),
        # two of the three gold tokens; too few words for a three-word window
        ("new york", "New York City", 2 / 3, 0.0),
        # no exact occurrence: the best three-word window "new yrok city" aligns 12 of
        # its 13 characters with "new york city", ratio 2 * 12 / 26
        ("It is New Yrok City", "New York City", 2 / 3, 24 / 26),
        # substring containment is by characters, as in the authors' code
        ("the capital is Pariss", "Paris", 0.0, 1.0),
        # a gold answer without tokens matches only a prediction without tokens
        ("", "", 1.0, 1.0),
        ("...", "?", 1.0, 0.0),
    ],
)
def test_worked_examples(prediction: str, gold: str, token: float, fuzzy: float) -> None:
    assert token_containment(prediction, gold) == pytest.approx(token)
    assert fuzzy_containment(prediction, gold) == pytest.approx(fuzzy)


def test_the_best_gold_alias_counts() -> None:
    assert token_containment("born in NYC", ["New York City", "NYC"]) == 1.0
    assert fuzzy_containment("born in NYC", ["New York City", "NYC"]) == 1.0
    with pytest.raises(ValueError):
        token_containment("x", [])
