"""The distributed dual loop's pieces (``solvers/_cocoa.py``, ``kernels/_cocoa.py``), in one
process: the exact step over the box, the rounds of K partitions keeping ``w = Σ α y x̄``
and an exact dual, shrinking that skips rows and a check that re-activates the violators,
and the scheduler counting only the visited rows of blocks it keeps in memory."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.io import write_store
from streamsvm.kernels import Costs
from streamsvm.kernels._cocoa import cocoa_due, cocoa_rows, cocoa_settle
from streamsvm.schedule import Accumulator, PassScheduler
from streamsvm.solvers._cocoa import _box_qp, best_steps, round_order


def _value(g, H, e):
    return g @ e - 0.5 * e @ H @ e


@pytest.mark.parametrize("seed", range(40))
def test_the_step_is_the_best_point_of_the_box(seed):
    """``_box_qp`` against a fine grid of the box: never worse, and never below the
    workers' own changes (1, 1) or staying put (0, 0)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(2, 2)) * rng.uniform(0.1, 3)
    H = A @ A.T + (0.0 if seed % 3 == 0 else rng.uniform(0, 1)) * np.eye(2)
    g = rng.normal(size=2) * 3
    hi = np.array([1.0, rng.choice([1.0, 1.5, 4.0, 1e3])])
    e = _box_qp(g, H, hi)
    assert np.all(e >= 0) and np.all(e <= hi)
    grid = np.stack(np.meshgrid(np.linspace(0, hi[0], 201),
                                np.linspace(0, min(hi[1], 20.0), 401)), -1).reshape(-1, 2)
    best_grid = max(_value(g, H, x) for x in grid)
    v = _value(g, H, e)
    assert v >= best_grid - 1e-9 * max(1.0, abs(best_grid))
    assert v >= _value(g, H, np.ones(2)) - 1e-12 and v >= -1e-12


def _problem(seed=0, n=300, d=25, squared=False, C=0.5):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, format="csr", random_state=seed, dtype=np.float64)
    X.data = np.abs(X.data) + 0.1            # correlated rows, as one-hot data are
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > np.median(X @ rng.normal(
        size=d)), 1, -1).astype(np.float64)
    prob = Costs(np.array([1], np.int32), np.array([C]), np.array([C]), squared, 1.0)
    return X, y, prob


def _rounds(X, y, prob, K, n_rounds, sigma, check_every=0):
    """``n_rounds`` rounds of the loop on ``K`` contiguous partitions, as the workers and the
    client run them; yields after each round's start what the client knows."""
    n, d = X.shape
    Xb = sp.hstack([X, np.full((n, 1), prob.B)]).tocsr()
    parts = np.array_split(np.arange(n), K)
    alpha, dalpha = np.zeros((n, 1)), np.zeros((n, 1))
    active = np.ones((n, 1), np.uint8)
    W = np.zeros((d + 1, 1))
    eta = np.ones((1, 2))
    thr = np.array([[np.inf], [-np.inf]])
    rng = np.random.default_rng(1)
    for r in range(n_rounds):
        check = bool(check_every) and r > 0 and r % check_every == 0
        acc = {k: np.zeros((d + 1, 1)) for k in ("dW", "dWb", "dzu")}
        s, room = np.zeros((1, 11)), np.full(1, np.inf)
        pg = np.array([[-np.inf, np.inf]])
        flags_before = active.copy()
        for part in parts:
            sub = X[part]
            Xs = (sub.indptr, sub.indices, sub.data)
            a, da, ac = alpha[part], dalpha[part], active[part]
            cocoa_settle(y[part], a, da, eta, prob, s)
            dW = np.zeros((d + 1, 1))
            cocoa_rows(Xs, False, y[part], rng.permutation(len(part)), prob, W, sigma, check,
                       (a, da, ac, np.ones(len(part), np.uint8)), (thr[0], thr[1]), np.empty((2, 1)), dW, acc["dWb"],
                       acc["dzu"], s, pg, room)
            acc["dW"] += dW
            alpha[part], dalpha[part], active[part] = a, da, ac
        yield dict(alpha_start=None, W=W.copy(), s=s.copy(), flags=flags_before, check=check,
                   Xb=Xb, alpha=alpha, dalpha=dalpha, active=active, eta=eta.copy(), acc=acc)
        thr[0] = np.where(pg[:, 0] > 0, pg[:, 0], np.inf)
        thr[1] = np.where(pg[:, 1] < 0, pg[:, 1], -np.inf)
        dWb = acc["dWb"]
        eta = best_steps(W, (dWb, acc["dW"] - dWb), s[:, 4:10], room)
        W = W + eta[:, 0] * dWb + eta[:, 1] * (acc["dW"] - dWb)


@pytest.mark.parametrize("squared", [False, True])
def test_rounds_keep_w_the_image_of_the_duals_and_the_dual_exact(squared):
    """After each round's settling, ``w = Σ α y x̄`` holds (the steps taken row by row as
    the client took them on the sums), every α is in its box, the dual the round sums is
    the dual of those α, and it never decreases."""
    X, y, prob = _problem(squared=squared)
    C = prob.Cp[0]
    duals = []
    prev = None
    for st in _rounds(X, y, prob, K=3, n_rounds=25, sigma=2.0):
        if prev is not None:
            # the α the round started from: its settled values (the epoch changed them after)
            a0 = st["alpha"][:, 0] - st["dalpha"][:, 0]
            w = st["Xb"].T @ (a0 * y)
            np.testing.assert_allclose(st["W"][:, 0], w, atol=1e-9 * max(1, np.abs(w).max()))
            assert a0.min() >= 0 and (squared or a0.max() <= C * (1 + 1e-12))
            D = 0.5 / C if squared else 0.0
            dual = a0.sum() - 0.5 * w @ w - 0.5 * D * (a0 ** 2).sum()
            assert st["s"][0, 2] - 0.5 * st["W"][:, 0] @ st["W"][:, 0] - st["s"][0, 3] == \
                pytest.approx(dual, rel=1e-10, abs=1e-10)
            duals.append(dual)
        prev = st
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(duals, duals[1:]))
    assert duals[-1] > duals[0]


def test_shrunk_rows_are_skipped_and_a_check_reactivates_the_violators():
    """A round visits exactly the pairs active at its start (``s[:, 1]``); a check sums
    every row's loss at ``w`` (the exact primal) and re-activates the shrunk rows whose
    optimality condition fails at ``w``; ``zu`` stays ``Σ C y x̄`` over the rows shrunk at C."""
    X, y, prob = _problem(seed=3, C=1.0)
    C = prob.Cp[0]
    zu = np.zeros(X.shape[1] + 1)
    shrunk_seen = False
    for st in _rounds(X, y, prob, K=2, n_rounds=40, sigma=1.5, check_every=7):
        before = st["flags"][:, 0].astype(bool)
        assert st["s"][0, 1] == (before.sum() if not st["check"] else
                                 (before | st["active"][:, 0].astype(bool)).sum())
        shrunk_seen |= not before.all()
        W = st["W"][:, 0]
        if st["check"]:
            m = y * (st["Xb"] @ W)
            assert st["s"][0, 0] == pytest.approx(C * np.maximum(0, 1 - m).sum(), rel=1e-10)
        zu += st["acc"]["dzu"][:, 0]
        a = st["alpha"][:, 0] - st["dalpha"][:, 0]
        at_c = (st["active"][:, 0] == 0) & (a == C)
        np.testing.assert_allclose(zu, st["Xb"].T @ (C * y * at_c), atol=1e-9)
    assert shrunk_seen


def test_a_round_that_is_not_a_check_visits_the_due_rows_only():
    """A sweep over the active rows is cut in parts (several workers): ``cocoa_due`` flags
    the rows of the next part with an active pair, and a round visits exactly those (a
    check visits every row)."""
    X, y, prob = _problem(seed=2)
    n, d = X.shape
    active = np.ones((n, 1), np.uint8)
    active[::3] = 0
    slot = np.random.default_rng(0).integers(0, 3, n)
    due, live = np.zeros(n, np.uint8), np.zeros(1)
    cocoa_due(active, slot, 1, due, live)
    np.testing.assert_array_equal(due, (active[:, 0] != 0) & (slot == 1))
    assert live[0] == np.count_nonzero(active)
    alpha, dalpha = np.zeros((n, 1)), np.zeros((n, 1))
    for check, visited in ((False, due.sum()), (True, None)):
        s, pg = np.zeros((1, 11)), np.array([[-np.inf, np.inf]])
        a0 = alpha.copy()
        cocoa_rows((X.indptr, X.indices, X.data), False, y, np.arange(n), prob,
                   np.zeros((d + 1, 1)), 1.0, check, (alpha, dalpha, active, due),
                   (np.full(1, np.inf), np.full(1, -np.inf)), np.empty((2, 1)),
                   np.zeros((d + 1, 1)), np.zeros((d + 1, 1)), np.zeros((d + 1, 1)), s, pg,
                   np.full(1, np.inf))
        if check:                       # every row's loss at w (= 0 here): C each
            assert s[0, 0] == pytest.approx(prob.Cp[0] * n)
        else:
            assert s[0, 1] == visited and s[0, 0] == pytest.approx(prob.Cp[0] * visited)
            np.testing.assert_array_equal(alpha[due == 0], a0[due == 0])
            assert (alpha[due == 1] != a0[due == 1]).any()


def test_map_reduce_counts_only_the_flagged_rows_of_blocks_kept_in_memory(tmp_path):
    """``map_reduce(visits=state)``: a block the cache keeps counts its flagged rows, a
    block that streams all of its rows."""
    X = sp.random(400, 10, density=0.3, format="csr", random_state=0)
    y = np.where(np.arange(400) % 2, 1.0, -1.0)
    store = write_store(tmp_path / "s.zarr", X, y, chunk_rows=100)

    def noop(block, views, args, acc):
        acc["n"][0] += block.n_rows

    for memory, kept in (("64MB", True), ("0.2MB", False)):
        sched = PassScheduler(store, memory=memory, block_rows=100)
        try:
            if not kept:
                sched._backend.cache.resize(0)
            flags = sched.state("flags", np.uint8, width=2, fill=0)
            flags.values[::4, 1] = 1            # a quarter of the rows flagged
            res = sched.map_reduce(noop, acc={"n": Accumulator(1)}, visits=flags)
            assert res["n"][0] == 400
            assert res.visits == (100 if kept else 400)
        finally:
            sched.close()


def test_a_round_orders_its_due_rows_only_and_a_check_every_row():
    """``round_order``: between checks a random order of exactly the due rows (each order
    of them as likely: a permutation drawn over them), in a check every row."""
    due = np.zeros(1000, np.uint8)
    due[np.random.default_rng(1).choice(1000, 137, replace=False)] = 1
    order = round_order(np.random.default_rng(5), due, False)
    assert order.dtype == np.int64
    np.testing.assert_array_equal(np.sort(order), np.flatnonzero(due))
    again = round_order(np.random.default_rng(5), due, False)
    np.testing.assert_array_equal(order, again)                 # seeded
    other = round_order(np.random.default_rng(6), due, False)
    assert not np.array_equal(order, other)
    firsts = [round_order(np.random.default_rng(s), due[:40], False)[0] for s in range(400)]
    counts = np.bincount(firsts, minlength=40)[np.flatnonzero(due[:40])]
    assert counts.min() > 0                 # every due row comes first in some round
    every = round_order(np.random.default_rng(5), due, True)
    np.testing.assert_array_equal(np.sort(every), np.arange(1000))
    # most rows due: every row (the kernel skips the others), no gather at random places
    most = round_order(np.random.default_rng(5), 1 - due, False)
    np.testing.assert_array_equal(most, np.random.default_rng(5).permutation(1000))
