"""map_reduce results are bitwise identical for every memory budget, prefetch and order."""

from __future__ import annotations

import numpy as np
import pytest

from streamsvm.io import InMemoryStore
from streamsvm.kernels import csr_matvec, csr_rmatvec_add
from streamsvm.schedule import PassScheduler

from .helpers import random_problem

X, Y = random_problem(n=600, d=40, density=0.4, seed=11)
W = np.random.default_rng(5).standard_normal(40)


def store():
    return InMemoryStore(X * 1e3 + 0.0, Y, chunk_rows=9)      # 67 blocks, values spread wide


def loss_and_grad(n_features):
    def func(block):
        m = np.empty(block.n_rows)
        csr_matvec(block.indptr, block.indices, block.data, W, m)
        z = np.maximum(0.0, 1.0 - block.y * m)
        g = np.zeros(n_features)
        csr_rmatvec_add(block.indptr, block.indices, block.data, -2.0 * block.y * z, g)
        return float(np.sum(z * z)), g
    return func


def one_block_bytes(s):
    return max(s.read_chunk(i).nbytes for i in range(s.n_chunks))


def run(memory, order, prefetch=2, sweeps_before=0):
    s = store()
    memory = one_block_bytes(s) if memory == "one block" else memory
    sched = PassScheduler(s, memory=memory, prefetch=prefetch, seed=1)
    for _ in range(sweeps_before):
        sched.map_reduce(lambda b: None, order="cyclic")
    result = sched.map_reduce(loss_and_grad(sched.n_features), order=order)
    assert sched.passes == sweeps_before + 1
    return result


def test_reference_is_correct():
    loss, g = run("1GB", "sequential")
    Xs = X * 1e3
    z = np.maximum(0.0, 1.0 - Y * (Xs @ W))
    assert loss == pytest.approx(np.sum(z * z), rel=1e-12)
    np.testing.assert_allclose(g, -2.0 * Xs.T @ (Y * z), rtol=1e-10)


@pytest.mark.parametrize("memory", ["1GB", "one block", 0])
@pytest.mark.parametrize("order", ["sequential", "random", "cyclic", "reversed"])
@pytest.mark.parametrize("prefetch", [0, 3])
def test_bitwise_identical(memory, order, prefetch):
    ref_loss, ref_g = run("1GB", "sequential")
    sweeps_before = 0
    if order == "reversed":
        order = np.arange(67)[::-1]
    elif order == "cyclic":
        sweeps_before = 1                        # the descending sweep of "cyclic"
    loss, g = run(memory, order, prefetch, sweeps_before)
    assert loss == ref_loss
    assert np.array_equal(g, ref_g)


def test_the_test_has_teeth():
    """Folding in visiting order would not be bitwise stable: the fixed order matters."""
    s = store()
    sched = PassScheduler(s, memory="1GB", seed=1)
    func = loss_and_grad(sched.n_features)
    partials = {b.id: func(b)[1] for b in sched.blocks()}
    order = np.random.default_rng(0).permutation(len(partials))
    in_id_order = sum(partials[b] for b in range(len(partials)))
    in_random_order = sum(partials[b] for b in order)
    assert not np.array_equal(in_id_order, in_random_order)


def test_fold_order_is_block_id_then_occurrence():
    def fold_order(order):
        return PassScheduler(store()).map_reduce(
            lambda b: (b.id, b.position), order=order, init=[],
            combine=lambda acc, p: acc + [p])

    assert fold_order([5, 3, 5, 1]) == [(1, 3), (3, 1), (5, 0), (5, 2)]
    assert fold_order([1, 3, 5, 5]) == [(1, 0), (3, 1), (5, 2), (5, 3)]
    assert [b for b, _ in fold_order("random")] == list(range(67))


def test_reduction_structures_init_and_combine():
    s = store()
    sched = PassScheduler(s)
    out = sched.map_reduce(lambda b: {"n": b.n_rows, "v": (np.ones(2), b.id)},
                           init={"n": 1000, "v": (np.zeros(2), 0)})
    assert out["n"] == 1000 + 600 and out["v"][1] == sum(range(67))
    np.testing.assert_array_equal(out["v"][0], [67, 67])
    assert sched.map_reduce(lambda b: b.n_rows, combine=max, order="random") == 9
    assert sched.map_reduce(lambda b: None) is None
    assert sched.map_reduce(lambda b: 1.0, active=np.zeros(67, dtype=bool)) is None
    assert sched.map_reduce(lambda b: 1.0, active=np.zeros(67, dtype=bool), init=0.5) == 0.5


def test_partials_are_not_modified():
    s = store()
    keep = []

    def func(block):
        keep.append(np.full(3, float(block.id)))
        return keep[-1]

    total = PassScheduler(s).map_reduce(func, order="random")
    np.testing.assert_array_equal(total, np.full(3, float(sum(range(67)))))
    for arr in keep:
        assert np.all(arr == arr[0]) and arr[0] in range(67)
    assert sorted(arr[0] for arr in keep) == list(range(67))


def test_mismatched_partials_raise():
    sched = PassScheduler(store())
    with pytest.raises(TypeError, match="every partial must have the structure"):
        sched.map_reduce(lambda b: (1.0, 2.0) if b.id else {"a": 1.0})
