"""Snapshot, k-hop traversal and personalized PageRank on hand-made graphs."""

import json
import random

import numpy as np
import pytest

from quillian.components.graph.ppr import Walk, personalized_pagerank, transition_matrix
from quillian.components.graph.traversal import gather_edges, khop_subgraph
from quillian.errors import IndexDamagedError, IndexIncompleteError, InputError
from quillian.stores import snapshot
from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.id_map import stable_bytes, stable_numbers
from quillian.stores.snapshot import EdgeKind, GraphSnapshot, IdMap, NodeKind

R = EdgeKind.RELATED_TO


def undirected(n, pairs, extra=()):
    src = [a for a, b in pairs] + [b for a, b in pairs]
    dst = [b for a, b in pairs] + [a for a, b in pairs]
    kinds = [R] * len(src)
    for s, t, k in extra:
        src.append(s), dst.append(t), kinds.append(k)
    return GraphSnapshot.from_edges(
        [f"n{i}" for i in range(n)],
        [NodeKind.ENTITY] * n,
        src,
        dst,
        kinds,
        relations=list(range(len(src))),
    )


def test_idmap_round_trip_and_missing():
    ids = IdMap.from_ids(["b", "a", "ünï", "c"])
    assert [ids.index_of(x) for x in ["a", "b", "c", "ünï", "zz"]] == [1, 0, 3, 2, -1]
    assert ids.id_of(2) == "ünï"
    with pytest.raises(InputError, match="duplicate node id 'a'"):
        IdMap.from_ids(["a", "b", "a"])


def test_idmap_saved_in_32_bits_and_read_as_a_64_bit_one_is(tmp_path):
    """The offsets and the order are saved in 32 bits where they fit; a map saved with
    64 (as before) finds and names every id the same."""
    ids = [f"node-{i:05d}-ünï" for i in range(300)][::-1]
    saved = IdMap.from_ids(ids)
    saved.save(tmp_path)
    assert np.load(tmp_path / "ids_offsets.npy").dtype == np.int32
    assert np.load(tmp_path / "ids_order.npy").dtype == np.int32
    narrow = IdMap.load(tmp_path, mmap=False)
    for name in ("ids_offsets", "ids_order"):
        np.save(tmp_path / f"{name}.npy", np.load(tmp_path / f"{name}.npy").astype(np.int64))
    wide = IdMap.load(tmp_path)
    assert wide._offsets.dtype == wide._order.dtype == np.int64
    for loaded in (narrow, wide):
        assert len(loaded) == 300 and loaded.ids_of(range(300)) == ids
        assert [loaded.index_of(i) for i in ids] == list(range(300))
        assert loaded.index_of("node-missing") == -1


@pytest.mark.parametrize("seed", range(20))
def test_idmap_finds_every_id_of_any_lengths_and_characters(seed: int) -> None:
    """ASCII ids (one byte a character, joined at once) and others alike: each id at
    its index, found by its bytes' order; the empty id too."""
    rng = random.Random(seed)
    alphabet = "ab-Z 0" if seed % 2 else "ab-é ü€"
    ids = list({"".join(rng.choices(alphabet, k=rng.randrange(0, 9))) for _ in range(60)})
    got = IdMap.from_ids(ids)
    assert [got.id_of(i) for i in range(len(ids))] == ids
    assert [got.index_of(i) for i in ids] == list(range(len(ids)))
    assert got.index_of("absent!") == -1
    assert sorted(ids, key=str.encode) == [ids[i] for i in got._order.tolist()]
    # the same map from the ids as UTF-8 bytes in one fixed-width array
    from_bytes = IdMap.from_bytes(np.array([i.encode() for i in ids], dtype=np.bytes_))
    for name in ("_blob", "_offsets", "_order"):
        assert getattr(from_bytes, name).tolist() == getattr(got, name).tolist()


def _hashed(prefix: str, rng: random.Random, n: int) -> list[str]:
    return [f"{prefix}-{rng.getrandbits(64):016x}" for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_idmap_from_parts_of_stable_ids_orders_as_bytes(seed: int) -> None:
    """Parts of ids of stable_id's form (one head a part, then 16 hex digits) are
    ordered by their digits' number and by their heads; parts of any other ids, or
    whose heads begin one another, are sorted as bytes: the same map either way."""
    rng = random.Random(seed)
    parts = [_hashed("ent", rng, 40), _hashed("desc", rng, 30), _hashed("chunk", rng, 20)]
    parts[0][3] = "ent-" + "0" * 16  # the smallest number, and the largest
    parts[1][5] = "desc-" + "f" * 16
    others = [
        [*parts[0][:-1], "ent-" + "A" * 16],  # not lowercase hex
        [*parts[0][:-1], "ent-12"],  # shorter: padded with NUL bytes
        _hashed("e", rng, 10) + _hashed("en", rng, 10),  # two heads in one part
        _hashed("a-b", rng, 10),  # a head that begins with the next part's
        _hashed("a", rng, 10),
        _hashed("ü", rng, 10),
        [*parts[0][:-1], "ent-0123456 89abcdef"],  # a space where a digit goes
    ]
    cases = [  # the ids, and whether they are ordered as stable ids
        (parts, True),
        ([parts[2], [], parts[0]], True),
        ([others[5], parts[2]], True),
        ([others[0], parts[1]], False),
        ([others[1], parts[1]], False),
        ([others[2]], False),
        (others[3:5], False),
        ([others[6], parts[1]], False),
    ]
    for case, hashed in cases:
        encoded = [np.array([i.encode() for i in p], dtype=np.bytes_) for p in case]
        got = IdMap.from_bytes(*encoded)
        assert (got._numbered is not None) == hashed  # numbered: no text kept
        ids = [i for p in case for i in p]
        expected = IdMap.from_ids(ids)
        assert got._order.tolist() == expected._order.tolist()
        assert got.ids_of(range(len(ids))) == ids
        assert [got.index_of(i) for i in ids] == list(range(len(ids)))
        near = [i.upper() for i in ids] + [i[:-1] for i in ids] + [i + "0" for i in ids]
        near += ["ent-" + "1" * 16, "desc-" + "0" * 16, "chunk-", "", "x" * 22]
        assert [got.index_of(i) for i in near] == [expected.index_of(i) for i in near]


def test_idmap_of_stable_ids_saved_numbered_and_read_back(tmp_path) -> None:
    """A map of stable ids is saved as their numbers and the parts' heads (8 bytes an
    id), and loads, memory-mapped or not, to the same ids at the same indexes."""
    rng = random.Random(7)
    parts = [_hashed("ent", rng, 300), _hashed("desc", rng, 200), _hashed("chunk", rng, 100)]
    saved = IdMap.from_bytes(*(np.array([i.encode() for i in p], np.bytes_) for p in parts))
    saved.save(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert (
        names
        == sorted(saved.file_names())
        == [
            "ids_heads.npy",
            "ids_numbers.npy",
            "ids_order.npy",
            "ids_starts.npy",
        ]
    )
    assert (tmp_path / "ids_numbers.npy").stat().st_size < 600 * 8 + 200
    ids = [i for p in parts for i in p]
    for mmap in (True, False):
        loaded = IdMap.load(tmp_path, mmap=mmap)
        assert len(loaded) == 600 and loaded.ids_of(range(600)) == ids
        assert [loaded.index_of(i) for i in ids] == list(range(600))
        assert loaded.index_of("ent-" + "g" * 16) == -1
        picks = random.Random(1).choices(range(600), k=900)  # any order, some twice
        assert loaded.ids_of(picks) == [loaded.id_of(i) for i in picks] == [ids[i] for i in picks]
        assert loaded.ids_of([]) == []
        for outside in ([600], [-1]):
            with pytest.raises(IndexError):
                loaded.ids_of(outside)
            with pytest.raises(IndexError):
                loaded.id_of(outside[0])
    np.save(tmp_path / "ids_starts.npy", np.array([0, 300, 500, 599], np.int32))
    with pytest.raises(IndexDamagedError, match=r"ids_starts\.npy is damaged"):
        IdMap.load(tmp_path)


def test_idmap_from_parts_names_a_duplicate_stable_id() -> None:
    twice = "desc-" + "0123456789abcdef"
    parts = (["ent-" + "1" * 16], ["desc-" + "2" * 16, twice, twice])
    with pytest.raises(InputError, match=f"duplicate node id '{twice}'"):
        IdMap.from_bytes(*(np.array([i.encode() for i in p], dtype=np.bytes_) for p in parts))


def test_idmap_from_bytes_names_a_duplicate() -> None:
    with pytest.raises(InputError, match="duplicate node id 'é'"):
        IdMap.from_bytes(np.array(["é".encode(), b"b", "é".encode()], dtype=np.bytes_))
    assert len(IdMap.from_bytes(np.array([], dtype=np.bytes_))) == 0


def test_csr_by_hand_and_save_load(tmp_path):
    # path 0-1-2 plus a DESCRIBES edge 3->0
    g = undirected(4, [(0, 1), (1, 2)], extra=[(3, 0, EdgeKind.DESCRIBES)])
    assert g.indptr.tolist() == [0, 1, 3, 4, 5]
    assert sorted(g.neighbors(1)[0].tolist()) == [0, 2]
    assert g.neighbors(3, EdgeKind.DESCRIBES)[0].tolist() == [0]
    assert g.neighbors(3, R)[0].tolist() == []
    g.save(tmp_path / "g")
    h = GraphSnapshot.load(tmp_path / "g")
    assert h.ids.index_of("n2") == 2 and h.indices.tolist() == g.indices.tolist()
    assert h.degree(R).tolist() == [1, 2, 1, 0]


def _saved_as(g: GraphSnapshot, folder) -> tuple[list[str], GraphSnapshot]:
    g.save(folder)
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".npy"))
    return names, GraphSnapshot.load(folder)


def _assert_same(a: GraphSnapshot, b: GraphSnapshot) -> None:
    assert a.ids.ids_of(range(a.n_nodes)) == b.ids.ids_of(range(b.n_nodes))
    for name in ("kinds", "indptr", "indices", "edge_kinds", "edge_relations"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert np.asarray(a.weights).view(np.uint32).tolist() == b.weights.view(np.uint32).tolist()


def test_snapshot_keeps_few_weights_as_codes_and_relations_of_their_edges(tmp_path):
    """Format 2: weights of few values as one byte an edge (told apart by their bits,
    -0.0 from 0.0), relations only of the edges that have one, indptr in 32 bits; every
    array reads back the same. Many weights, or relations on most edges, are kept as
    they are."""
    rng = np.random.default_rng(3)
    n, m = 50, 400
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    few = rng.choice(np.array([0.5, 1.0, -0.0, 0.0], np.float32), m)
    related = np.where(rng.random(m) < 0.3, rng.integers(0, 10**6, m), -1)
    ids = [f"n{i}" for i in range(n)]
    g = GraphSnapshot.from_edges(ids, [0] * n, src, dst, rng.integers(0, 3, m), few, related)
    names, h = _saved_as(g, tmp_path / "few")
    assert "weight_codes.npy" in names and "weights.npy" not in names
    assert "relation_mask.npy" in names and "edge_relations.npy" not in names
    assert np.load(tmp_path / "few" / "indptr.npy").dtype == np.int32
    assert sorted(set(h.weights.view(np.uint32).tolist())) == sorted(
        set(few.view(np.uint32).tolist())
    )
    _assert_same(g, h)
    many = rng.random(m).astype(np.float32)
    dense = rng.integers(0, 5, m)
    g = GraphSnapshot.from_edges(ids, [0] * n, src, dst, 0, many, dense)
    names, h = _saved_as(g, tmp_path / "many")
    assert "weights.npy" in names and "edge_relations.npy" in names
    assert "weight_codes.npy" not in names and "relation_mask.npy" not in names
    _assert_same(g, h)
    empty = GraphSnapshot.from_edges(["a"], [0], [], [], [])
    _assert_same(empty, _saved_as(empty, tmp_path / "empty")[1])


def test_a_snapshot_saved_over_another_reads_the_files_its_record_names(tmp_path):
    """Saved into the folder of a snapshot of another form (numbered ids and coded
    weights there, text ids and plain weights here), a snapshot loads as it was saved,
    not from the other's files left beside it."""
    rng = random.Random(2)
    numbered = IdMap.from_bytes(np.array([i.encode() for i in _hashed("ent", rng, 6)], np.bytes_))
    first = GraphSnapshot.from_edges(numbered, [0] * 6, [0, 1], [1, 2], 2, [0.5, 1.0])
    second = GraphSnapshot.from_edges(
        [f"n{i}" for i in range(6)], [0] * 6, [2, 3], [4, 5], 2, np.arange(2, dtype=np.float32)
    )
    first.save(tmp_path / "g")
    second.save(tmp_path / "g")
    assert (tmp_path / "g" / "ids_numbers.npy").is_file()  # left over from the first
    _assert_same(second, GraphSnapshot.load(tmp_path / "g"))


def test_snapshot_of_format_1_reads_as_it_was_and_is_written_anew_in_2(tmp_path):
    """A snapshot saved before format 2 (each array as it is) loads the same; a graph
    store continuing from it writes format 2 and leaves no file of format 1 behind."""
    g = undirected(4, [(0, 1), (1, 2)], extra=[(3, 0, EdgeKind.DESCRIBES)])
    old = tmp_path / "g"
    old.mkdir()
    g.ids.save(old)
    for name in snapshot._ARRAYS:
        np.save(old / f"{name}.npy", getattr(g, name))
    meta = {"format": 1, "n_nodes": 4, "n_edges": 5}
    (old / "snapshot.json").write_text(json.dumps(meta))
    _assert_same(g, GraphSnapshot.load(old))
    with CSRGraphStore(old) as store:
        store.add_nodes(["n4"], [NodeKind.ENTITY])
        store.add_edges(["n4"], ["n0"], [R], [0.5])
        grown = store.snapshot()
    assert json.loads((old / "snapshot.json").read_text())["format"] == 2
    recorded = json.loads((old / "snapshot.json").read_text())["files"]
    assert sorted(p.name for p in old.glob("*.npy")) == sorted(recorded)
    assert "weights.npy" not in recorded and "ids_blob.npy" in recorded  # ids not stable
    assert grown.weights.tolist() == [1.0] * 5 + [0.5]
    _assert_same(grown, GraphSnapshot.load(old))


def test_half_written_snapshot_is_refused(tmp_path):
    g = undirected(2, [(0, 1)])
    g.save(tmp_path / "g")
    (tmp_path / "g" / "snapshot.json").unlink()
    with pytest.raises(IndexIncompleteError, match="incomplete"):
        GraphSnapshot.load(tmp_path / "g")


def test_gather_edges_positions():
    g = undirected(3, [(0, 1), (1, 2)])
    src, dst, pos = gather_edges(g, [1, 2])
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == [(1, 0), (1, 2), (2, 1)]
    assert all(g.indices[p] == d for p, d in zip(pos, dst, strict=True))


def test_khop_hops_and_fanout_cap():
    # chain 0-1-2-3 and hub 0 with leaves 4..9 whose links weigh less
    g = undirected(10, [(0, 1), (1, 2), (2, 3)] + [(0, i) for i in range(4, 10)])
    heavy = {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}
    src_of = np.repeat(np.arange(g.n_nodes), np.diff(g.indptr))

    def weight(pos):
        return np.array(
            [1.0 if (int(src_of[p]), int(g.indices[p])) in heavy else 0.1 for p in pos],
            dtype=np.float32,
        )

    sub = khop_subgraph(g, [0], hops=2, weight_fn=weight, max_fanout=2)
    # node 0 keeps its 2 heaviest: 1 and one leaf (ties by storage order); 2 is 2 hops away
    assert dict(zip(sub.nodes.tolist(), sub.hops.tolist(), strict=True))[2] == 2
    assert 3 not in sub.nodes.tolist()
    assert len(sub.nodes) == 4
    full = khop_subgraph(g, [0], hops=3, weight_fn=weight, max_fanout=64, max_nodes=3)
    assert len(full.nodes) == 3  # node cap


def test_ppr_by_hand_symmetric_star():
    # star: centre 0 with leaves 1, 2; reset on leaf 1
    g = undirected(3, [(0, 1), (0, 2)])
    p = personalized_pagerank(transition_matrix(g), [0, 1, 0], damping=0.5)
    # fixed point: p0 = .5*(p1 + p2), p1 = .5 + .5*p0/2, p2 = .5*p0/2
    # => p0 = .5*(.5 + .5*p0) => p0 = 1/3, p1 = 7/12, p2 = 1/12
    a = np.array([[1, -0.5, -0.5], [-0.25, 1, 0], [-0.25, 0, 1]])
    expected = np.linalg.solve(a, [0, 0.5, 0])
    np.testing.assert_allclose(p, expected, atol=1e-7)
    np.testing.assert_allclose(p, [1 / 3, 7 / 12, 1 / 12], atol=1e-7)
    assert p.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="all zero"):
        personalized_pagerank(transition_matrix(g), [0, 0, 0])
    # a walk prepared once gives the same ranking as the matrix, for any reset
    walk = Walk.of(transition_matrix(g))
    for reset in ([0, 1, 0], [1, 0, 2], [0, 0, 1]):
        np.testing.assert_array_equal(
            personalized_pagerank(walk, reset), personalized_pagerank(transition_matrix(g), reset)
        )
    assert walk.dangling.tolist() == [False, False, False]


def test_transition_matrix_adds_extra_edges():
    # a path 0 - 1 and an isolated node 2; an extra edge 1 -> 2 of weight 3
    snap = GraphSnapshot.from_edges(
        ["a", "b", "c"], [NodeKind.ENTITY] * 3, [0, 1], [1, 0], EdgeKind.RELATED_TO
    )
    plain = transition_matrix(snap).toarray()
    assert plain[1].tolist() == [1.0, 0.0, 0.0] and plain[2].sum() == 0
    extra = transition_matrix(snap, extra=([1], [2], [3.0])).toarray()
    assert extra[1].tolist() == [0.25, 0.0, 0.75]  # weights 1 and 3, normalised
    assert extra[0].tolist() == [0.0, 1.0, 0.0]


def exact_ppr(g, reset, damping=0.5, extra=None):
    """``p = (1 - d) r + d (P^T p + dangling mass * r)`` solved directly."""
    p = transition_matrix(g, extra=extra).toarray()
    r = np.asarray(reset, dtype=float) / np.sum(reset)
    dangling = p.sum(axis=1) == 0
    system = np.eye(len(r)) - damping * (p.T + np.outer(r, dangling))
    return np.linalg.solve(system, (1 - damping) * r)


def test_chebyshev_and_power_iteration_reach_the_exact_solution():
    # a triangle with a tail, and an isolated node (dangling): symmetric weights
    g = undirected(6, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4)])
    walk = Walk.over(g)
    assert walk.dangling.tolist() == [False] * 5 + [True]
    for reset in ([1, 0, 0, 0, 0, 0], [0, 0, 0, 2, 1, 0], [0, 1, 0, 0, 0, 3]):
        for damping in (0.5, 0.85):
            for solver in ("chebyshev", "power"):
                got = personalized_pagerank(walk, reset, damping, tol=1e-12, solver=solver)
                np.testing.assert_allclose(got, exact_ppr(g, reset, damping), atol=1e-10)
    # one-way links: a directed 4-cycle's eigenvalues are d times the 4th roots of
    # unity, off the real axis (Chebyshev's slowest case); both still converge
    cycle = GraphSnapshot.from_edges(
        ["a", "b", "c", "d"], [NodeKind.ENTITY] * 4, [0, 1, 2, 3], [1, 2, 3, 0], R
    )
    for solver in ("chebyshev", "power"):
        got = personalized_pagerank(Walk.over(cycle), [1, 0, 0, 0], tol=1e-12, solver=solver)
        np.testing.assert_allclose(got, exact_ppr(cycle, [1, 0, 0, 0]), atol=1e-10)
    with pytest.raises(ValueError, match="solver"):
        personalized_pagerank(walk, [1, 0, 0, 0, 0, 0], solver="gauss")


class Counting:
    """A transposed matrix that counts its products."""

    def __init__(self, matrix):
        self.matrix, self.products = matrix, 0

    def __matmul__(self, p):
        self.products += 1
        return self.matrix @ p

    def __getattr__(self, name):  # shape, dtype
        return getattr(self.matrix, name)


def test_chebyshev_takes_fewer_products_on_a_bipartite_graph():
    # a long path is bipartite: its walk has eigenvalues near -1 and +1, power
    # iteration's slowest case; count the products each method takes to 1e-10
    n = 400
    g = undirected(n, [(i, i + 1) for i in range(n - 1)])
    walk = Walk.over(g)
    reset = np.zeros(n)
    reset[[0, 200]] = 1
    products = {}
    for solver in ("chebyshev", "power"):
        counted = Counting(walk.transposed)
        got = personalized_pagerank(Walk(counted, walk.dangling), reset, tol=1e-10, solver=solver)
        np.testing.assert_allclose(got, exact_ppr(g, reset), atol=1e-10)
        products[solver] = counted.products
    assert products["chebyshev"] < 0.7 * products["power"]


def test_a_diverging_chebyshev_iteration_falls_back_to_power_iteration(monkeypatch, caplog):
    # a directed 4-cycle's eigenvalues include +-0.5i; told the spectrum reaches
    # [-0.95, 0.95], the Chebyshev polynomials amplify them (the step grows past 1e6
    # in 80 products): the safeguard must hand over to power iteration
    from quillian.components.graph import ppr

    cycle = GraphSnapshot.from_edges(
        ["a", "b", "c", "d"], [NodeKind.ENTITY] * 4, [0, 1, 2, 3], [1, 2, 3, 0], R
    )
    reset = np.array([1.0, 0, 0, 0])
    handed_over = []
    power = ppr._power
    monkeypatch.setattr(ppr, "_power", lambda *a: handed_over.append(1) or power(*a))
    with caplog.at_level("DEBUG", logger=ppr.__name__):
        got = ppr._chebyshev(ppr._Step(Walk.over(cycle), reset, 0.5), reset, 0.95, 1e-12, 500)
    np.testing.assert_allclose(got, exact_ppr(cycle, reset), atol=1e-10)
    assert handed_over == [1] and "power iteration" in caplog.text


def test_folding_description_leaves_gives_the_exact_scores_of_the_whole_walk():
    # entities 0-2 (a path), chunk 3 mentioning 0 and 2; descriptions 4, 5 of entity 0,
    # 6 of entity 1, and 7 of entity 8, an entity with descriptions only; descriptions
    # 9 and 10 describe each other only (pendant on each other: neither is folded)
    E, D, C = NodeKind.ENTITY, NodeKind.DESCRIPTION, NodeKind.CHUNK
    kinds = [E, E, E, C, D, D, D, D, E, D, D]
    B, F = EdgeKind.DESCRIBED_BY, EdgeKind.DESCRIBES
    edges = [(0, 1, R), (1, 0, R), (1, 2, R), (2, 1, R), (0, 3, B), (3, 0, F), (2, 3, B),
             (3, 2, F), (0, 4, B), (4, 0, F), (0, 5, B), (5, 0, F), (1, 6, B), (6, 1, F),
             (8, 7, B), (7, 8, F), (9, 10, F), (10, 9, F)]  # fmt: skip
    g = GraphSnapshot.from_edges(
        [f"n{i}" for i in range(11)],
        kinds,
        [a for a, _, _ in edges],
        [b for _, b, _ in edges],
        [k for _, _, k in edges],
        weights=[2.0 if k == B else 1.0 for _, _, k in edges],
    )
    walk = Walk.over(g, fold=(NodeKind.DESCRIPTION,))
    assert walk.layout is not None and walk.layout.leaves.tolist() == [4, 5, 6, 7]
    assert walk.transposed.shape == (7, 7) and walk.n_nodes == 11
    assert not walk.dangling.any()  # entity 8 hands its mass to its description and back
    for reset in ([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 0]):
        exact = exact_ppr(g, reset)
        for solver in ("chebyshev", "power"):
            got = personalized_pagerank(walk, reset, tol=1e-13, solver=solver)
            np.testing.assert_allclose(got, exact, atol=1e-10)
        single = Walk.over(g, fold=(NodeKind.DESCRIPTION,), dtype=np.float32, reorder=True)
        got32 = personalized_pagerank(single, reset, tol=1e-7)
        assert got32.dtype == np.float32
        np.testing.assert_allclose(got32, exact, atol=1e-6)
        # reordered alone, nothing folded: the same scores in the original order
        ordered = Walk.over(g, reorder=True)
        assert sorted(ordered.layout.nodes.tolist()) == list(range(11))
        assert ordered.layout.nodes.tolist() != list(range(11))
        got = personalized_pagerank(ordered, reset, tol=1e-13)
        np.testing.assert_allclose(got, exact, atol=1e-10)
    with pytest.raises(ValueError, match="folded node"):
        personalized_pagerank(walk, [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="11 nodes"):
        personalized_pagerank(walk, [1, 0, 0])
    assert Walk.over(g, fold=(NodeKind.CHUNK,)).layout is None  # chunk 3 has two ends


@pytest.mark.parametrize(
    "bound", [1, 7, 1 << 16, (1 << 16) + 1, 3_000_000, 1 << 32, (1 << 32) + 5, 1 << 60]
)
def test_the_edges_stable_order_is_numpys_stable_sort(bound):
    rng = np.random.default_rng(bound)
    for n, low in ((0, bound), (1, bound), (1000, min(bound, 50)), (5000, bound)):
        # many ties (the first 1,000), keys at both ends of the range
        keys = rng.integers(0, low, n, dtype=np.int64)
        keys[: n // 3] = rng.integers(max(0, bound - 3), bound, n // 3)
        rng.shuffle(keys)
        in_order = np.sort(keys)  # its own order; then a few out of place (a Timsort)
        mostly = in_order.copy()
        mostly[rng.integers(0, max(n, 1), n // 100)] = rng.integers(0, low, n // 100)
        for tried in (keys, in_order, mostly):
            order = snapshot.stable_order(tried, bound)
            assert np.array_equal(order, np.argsort(tried, kind="stable"))


def test_stable_bytes_are_the_ids_stable_numbers_read() -> None:
    rng = random.Random(4)
    ids = [*_hashed("desc", rng, 50), "desc-" + "0" * 16, "desc-" + "f" * 16]
    encoded = np.array([i.encode() for i in ids], np.bytes_)
    numbered = stable_numbers(encoded)
    assert numbered is not None
    again = stable_bytes(*numbered)
    assert again.dtype == encoded.dtype and again.tolist() == encoded.tolist()
    assert stable_bytes(b"ent-", np.zeros(0, np.uint64)).tolist() == []


def _moved_parts(rng: random.Random, parts: list[list[str]], heads: list[str]):
    """Each part with some ids gone and some added at random places: the new parts,
    each old id's new place (-1: gone), and the added ids' places."""
    new_parts, moves, added = [], [], []
    for part, head in zip(parts, heads, strict=True):
        kept = [i for i in part if rng.random() < 0.8]
        fresh = _hashed(head, rng, rng.randrange(0, 6))
        new = list(kept)
        for node_id in fresh:
            new.insert(rng.randrange(len(new) + 1), node_id)
        place = {node_id: i for i, node_id in enumerate(new)}
        moves.append(np.array([place.get(i, -1) for i in part], np.int64))
        at = np.array([place[i] for i in fresh], np.int64)
        added.append((at, np.array([i.encode() for i in fresh], dtype=np.bytes_)))
        new_parts.append(new)
    return new_parts, moves, added


@pytest.mark.parametrize("seed", range(8))
def test_idmap_carried_is_the_map_of_the_moved_ids(seed: int) -> None:
    """A numbered map carried through its parts' moves (ids gone, ids added anywhere)
    is the map :meth:`IdMap.from_bytes` makes of the new parts: same order, same ids."""
    rng = random.Random(seed)
    heads = ["ent", "desc", "chunk"]
    parts = [_hashed(h, rng, rng.randrange(1, 40)) for h in heads]
    old = IdMap.from_bytes(*(np.array([i.encode() for i in p], np.bytes_) for p in parts))
    for _ in range(5):
        new_parts, moves, added = _moved_parts(rng, parts, heads)
        if not all(new_parts):
            continue
        got = old.carried(moves, added)
        want = IdMap.from_bytes(*(np.array([i.encode() for i in p], np.bytes_) for p in new_parts))
        ids = [i for p in new_parts for i in p]
        assert got is not None and got._order.tolist() == want._order.tolist()
        assert got.ids_of(range(len(ids))) == ids
        assert [got.index_of(i) for i in ids] == list(range(len(ids)))
        old, parts = got, new_parts


def test_idmap_carried_refuses_what_it_cannot_carry() -> None:
    """Ids of the text form, an added id of another head: None (the caller sorts them
    again); an added id the part has: named."""
    rng = random.Random(3)
    parts = [_hashed("ent", rng, 5), _hashed("chunk", rng, 5)]
    numbered = IdMap.from_bytes(*(np.array([i.encode() for i in p], np.bytes_) for p in parts))
    same = [np.arange(5, dtype=np.int64)] * 2
    nothing = (np.zeros(0, np.int64), np.zeros(0, np.bytes_))
    assert IdMap.from_ids(["a", "b"]).carried([np.arange(2)], [nothing]) is None
    other = (np.array([5]), np.array([b"desc-" + b"0" * 16]))
    assert numbered.carried(same, [other, nothing]) is None
    again = (np.array([5]), np.array([parts[0][2].encode()]))
    with pytest.raises(InputError, match="duplicate node id"):
        numbered.carried(same, [again, nothing])


@pytest.mark.parametrize("seed", range(12))
def test_snapshot_carried_is_the_snapshot_of_the_new_edges(seed: int) -> None:
    """A snapshot carried through nodes gone and added, relations gone and added, and
    edges of some rows changed equals the snapshot built of the new graph's whole edge
    list (kept edges in their old order, new ones anywhere)."""
    rng = random.Random(seed)
    n, n_rel = rng.randrange(2, 40), rng.randrange(0, 30)

    def edge(nodes: int, relations: int) -> tuple[int, int, int, float, int]:
        rel = rng.randrange(relations) if relations and rng.random() < 0.5 else -1
        kind = R if rel >= 0 else rng.choice([EdgeKind.DESCRIBES, EdgeKind.DESCRIBED_BY])
        return (rng.randrange(nodes), rng.randrange(nodes), kind, rng.choice([1.0, 0.5]), rel)

    edges = [edge(n, n_rel) for _ in range(rng.randrange(0, 120))]

    def built(count: int, listed: list[tuple[int, int, int, float, int]]) -> GraphSnapshot:
        columns = list(zip(*listed, strict=True)) if listed else [[]] * 5
        return GraphSnapshot.from_edges(
            [f"n{i}" for i in range(count)],
            [NodeKind.ENTITY] * count,
            np.array(columns[0], np.int64),
            columns[1],
            columns[2],
            columns[3],
            columns[4],
        )

    old = built(n, edges)
    alive = [i for i in range(n) if rng.random() < 0.85]
    order = list(alive)
    for k in range(rng.randrange(0, 5)):
        order.insert(rng.randrange(len(order) + 1), n + k)  # added nodes
    moved = np.full(n, -1, np.int64)
    for new, node in enumerate(order):
        if node < n:
            moved[node] = new
    rel_alive = [r for r in range(n_rel) if rng.random() < 0.85]
    rel_order = list(rel_alive)
    for k in range(rng.randrange(0, 4)):
        rel_order.insert(rng.randrange(len(rel_order) + 1), n_rel + k)
    rel_moved = np.full(n_rel, -1, np.int64)
    for new, rel in enumerate(rel_order):
        if rel < n_rel:
            rel_moved[rel] = new
    m = len(order)
    changed = np.zeros(m, np.bool_)
    changed[[i for i, node in enumerate(order) if node >= n]] = True
    listed = []
    for s, t, kind, w, rel in edges:
        if moved[s] < 0 or moved[t] < 0 or (rel >= 0 and rel_moved[rel] < 0):
            if moved[s] >= 0:
                changed[moved[s]] = True
            continue
        if rng.random() < 0.05:  # an edge dropped from a row that stays
            changed[moved[s]] = True
            continue
        listed.append(
            (int(moved[s]), int(moved[t]), kind, w, int(rel_moved[rel]) if rel >= 0 else -1)
        )
    for _ in range(rng.randrange(0, 10)):  # new edges anywhere in the list
        new_edge = edge(m, len(rel_order))
        changed[new_edge[0]] = True
        listed.insert(rng.randrange(len(listed) + 1), new_edge)
    want = built(m, listed)
    mine = [e for e in listed if changed[e[0]]]
    columns = list(zip(*mine, strict=True)) if mine else [[]] * 5
    got = old.carried(
        want.ids,
        want.kinds,
        moved,
        rel_moved,
        changed,
        (
            np.array(columns[0], np.int64),
            np.array(columns[1], np.int64),
            np.array(columns[2], np.int8),
            np.array(columns[3], np.float32),
            np.array(columns[4], np.int32),
        ),
    )
    for name in ("indptr", "indices", "weights", "edge_kinds", "edge_relations"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_snapshot_carried_refuses_an_edge_to_a_node_gone() -> None:
    """A row said to be unchanged whose edge reaches a node that is gone, or names a
    relation that is gone: refused, not carried wrong."""
    old = undirected(3, [(0, 1), (1, 2)])
    ids = IdMap.from_ids(["n0", "n1"])
    kinds = [NodeKind.ENTITY] * 2
    none = (np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.int8), np.zeros(0, np.float32))
    empty = (*none, np.zeros(0, np.int32))
    unchanged = np.zeros(2, np.bool_)
    with pytest.raises(ValueError, match="node that is gone"):
        old.carried(ids, kinds, np.array([0, 1, -1]), None, unchanged, empty)
    with pytest.raises(ValueError, match="relation that is gone"):
        old.carried(ids, kinds, np.array([0, 1, -1]), np.array([0, -1, 1, 2]), unchanged, empty)
    with pytest.raises(ValueError, match="did not change"):
        edge = (np.array([0]), np.array([1]), np.array([R], np.int8), np.ones(1, np.float32))
        old.carried(
            ids, kinds, np.array([0, 1, -1]), None, unchanged, (*edge, np.zeros(1, np.int32))
        )
