"""AVSF kernels (spec_003 §6 items 1, 2): Algorithm 4's schedule and the gain of a step."""

from __future__ import annotations

import numpy as np
import pytest

from streamsvm.kernels._avsf import NSRC, alg4_counts, avsf_codes, avsf_visits
from streamsvm.kernels import Costs


def _state(seed):
    return np.array([seed], dtype=np.uint64)


def test_schedule_has_exactly_the_budget_and_uniform_preferences_give_a_permutation():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        w = np.exp(rng.uniform(np.log(0.05), np.log(20), n))
        w[rng.random(n) < 0.1] = 0.0                      # rows the cache schedules
        if not w.any():
            w[0] = 1.0
        L = int(rng.integers(0, 3 * n))
        counts = np.empty(n, np.int64)
        assert alg4_counts(w, L, counts, _state(trial)) == L
        assert counts.sum() == L and counts.min() >= 0 and not counts[w == 0].any()
        ones = np.ones(n)
        assert alg4_counts(ones, n, counts, _state(trial)) == n
        assert np.all(counts == 1)                        # m = 1 exactly at every index
    assert alg4_counts(np.zeros(5), 7, np.empty(5, np.int64), _state(1)) == 0


def test_schedule_counts_are_unbiased_at_one_and_at_two_levels():
    rng = np.random.default_rng(1)
    n, L, reps = 60, 60, 20000
    p = np.exp(rng.uniform(np.log(0.05), np.log(20), n))
    expect = L * p / p.sum()
    blocks = np.array_split(np.arange(n), 6)
    one, two = np.zeros(n), np.zeros(n)
    counts, top = np.empty(n, np.int64), np.empty(len(blocks), np.int64)
    state = _state(5)
    for _ in range(reps):
        alg4_counts(p, L, counts, state)
        one += counts
        alg4_counts(np.array([p[b].sum() for b in blocks]), L, top, state)   # block budgets
        assert top.sum() == L
        for b, Lb in zip(blocks, top):
            sub = np.empty(len(b), np.int64)
            assert alg4_counts(p[b], int(Lb), sub, state) == Lb
            two[b] += sub
    # the standard error of a mean count is below sqrt(expect / reps)
    se = np.sqrt(np.maximum(expect, 0.05) / reps)
    assert np.all(np.abs(one / reps - expect) < 5 * se)
    assert np.all(np.abs(two / reps - expect) < 5 * se)


def test_codes_skip_cached_rows_and_give_each_model_its_budget():
    p = np.ones((10, 2))
    cached = np.zeros(10, np.uint8)
    cached[[2, 5]] = 1
    out = np.empty(100, np.int64)
    end = avsf_codes(p, cached, np.array([8, 3]), 1, out, 0, np.empty(10), _state(3))
    assert end == 11
    codes = out[:end]
    assert np.all(codes % NSRC == 1)
    rc = codes // NSRC
    rows, models = rc // 2, rc % 2
    assert np.sum(models == 0) == 8 and np.sum(models == 1) == 3
    assert not np.isin(rows, [2, 5]).any()
    assert sorted(rows[models == 0]) == [0, 1, 3, 4, 6, 7, 8, 9]   # uniform: each once


def test_codes_are_algorithm_4_unbiased_per_model_with_the_cached_rows_left_out():
    """avsf_codes writes the codes in Algorithm 4's own loop: each model gets exactly its
    budget, and a row's mean count is budget·p_i/Σp over the rows not cached."""
    rng = np.random.default_rng(7)
    n, reps = 50, 20000
    p = np.exp(rng.uniform(np.log(0.05), np.log(20), (n, 2)))
    cached = (rng.random(n) < 0.2).astype(np.uint8)
    budgets = np.array([n, 3 * n])
    out = np.empty(4 * n + 1, np.int64)
    state = _state(11)
    got = np.zeros((n, 2))
    for _ in range(reps):
        end = avsf_codes(p, cached, budgets, 0, out, 0, np.empty(n), state)
        assert end == budgets.sum()
        rc = out[:end] // NSRC
        np.add.at(got, (rc // 2, rc % 2), 1)
    w = np.where(cached[:, None] == 0, p, 0.0)
    expect = budgets * w / w.sum(axis=0)
    se = np.sqrt(np.maximum(expect, 0.05) / reps)
    assert not got[cached == 1].any()
    assert np.all(np.abs(got / reps - expect) < 5 * se)


def _dual(X, y, alpha, C, l2, B):
    """f(α) = ½‖Σ y α x̄‖² + ½ Σ D α² − Σ α (LIBLINEAR's minimized dual)."""
    Xb = np.hstack([X, np.full((len(y), 1), B)])
    w = Xb.T @ (y * alpha)
    D = 0.5 / C if l2 else 0.0
    return 0.5 * w @ w + 0.5 * D * alpha @ alpha - alpha.sum()


@pytest.mark.parametrize("l2", [False, True])
@pytest.mark.parametrize("B", [0.0, 1.0])
def test_gain_is_the_exact_decrease_of_the_dual(l2, B):
    """Δ = −μ(G + μ Q̄/2) (spec §2.4) equals f(α_old) − f(α_new), and Δ ≥ 0, for every step
    of random problems: read from Δ_ref in a first epoch of one visit (Δ_ref = Δ/ℓ, ℓ = 1)."""
    rng = np.random.default_rng(2)
    for trial in range(60):
        n, d, C = 6, 4, float(rng.choice([0.01, 1.0, 100.0]))
        X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.7)
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        U = np.inf if l2 else C
        alpha = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, min(C, 2.0), n))
        if not l2:
            alpha[rng.random(n) < 0.2] = C
        indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
        indices = np.tile(np.arange(d, dtype=np.int32), n)
        data = X.ravel().copy()
        Xc = (indptr, indices, data)
        Xb = np.hstack([X, np.full((n, 1), B)])
        wfull = Xb.T @ (y * alpha)
        W = np.append(wfull[:d], wfull[d] / B if B else 0.0).reshape(d + 1, 1)
        i = int(rng.integers(n))
        a = alpha.reshape(n, 1).copy()
        p = np.ones((n, 1))
        before = _dual(X, y, alpha, C, l2, B)
        st = np.zeros((1, 5))
        st[0, 1], st[0, 2] = -np.inf, np.inf
        codes = np.array([(i * 1 + 0) * NSRC + 0], np.int64)
        prob = Costs(np.array([1], np.int32), np.array([C]), np.array([C]), l2, B)
        avsf_visits((Xc, Xc, Xc), (y, y, y), (a, a, a), (p, p, p), codes, 1,
                    False, W, prob, (True, 0.2, 0.05, 20.0, np.log(400.0), 1.0), st)
        after = _dual(X, y, a[:, 0], C, l2, B)
        assert st[0, 0] >= 0.0
        np.testing.assert_allclose(st[0, 0], before - after, rtol=1e-9, atol=1e-12)
        assert 0.0 <= a[i, 0] <= U
        # w stays Σ y α x̄ and the kernel's sums follow α
        w2 = Xb.T @ (y * a[:, 0])
        np.testing.assert_allclose(W[:d, 0], w2[:d], atol=1e-10)
        np.testing.assert_allclose(W[d, 0] * B, w2[d], atol=1e-10)
        np.testing.assert_allclose(st[0, 3], a[i, 0] - alpha[i], atol=1e-12)


def test_zero_gain_steps_lower_the_preference_and_big_gains_raise_it():
    """Algorithm 5's ratio form after the first epoch: Δ = 0 multiplies p by e^{−c}; the
    change is clipped to [p_min, p_max]."""
    n, d = 3, 2
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = np.array([1.0, -1.0, 1.0])
    Xc = (np.arange(0, 7, 2, dtype=np.int64), np.tile(np.arange(2, dtype=np.int32), 3),
          X.ravel().copy())
    C = 1.0
    a = np.array([[C], [0.0], [0.0]])          # row 0 at the bound with a margin below 1
    W = np.append(X.T @ (y * a[:, 0]), 0.0).reshape(d + 1, 1)     # no bias
    p = np.ones((n, 1))
    st = np.array([[0.5, -np.inf, np.inf, 0.0, 0.0]])
    prob = Costs(np.array([1], np.int32), np.array([C]), np.array([C]), False, 0.0)
    codes = np.array([0 * NSRC], np.int64)     # row 0: G < 0 at α = U, PG = 0, no move
    avsf_visits((Xc,) * 3, (y,) * 3, (a,) * 3, (p,) * 3, codes, 1, False,
                W, prob, (False, 0.2, 0.05, 20.0, np.log(400.0), 1 / n), st)
    assert p[0, 0] == pytest.approx(np.exp(-0.2))
    assert st[0, 0] == pytest.approx(0.5 * (1 - 1 / n))
    st[0, 0] = 1e-9                            # a tiny reference: the next real gain saturates
    codes = np.array([1 * NSRC], np.int64)
    avsf_visits((Xc,) * 3, (y,) * 3, (a,) * 3, (p,) * 3, codes, 1, False,
                W, prob, (False, 0.2, 0.05, 20.0, np.log(400.0), 1 / n), st)
    assert p[1, 0] == 20.0
