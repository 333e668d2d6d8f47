"""ComplEx scoring against a five-entity example worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quillian.components.kge.scoring import ComplEx, complex_query
from quillian.components.kge.train import complex_product
from quillian.errors import InputError

# Two complex coordinates per embedding; a row is [re_1, re_2, im_1, im_2].
#   e0 = (1,    i   )   e1 = (i, 1)   e2 = (1 + i, 0)   e3 = (2, 1 - i)   e4 = (0, 2i)
#   r0 = (1 + i, -i)    its reciprocal row r0^-1 = (1, i)
ENTITIES = np.array(
    [
        [1, 0, 0, 1],
        [0, 1, 1, 0],
        [1, 0, 1, 0],
        [2, 1, 0, -1],
        [0, 0, 0, 2],
    ],
    dtype=np.float32,
)
RELATIONS = np.array([[1, 0, 1, -1], [1, 0, 0, 1]], dtype=np.float32)


@pytest.fixture
def model() -> ComplEx:
    return ComplEx(ENTITIES, RELATIONS)


def test_score_spo_by_hand(model):
    # f(e0, r0, e3) = Re[ 1*(1+i)*conj(2) + i*(-i)*conj(1-i) ]
    #              = Re[ 2 + 2i ] + Re[ 1 * (1+i) ] = 2 + 1 = 3
    assert model.score_spo(0, 0, 3) == pytest.approx(3.0)


def test_score_sp_by_hand(model):
    # q = e0 * r0 = (1*(1+i), i*(-i)) = (1+i, 1); f(t) = Re[q1 conj(t1) + q2 conj(t2)]
    #   t=e0 (1, i):    Re[(1+i)*1]      + Re[1*(-i)]    = 1 + 0 = 1
    #   t=e1 (i, 1):    Re[(1+i)*(-i)]   + Re[1*1]       = Re[1-i] + 1 = 2
    #   t=e2 (1+i, 0):  Re[(1+i)*(1-i)]  + 0             = 2
    #   t=e3 (2, 1-i):  Re[(1+i)*2]      + Re[1*(1+i)]   = 2 + 1 = 3
    #   t=e4 (0, 2i):   0                + Re[1*(-2i)]   = 0
    assert model.score_sp(0, 0).tolist() == pytest.approx([1, 2, 2, 3, 0])


def test_score_po_uses_the_reciprocal_relation_by_hand(model):
    # heads of (?, r0, e3) are the tails of (e3, r0^-1, ?): q = e3 * r0^-1 = (2, (1-i)*i) = (2, 1+i)
    #   h=e0 (1, i):    Re[2*1]       + Re[(1+i)*(-i)]   = 2 + 1 = 3
    #   h=e1 (i, 1):    Re[2*(-i)]    + Re[(1+i)*1]      = 0 + 1 = 1
    #   h=e2 (1+i, 0):  Re[2*(1-i)]   + 0                = 2
    #   h=e3 (2, 1-i):  Re[2*2]       + Re[(1+i)*(1+i)]  = 4 + Re[2i] = 4
    #   h=e4 (0, 2i):   0             + Re[(1+i)*(-2i)]  = Re[2 - 2i] = 2
    assert model.score_po(0, 3).tolist() == pytest.approx([3, 1, 2, 4, 2])


def test_the_four_term_formula_and_numpy_complex_agree(model):
    h_re, h_im = ENTITIES[:, :2], ENTITIES[:, 2:]
    r_re, r_im = RELATIONS[0, :2], RELATIONS[0, 2:]
    for h in range(5):
        for t in range(5):
            t_re, t_im = ENTITIES[t, :2], ENTITIES[t, 2:]
            four_terms = np.sum(
                h_re[h] * r_re * t_re
                + h_im[h] * r_re * t_im
                + h_re[h] * r_im * t_im
                - h_im[h] * r_im * t_re
            )
            z = (h_re[h] + 1j * h_im[h]) * (r_re + 1j * r_im) * np.conj(t_re + 1j * t_im)
            assert model.score_spo(h, 0, t) == pytest.approx(four_terms) == np.sum(z).real


def test_score_sp_equals_score_spo_over_all_tails():
    rng = np.random.default_rng(0)
    model = ComplEx(rng.normal(size=(7, 6)), rng.normal(size=(4, 6)))
    for h in range(7):
        for r in range(2):
            each = [model.score_spo(h, r, t) for t in range(7)]
            assert model.score_sp(h, r) == pytest.approx(each, rel=1e-5)
    batch = model.score_sp_batch([0, 3, 6], [1, 0, 1])
    assert batch.shape == (3, 7) and batch.dtype == np.float32
    assert batch[1] == pytest.approx(model.score_sp(3, 0))
    spo = model.score_spo_batch([0, 3, 6], [1, 0, 1], [2, 2, 5])
    assert spo == pytest.approx([batch[0, 2], batch[1, 2], batch[2, 5]], rel=1e-5)


def test_head_scores_come_from_the_reciprocal_rows():
    rng = np.random.default_rng(2)
    model = ComplEx(rng.normal(size=(7, 6)), rng.normal(size=(4, 6)))
    assert model.n_relations == 2
    for r in range(2):
        for t in range(7):
            inverse = complex_query(model.entities[t], model.relations[r + 2])
            expected = [float(inverse @ model.entities[h]) for h in range(7)]
            assert model.score_po(r, t) == pytest.approx(expected, rel=1e-5)
            forward = [model.score_spo(h, r, t) for h in range(7)]
            assert not np.allclose(model.score_po(r, t), forward)  # its own parameters
    po = model.score_po_batch([1, 0], [4, 5])
    assert po[1] == pytest.approx(model.score_po(0, 5))


def test_torch_and_numpy_complex_products_agree():
    rng = np.random.default_rng(1)
    h, r = rng.normal(size=(5, 8)).astype(np.float32), rng.normal(size=(5, 8)).astype(np.float32)
    torch_q = complex_product(torch.from_numpy(h), torch.from_numpy(r)).numpy()
    assert torch_q == pytest.approx(complex_query(h, r), rel=1e-6)


def test_bad_ids_and_shapes_are_refused(model):
    with pytest.raises(InputError, match=r"outside 0\.\.4"):
        model.score_sp(5, 0)
    with pytest.raises(InputError, match=r"relations: 1 outside 0\.\.0"):
        model.score_sp(0, 1)  # the reciprocal row is not a public relation id
    with pytest.raises(InputError, match="differ in length"):
        model.score_spo_batch([0, 1], [0], [1, 2])
    with pytest.raises(InputError, match="inverse"):
        ComplEx(ENTITIES, RELATIONS[:1])
    with pytest.raises(InputError, match="odd"):
        ComplEx(ENTITIES[:, :3], RELATIONS[:, :3])


def _random_model(n: int, dim: int, seed: int = 0, **options) -> ComplEx:
    rng = np.random.default_rng(seed)
    entities = rng.standard_normal((n, dim), dtype=np.float32) * 0.3
    relations = rng.standard_normal((6, dim), dtype=np.float32) * 0.3
    return ComplEx(entities, relations, **options)


def test_top_tails_are_the_best_scores_without_the_head(model):
    scores = model.score_sp(0, 0)
    ranked = [t for t in np.argsort(-scores, kind="stable") if t != 0]
    top = model.top_tails(0, 0, 3)
    assert [t for t, _ in top] == ranked[:3]
    assert [s for _, s in top] == pytest.approx([float(scores[t]) for t in ranked[:3]])
    assert model.top_tails(0, 0, 0) == []
    assert len(model.top_tails(0, 0, 100)) == model.n_entities - 1


@pytest.mark.parametrize("dim", [6, 128, 200])  # widths padded to a multiple of 16
def test_the_int8_scan_finds_the_exact_top_tails(dim):
    exact = _random_model(20_000, dim)
    scanned = _random_model(20_000, dim, int8_scan_from=0)
    for head, relation in [(0, 0), (17, 1), (19_999, 2), (4_321, 0)]:
        want = exact.top_tails(head, relation, 10)
        got = scanned.top_tails(head, relation, 10)
        assert [t for t, _ in got] == [t for t, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)
    assert scanned._int8 is not None and exact._int8 is None


def test_int8_rows_score_within_a_percent():
    from quillian.components.kge.quantized import Int8Rows

    rng = np.random.default_rng(1)
    rows = rng.standard_normal((3_000, 40), dtype=np.float32)
    queries = rng.standard_normal((3, 40), dtype=np.float32)
    int8 = Int8Rows.quantize(rows)
    assert int8.width == 48 and int8.nbytes == 3_000 * 48 + 2 * 3_000
    exact = queries @ rows.T
    error = np.abs(int8.scores(queries) - exact).max() / np.abs(exact).max()
    assert error < 0.01


@pytest.mark.parametrize("order", ["random", "ascending", "descending"])
def test_shortlist_holds_the_highest_scores_whatever_their_order(order):
    from quillian.components.kge.scoring import shortlist

    scores = np.random.default_rng(3).standard_normal(100_000).astype(np.float32)
    if order != "random":
        scores = np.sort(scores) if order == "ascending" else -np.sort(scores)
    want = set(np.argsort(-scores)[:64].tolist())
    assert set(shortlist(scores, 64).tolist()) == want
    assert sorted(shortlist(scores[:50], 64).tolist()) == list(range(50))


def test_saved_int8_rows_are_loaded_not_quantised_again(tmp_path, caplog):
    from quillian.components.kge import quantized
    from quillian.components.kge.storage import load_model, save_model

    model = _random_model(5_000, 32, int8_scan_from=1_000)
    want = model.top_tails(7, 1, 10)
    save_model(tmp_path / "kge", model, fingerprint="f", n_triples=1, epochs=1, config={})
    assert (tmp_path / "kge" / "entities.int8.npy").is_file()
    made = []
    original = quantized.Int8Rows.quantize
    quantized.Int8Rows.quantize = classmethod(lambda cls, rows: made.append(1) or original(rows))
    try:
        loaded = load_model(tmp_path / "kge").model
        assert loaded.int8_rows() is not None and made == []
        assert loaded.top_tails(7, 1, 10) == want
        # a damaged int8 file is not used, with a warning (5,000 entities: float32 scan)
        np.save(tmp_path / "kge" / "entities.int8.npy", np.zeros((3, 32), dtype=np.int8))
        again = load_model(tmp_path / "kge").model
        assert again.int8_rows() is None and again.top_tails(7, 1, 10) == want
        assert "not used" in caplog.text
    finally:
        quantized.Int8Rows.quantize = original
    # below the threshold nothing is written
    small = _random_model(500, 32)
    save_model(tmp_path / "small", small, fingerprint="f", n_triples=1, epochs=1, config={})
    assert not (tmp_path / "small" / "entities.int8.npy").exists()


@pytest.mark.parametrize("queries", [1, 3])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_the_row_scan_equals_the_blas_product(tmp_path, queries, threads):
    from quillian.components.kge.scan import scan_rows

    rng = np.random.default_rng(4)
    path = tmp_path / "rows.npy"
    np.save(path, rng.standard_normal((1_001, 24), dtype=np.float32))
    rows = np.load(path, mmap_mode="r")  # read-only, as a saved model's rows are
    wanted = rng.standard_normal((queries, 24), dtype=np.float32)
    got = scan_rows(rows, wanted, threads=threads)
    assert got.shape == (queries, 1_001) and got.dtype == np.float32
    np.testing.assert_allclose(got, wanted @ rows.T, rtol=1e-5, atol=1e-5)
    assert scan_rows(rows[:1], wanted[0], threads=threads).shape == (1, 1)
    with pytest.raises(ValueError, match="cannot scan"):
        scan_rows(rows, wanted[:, :5])


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_reading_the_rows_sums_every_float_once(tmp_path, threads):
    from quillian.components.kge.scan import read_rows

    path = tmp_path / "rows.npy"
    np.save(path, np.arange(1_001 * 8, dtype=np.float32).reshape(1_001, 8) % 7)
    rows = np.load(path, mmap_mode="r")
    assert read_rows(rows, threads=threads) == float(np.asarray(rows, dtype=np.float64).sum())
    with pytest.raises(ValueError, match="cannot read"):
        read_rows(np.zeros(3, dtype=np.float32))


def test_scoring_every_tail_scans_rows_from_the_threshold_on():
    rng = np.random.default_rng(5)
    model = ComplEx(rng.normal(size=(300, 8)), rng.normal(size=(4, 8)))
    blas = model.score_sp_batch([0, 7, 299], [1, 0, 1])
    model = ComplEx(model.entities, model.relations, scan_from=100)  # now it scans
    scanned = model.score_sp_batch([0, 7, 299], [1, 0, 1])
    np.testing.assert_allclose(scanned, blas, rtol=1e-5, atol=1e-5)
    want = ComplEx(model.entities, model.relations).top_tails(7, 0, 5)
    got = model.top_tails(7, 0, 5)
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [x for _, x in got] == pytest.approx([x for _, x in want], rel=1e-5)


def test_top_tails_by_partition_equal_a_full_sort():
    model = _random_model(5_000, 16)
    for head, relation in [(0, 0), (4_999, 1), (123, 2)]:
        scores = model.score_sp(head, relation)
        scores[head] = -np.inf
        want = np.argsort(-scores, kind="stable")[:7].tolist()
        got = model.top_tails(head, relation, 7)
        assert [t for t, _ in got] == want
        assert [s for _, s in got] == pytest.approx(scores[want].tolist(), rel=1e-6)
    assert len(model.top_tails(3, 0, 10_000)) == 4_999  # every entity but the head
