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
