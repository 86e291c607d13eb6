"""map_reduce results are bitwise identical for every memory budget and read-ahead depth;
per-block accumulators also for every visiting order (they fold by block id)."""

from __future__ import annotations

import numpy as np
import pytest

from streamsvm.io import InMemoryStore
from streamsvm.kernels import csr_matvec, csr_rmatvec_add
from streamsvm.schedule import Accumulator, PassScheduler

from .helpers import random_problem

X, Y = random_problem(n=600, d=40, density=0.4, seed=11)
W = np.random.default_rng(5).standard_normal(40)


def store():
    return InMemoryStore(X * 1e3 + 0.0, Y, chunk_rows=9)      # 67 blocks, values spread wide


def loss_and_grad(block, views, args, acc):
    """Squared-hinge loss and gradient of one block, into the scheduler's accumulators."""
    Xb = (block.indptr, block.indices, block.data)
    m = np.empty(block.n_rows)
    csr_matvec(Xb, W, m)
    z = np.maximum(0.0, 1.0 - block.y * m)
    acc["loss"] += float(np.sum(z * z))
    csr_rmatvec_add(Xb, -2.0 * block.y * z, acc["g"])


def one_block_bytes(s):
    return max(s.read_chunk(i).nbytes for i in range(s.n_chunks))


def run(memory, order, prefetch=2, sweeps_before=0, per_block=True):
    s = store()
    memory = one_block_bytes(s) if memory == "one block" else memory
    sched = PassScheduler(s, memory=memory, prefetch=prefetch, seed=1)
    for _ in range(sweeps_before):
        sched.map_reduce(lambda b, *_: None, order="cyclic")
    r = sched.map_reduce(loss_and_grad, order=order,
                         acc={"loss": Accumulator((), per_block=per_block),
                              "g": Accumulator(40, per_block=per_block)})
    assert sched.passes == sweeps_before + 1
    return float(r["loss"]), r["g"]


def test_reference_is_correct():
    loss, g = run("1GB", "sequential")
    Xs = X * 1e3
    z = np.maximum(0.0, 1.0 - Y * (Xs @ W))
    assert loss == pytest.approx(np.sum(z * z), rel=1e-12)
    np.testing.assert_allclose(g, -2.0 * Xs.T @ (Y * z), rtol=1e-10)


@pytest.mark.parametrize("memory", ["1GB", "one block", 0])
@pytest.mark.parametrize("order", ["sequential", "random", "cyclic", "reversed"])
@pytest.mark.parametrize("prefetch", [0, 3])
def test_per_block_accumulators_are_bitwise_identical(memory, order, prefetch):
    ref_loss, ref_g = run("1GB", "sequential")
    sweeps_before = 0
    if order == "reversed":
        order = np.arange(67)[::-1]
    elif order == "cyclic":
        sweeps_before = 1                        # the descending sweep of "cyclic"
    loss, g = run(memory, order, prefetch, sweeps_before)
    assert loss == ref_loss
    assert np.array_equal(g, ref_g)


@pytest.mark.parametrize("memory", ["1GB", "one block", 0])
@pytest.mark.parametrize("prefetch", [0, 3])
def test_run_accumulators_are_bitwise_identical_for_an_order(memory, prefetch):
    """One array per worker, added into in visiting order: the same for every budget and
    read-ahead depth (and orders are seeded)."""
    ref = run("1GB", "random", per_block=False)
    got = run(memory, "random", prefetch, per_block=False)
    assert got[0] == ref[0] and np.array_equal(got[1], ref[1])


def test_the_test_has_teeth():
    """Adding in visiting order is not bitwise stable across orders: the fold by block id
    of per-block accumulators matters."""
    seq = run("1GB", "sequential", per_block=False)
    rnd = run("1GB", "random", per_block=False)
    assert not np.array_equal(seq[1], rnd[1])
    np.testing.assert_allclose(seq[1], rnd[1], rtol=1e-9)


def test_fold_order_is_block_id_then_occurrence():
    seen = []

    def fold(total, part):
        seen.append(int(part[0]))
    sched = PassScheduler(store())
    sched.map_reduce(lambda b, v, a, acc: acc["p"].__setitem__(0, b.id * 10 + b.position),
                     order=[5, 3, 5, 1],
                     acc={"p": Accumulator(1, fold, per_block=True, init=0.0)})
    assert seen == [13, 31, 50, 52]


def test_accumulator_ops_and_empty_sweeps():
    sched = PassScheduler(store())
    r = sched.map_reduce(lambda b, v, a, acc: (acc["rows"].__iadd__(b.n_rows),
                                               acc["most"].__setitem__((), max(acc["most"],
                                                                               b.n_rows))),
                         acc={"rows": Accumulator(()), "most": Accumulator((), "max")},
                         order="random")
    assert r["rows"] == 600 and r["most"] == 9
    assert sched.map_reduce(lambda b, *_: None) == {}
    r = sched.map_reduce(lambda b, v, a, acc: None, active=np.zeros(67, dtype=bool),
                         acc={"s": Accumulator(2), "m": Accumulator(2, "min")})
    np.testing.assert_array_equal(r["s"], [0, 0])
    np.testing.assert_array_equal(r["m"], [np.inf, np.inf])


def test_accumulator_specs_are_checked():
    from streamsvm.exceptions import InvalidParameterError
    with pytest.raises(InvalidParameterError, match="'op'"):
        Accumulator(3, "mean")
    with pytest.raises(InvalidParameterError, match="needs 'init'"):
        Accumulator(3, lambda t, p: None)
    with pytest.raises(InvalidParameterError, match="Accumulator"):
        PassScheduler(store()).map_reduce(lambda *a: None, acc={"x": np.zeros(3)})


# -- the pairwise tree of reduction groups (what makes a cluster's passes bit-identical) ---

def _groups_fold(parts, present_ids, groups, split):
    """Fold run partials as workers owning group ranges split at ``split`` would, the
    client completing the tree from their subtrees (visits of a group in block order)."""
    from streamsvm.schedule._reduce import Folder, GroupRuns
    specs = {"g": Accumulator(parts.shape[1])}
    client = Folder(specs, present_ids, groups)
    bounds = [0, *split, int(groups.max()) + 1]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        worker = GroupRuns(specs, present_ids, groups)
        for b in present_ids:
            if lo <= groups[b] < hi:
                worker.arrays(b)["g"] += parts[b]
                worker.done(b)
        client.add_nodes(worker.nodes())
    return client.result()["g"]


@pytest.mark.parametrize("n_blocks", [1, 2, 5, 32, 45, 100])
def test_reduction_groups_are_consecutive_and_balanced(n_blocks):
    from streamsvm.schedule._reduce import N_GROUPS, reduction_groups
    sizes = np.random.default_rng(n_blocks).integers(0, 50, n_blocks)
    g = reduction_groups(sizes)
    assert g[0] == 0 and np.all(np.diff(g) >= 0) and np.all(np.diff(g) <= 1)
    assert 1 <= g.max() + 1 <= min(n_blocks, N_GROUPS)
    rows = np.bincount(g, weights=sizes)
    assert rows.max() <= sizes.sum() / min(n_blocks, N_GROUPS) + sizes.max()
    even = reduction_groups(np.full(n_blocks, 7))
    assert even.max() + 1 == min(n_blocks, N_GROUPS)
    assert np.ptp(np.bincount(even)) <= 1


def test_any_split_into_worker_ranges_folds_to_the_same_bits():
    """Values of wildly different magnitudes (so that any other summation order shows):
    one process, and 2..5 workers owning any contiguous group ranges, give the same bits;
    a skipped group (an ``active`` mask) is skipped identically; a plain left fold differs."""
    from streamsvm.schedule._reduce import reduction_groups
    rng = np.random.default_rng(3)
    n_blocks = 90
    parts = rng.standard_normal((n_blocks, 7)) * 10.0 ** rng.integers(-8, 9, (n_blocks, 7))
    groups = reduction_groups(np.full(n_blocks, 10))
    n_groups = int(groups.max()) + 1
    for ids in (np.arange(n_blocks), np.flatnonzero(rng.random(n_blocks) < 0.6)):
        one = _groups_fold(parts, ids, groups, [])
        for n_workers in (2, 3, 5):
            for _ in range(5):
                split = sorted(rng.choice(np.arange(1, n_groups), n_workers - 1, replace=False))
                np.testing.assert_array_equal(_groups_fold(parts, ids, groups, split), one)
        np.testing.assert_allclose(one, parts[ids].sum(axis=0), rtol=1e-12,
                                   atol=1e-12 * np.abs(parts).max())
    left = np.zeros(7)
    for p in parts:
        left += p
    assert not np.array_equal(left, _groups_fold(parts, np.arange(n_blocks), groups, []))


def test_the_local_pass_folds_along_the_same_tree():
    """map_reduce on the local backend equals the tree fold of its blocks' partials, over
    the store's groups (as many as its size next to its width allows)."""
    from streamsvm.schedule._reduce import group_count, reduction_groups
    s = store()
    sched = PassScheduler(s, memory="1GB", seed=1)
    parts = []

    def grad_only(block, views, args, acc):
        g = np.zeros(40)
        csr_rmatvec_add((block.indptr, block.indices, block.data), block.y * 10.0 ** (3 * (block.id % 7)), g)
        parts.append((block.id, g.copy()))
        acc["g"] += g
    r = sched.map_reduce(grad_only, acc={"g": Accumulator(40)})
    P = np.zeros((s.n_chunks, 40))
    for b, g in parts:
        P[b] = g
    n_groups = group_count(s.nnz, s.n_features, s.n_chunks)
    assert n_groups == min(32, s.nnz // (8 * 41)) > 3
    groups = reduction_groups(s.chunk_sizes(), n_groups)
    np.testing.assert_array_equal(r["g"], _groups_fold(P, np.arange(s.n_chunks), groups, [3]))
