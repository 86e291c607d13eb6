"""The streamed dual CD kernel: visit order drawn in the kernel, groups of any size."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamsvm.kernels._dcd import dcd_sweep
from streamsvm.kernels import Costs


def _block(n, d, seed):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    X.data += 0.1
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0).astype(np.float32)
    return X, y


def _sweep(blocks, active, seed, k=1, C=1.0, d=40, W=None, slots=2):
    """Run dcd_sweep on blocks in ``slots`` slots (from ``W``, default 0); returns
    (W, alphas, actives, steps)."""
    n_slots = len(blocks)
    bl = blocks + [blocks[0]] * (slots - n_slots)
    acts = [a.copy() for a in active] + [active[0]] * (slots - n_slots)
    alphas = [np.zeros((X.shape[0], k)) for X, _ in bl]
    W = np.zeros((d + 1, k)) if W is None else W.copy()      # the bias weight last
    model = (W, np.zeros((d, k)), np.zeros((k, 2)))
    prob = Costs(np.array([1], np.int32), np.full(k, C), np.full(k, C), False, 1.0)
    pg = np.zeros((k, 3))
    pg[:, 0], pg[:, 1] = -np.inf, np.inf
    work = np.empty(sum(X.shape[0] for X, _ in blocks), dtype=np.int64)
    steps = dcd_sweep(tuple((X.indptr.astype(np.int64), X.indices, X.data) for X, _ in bl),
                      tuple(y for _, y in bl), tuple(zip(alphas, acts)), n_slots, False, model,
                      prob, (np.full(k, np.inf), np.full(k, -np.inf)), (pg, np.zeros((k, 3))),
                      np.array([seed], dtype=np.uint64), work)
    return W, alphas[:n_slots], acts[:n_slots], steps


def test_visits_every_active_row_once():
    blocks = [_block(50, 40, 0), _block(30, 40, 1)]
    active = [np.ones((50, 1), np.uint8), np.ones((30, 1), np.uint8)]
    active[0][::3] = 0                           # shrunk rows are not visited
    W, alphas, acts, steps = _sweep(blocks, active, seed=7)
    assert steps == int(active[0].sum() + active[1].sum())
    assert np.all(alphas[0][active[0] == 0] == 0.0)
    # from α = 0 every visited row with margin < 1 takes a step: w = Σ y α x over both blocks
    w = sum(((alphas[j][:, 0] * blocks[j][1]) @ blocks[j][0].toarray()) for j in range(2))
    np.testing.assert_allclose(W[:-1, 0], w, rtol=1e-10, atol=1e-12)
    # and the bias weight (B = 1) is Σ y α
    b = sum(alphas[j][:, 0] @ blocks[j][1] for j in range(2))
    np.testing.assert_allclose(W[-1, 0], b, rtol=1e-10, atol=1e-12)


def test_order_is_seeded_and_interleaves_the_blocks():
    blocks = [_block(60, 40, 2), _block(60, 40, 3)]
    active = [np.ones((60, 1), np.uint8), np.ones((60, 1), np.uint8)]
    a = _sweep(blocks, active, seed=11)
    b = _sweep(blocks, active, seed=11)
    c = _sweep(blocks, active, seed=12)
    np.testing.assert_array_equal(a[0], b[0])                 # same seed: same sweep
    assert not np.array_equal(a[0], c[0])                     # another order
    # the rows of both blocks are interleaved: not block 0's rows, then block 1's
    first = _sweep([blocks[0]], [active[0]], seed=11)[0]
    in_turn = _sweep([blocks[1]], [active[1]], seed=11, W=first)[0]
    assert not np.allclose(a[0], in_turn)


def test_unused_slots_are_ignored_and_groups_may_be_larger():
    X, y = _block(40, 40, 4)
    W, alphas, acts, steps = _sweep([(X, y)], [np.ones((40, 1), np.uint8)], seed=3)
    assert steps == 40
    blocks = [_block(20, 40, s) for s in (5, 6, 7)]
    active = [np.ones((20, 1), np.uint8) for _ in blocks]
    W3, alphas3, _, steps3 = _sweep(blocks, active, seed=3, slots=3)
    assert steps3 == 60
    w = sum(((alphas3[j][:, 0] * blocks[j][1]) @ blocks[j][0].toarray()) for j in range(3))
    np.testing.assert_allclose(W3[:-1, 0], w, rtol=1e-10, atol=1e-12)
