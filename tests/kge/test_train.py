"""Training: N3, reciprocal examples, 1-vs-all and shared negatives, early stopping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.evaluate import KnownAnswers, evaluate
from quillian.components.kge.train import _Examples, n3_penalty, train_complex
from quillian.errors import ConfigError, InputError

FAST = ComplExConfig(dim=32, batch_size=32, epochs=60, n3_weight=1e-3, init_scale=0.1)


def test_n3_by_hand():
    # one complex coordinate per row; moduli |3+4i| = 5, |1| = 1, |2i| = 2 and, in the
    # second example, |0| = 0, |1+0i| = 1, |0+1i| = 1:
    # weight / batch * (5^3 + 1^3 + 2^3 + 0 + 1 + 1) = 0.1 / 2 * 136 = 6.8
    heads = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    relations = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    tails = torch.tensor([[0.0, 2.0], [0.0, 1.0]])
    assert float(n3_penalty(heads, relations, tails, 0.1)) == pytest.approx(6.8)
    assert float(n3_penalty(heads, relations, tails, 0.0)) == 0.0


def test_each_triple_gives_a_tail_and_a_reciprocal_head_example(ring):
    examples = _Examples(ring)
    assert len(examples) == 2 * len(ring)
    n = len(ring)
    heads, rows, tails = examples.batch(torch.tensor([0, n, n + 30]))
    assert heads.tolist() == [0, 1, int(ring.tails[30])]
    assert rows.tolist() == [0, 3, int(ring.relations[30]) + 3]  # r + n_relations
    assert tails.tolist() == [1, 0, int(ring.heads[30])]


def test_one_vs_all_learns_a_tiny_graph(ring):
    result = train_complex(ring, FAST)
    assert result.mode == "1vsall" and result.epochs == 60 and result.resumed_from == 0
    metrics = evaluate(result.model, ring, KnownAnswers([ring]))
    assert metrics["mrr"] >= 0.98


def test_shared_negatives_learn_a_tiny_graph(ring):
    config = ComplExConfig(
        dim=32,
        batch_size=32,
        epochs=60,
        n3_weight=1e-3,
        init_scale=0.1,
        mode="negatives",
        negatives=12,
    )
    result = train_complex(ring, config)
    assert result.mode == "negatives"
    assert evaluate(result.model, ring, KnownAnswers([ring]))["mrr"] >= 0.9


def test_training_is_deterministic(ring):
    config = ComplExConfig(dim=8, batch_size=32, epochs=2)
    first, second = train_complex(ring, config), train_complex(ring, config)
    assert np.array_equal(first.model.entities, second.model.entities)


def test_early_stopping_keeps_the_best_weights(ring):
    config = ComplExConfig(
        dim=32,
        batch_size=32,
        epochs=200,
        n3_weight=1e-3,
        init_scale=0.1,
        eval_every=5,
        patience=2,
    )
    result = train_complex(ring, config, valid=ring)  # the graph itself: MRR saturates
    assert result.stopped_early and result.epochs < 200
    mrrs = [row["mrr"] for row in result.history]
    assert result.valid_metrics["mrr"] == max(mrrs) >= 0.98
    assert result.best_epoch == result.history[int(np.argmax(mrrs))]["epoch"]
    assert evaluate(result.model, ring, KnownAnswers([ring]))["mrr"] == pytest.approx(max(mrrs))


def test_progress_reports_batches_and_epochs(ring):
    seen = []
    train_complex(
        ring, ComplExConfig(dim=8, batch_size=64, epochs=2), progress=lambda *a: seen.append(a)
    )
    assert ("train", 2, 2) in seen and ("batch", 144, 144) in seen
    assert [s for s in seen if s[0] == "train"] == [("train", 1, 2), ("train", 2, 2)]


def test_bad_settings_and_inputs_are_refused(ring):
    with pytest.raises(ConfigError, match="even"):
        ComplExConfig(dim=7)
    with pytest.raises(ConfigError, match="batch_size must be greater than 0"):
        ComplExConfig(batch_size=0)
    with pytest.raises(ConfigError, match="mode"):
        ComplExConfig(mode="pairwise")
    assert ComplExConfig(max_1vsall_entities=10).resolved_mode(11) == "negatives"
    # WordNet's size: few enough entities, but a 1-vs-all epoch of about 27 minutes
    assert ComplExConfig().resolved_mode(95_657, 239_706) == "negatives"
    assert ComplExConfig().resolved_mode(104, 8_544) == "1vsall"  # Kinships
    assert ComplExConfig(mode="1vsall").resolved_mode(95_657, 239_706) == "1vsall"
    with pytest.raises(ConfigError, match="max_1vsall_work must be >= 0"):
        ComplExConfig(max_1vsall_work=-1)
    for share in (-0.01, 1.0):
        with pytest.raises(ConfigError, match="valid_share must be in"):
            ComplExConfig(valid_share=share)
    empty = type(ring).from_array(np.zeros((0, 3)), 4, 1)
    with pytest.raises(InputError, match="no triples"):
        train_complex(empty)
    with pytest.raises(InputError, match=r"outside 0\.\.23"):
        type(ring).from_array([[0, 0, 24]], 24, 3)
