"""The model directory: round trip, fingerprints, interrupted training and resumption."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.storage import (
    MANIFEST,
    load_model,
    model_directory,
    save_model,
)
from quillian.components.kge.train import checkpoint_path, train_and_save, train_complex
from quillian.components.kge.triples import TripleSet
from quillian.errors import ModelLoadError

CONFIG = ComplExConfig(dim=8, batch_size=32, epochs=4, init_scale=0.1)


class Interrupt(Exception):
    pass


def test_save_and_load_round_trip(ring, tmp_path):
    result = train_and_save(ring, model_directory(tmp_path), CONFIG)
    stored = load_model(tmp_path / "kge", ring)
    assert isinstance(stored.model.entities, np.memmap)
    assert np.array_equal(stored.model.entities, result.model.entities)
    assert np.array_equal(stored.model.relations, result.model.relations)
    assert stored.model.relations.shape == (6, 8)
    assert stored.fingerprint == ring.fingerprint and stored.epochs == 4
    assert ComplExConfig.from_dict(stored.config) == CONFIG
    manifest = stored.manifest
    assert (manifest["dim"], manifest["n_entities"], manifest["n_relations"]) == (8, 24, 3)
    assert manifest["graph"]["triples"] == 72 and manifest["format"] == 1
    assert stored.model.score_sp(0, 1) == pytest.approx(result.model.score_sp(0, 1))
    assert not checkpoint_path(tmp_path / "kge").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kge"]  # no temporaries left


def test_fingerprint_follows_the_triples_not_their_order(ring):
    rows = ring.as_array()
    shuffled = TripleSet.from_array(rows[::-1], 24, 3)
    assert shuffled.fingerprint == ring.fingerprint
    changed = rows.copy()
    changed[5, 2] = (changed[5, 2] + 1) % 24
    assert TripleSet.from_array(changed, 24, 3).fingerprint != ring.fingerprint
    assert TripleSet.from_array(rows, 25, 3).fingerprint != ring.fingerprint
    assert TripleSet.from_array(rows, 24, 3, source_key="x").fingerprint != ring.fingerprint


def test_a_model_of_another_graph_is_refused(ring, tmp_path):
    train_and_save(ring, tmp_path / "kge", CONFIG)
    other = TripleSet.from_array(ring.as_array()[:-1], 24, 3)
    with pytest.raises(ModelLoadError, match="trained on another graph"):
        load_model(tmp_path / "kge", other)
    with pytest.raises(ModelLoadError, match="no trained KG-embedding model"):
        load_model(tmp_path / "nothing", ring)


def test_a_corrupt_model_is_refused(ring, tmp_path):
    train_and_save(ring, tmp_path / "kge", CONFIG)
    np.save(tmp_path / "kge" / "entities.npy", np.zeros((3, 8), np.float32))
    with pytest.raises(ModelLoadError, match="the manifest says"):
        load_model(tmp_path / "kge")
    manifest = json.loads((tmp_path / "kge" / MANIFEST).read_text())
    (tmp_path / "kge" / MANIFEST).write_text(json.dumps({**manifest, "format": 99}))
    with pytest.raises(ModelLoadError, match="format 99"):
        load_model(tmp_path / "kge")


def test_an_interrupted_training_keeps_the_old_model_and_resumes(ring, tmp_path):
    out = tmp_path / "kge"
    train_and_save(ring, out, CONFIG)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    longer = ComplExConfig(dim=8, batch_size=32, epochs=8, init_scale=0.1, checkpoint_every=1)

    def stop_after_epoch_5(stage, done, total):
        if stage == "train" and done == 5:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_and_save(ring, out, longer, progress=stop_after_epoch_5)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched
    assert load_model(out, ring).epochs == 4
    assert checkpoint_path(out).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

    resumed = train_and_save(ring, out, longer)
    assert resumed.resumed_from == 5 and resumed.epochs == 8
    assert load_model(out, ring).epochs == 8 and not checkpoint_path(out).exists()
    uninterrupted = train_complex(ring, longer)
    assert np.array_equal(resumed.model.entities, uninterrupted.model.entities)
    assert np.array_equal(resumed.model.relations, uninterrupted.model.relations)


def test_a_checkpoint_of_other_settings_is_not_resumed(ring, tmp_path):
    out = tmp_path / "kge"

    def stop(stage, done, total):
        if stage == "train" and done == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_and_save(ring, out, CONFIG, progress=stop)
    other = ComplExConfig(dim=8, batch_size=32, epochs=4, init_scale=0.1, seed=1)
    assert train_and_save(ring, out, other).resumed_from == 0
    with pytest.raises(Interrupt):
        train_and_save(ring, out, CONFIG, progress=stop)
    assert train_and_save(ring, out, CONFIG, resume=False).resumed_from == 0


def test_save_model_replaces_atomically(ring, tmp_path):
    model = train_complex(ring, CONFIG).model
    save_model(tmp_path / "m", model, fingerprint="a", n_triples=1, epochs=1, config={})
    save_model(tmp_path / "m", model, fingerprint="b", n_triples=1, epochs=2, config={})
    assert load_model(tmp_path / "m", "b").epochs == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
