"""``avsf`` (spec_003): the optimum against dcd and LIBLINEAR, streamed with the hot cache
against the in-memory epochs, chunk order, the paper's ε rule with its exact check, one-vs-
rest, resume with hot rows."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from streamsvm._train import train
from streamsvm.exceptions import ConvergenceWarning, InvalidParameterError
from streamsvm.io import InMemoryStore

from .test_conformance import check_kill_and_resume
from .test_dcd import liblinear_objective
from .test_newton import _load


def _fit(X, y, solver="avsf", chunk_rows=500, memory="1GB", **kw):
    kw.setdefault("max_passes", 3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return train(InMemoryStore(X, y, chunk_rows=chunk_rows), solver=solver, memory=memory,
                     **kw)


@pytest.mark.parametrize("name,n", [("a9a/a9a", 2000), ("mushrooms/mushrooms", 2000)])
@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_same_optimum_as_dcd_and_liblinear(name, n, C):
    X, y = _load(name, n)
    y = np.where(y == y.max(), 1.0, -1.0)
    # a9a at C = 100 is AVSF's worst case here (low d, many duplicate rows, like the
    # paper's cover type): a gap of 1e-5 takes it 100,000 epochs on 1,000 rows (dcd 15,000
    # visits of a pass), so the test asks 1e-3 there (tools/bench.py has the full runs)
    tol = 1e-3 if (name, C) == ("a9a/a9a", 100.0) else 1e-6
    _, res = _fit(X, y, C=C, loss="hinge", tol=tol, max_passes=20000)
    assert res.converged
    _, ref = _fit(X, y, solver="dcd", C=C, loss="hinge", tol=1e-6)
    assert abs(res.primal - ref.primal) <= max(1e-4, tol) * abs(ref.primal)
    # LIBLINEAR -e 1e-6 stops at its 1,000-epoch cap on some of these (a9a, C = 1: primal
    # 702.499 against 702.147 here): never worse than LIBLINEAR by more than 1e-4
    lib, _, _ = liblinear_objective(X, y, C, "hinge")
    assert res.primal - lib <= max(1e-4, tol) * abs(lib)


@pytest.fixture(scope="module")
def a9a():
    X, y = _load("a9a/a9a", 6000)
    return X, y


def test_streamed_with_the_hot_cache_keeps_the_epochs_of_the_paper(a9a):
    """spec §3.4 item 3 / §6.6: chunks of 1/10 and 1/50 of the rows, read under a small
    budget, reach the ε test in at most 1.5x the in-memory epochs and at the same optimum;
    without the cache, chunk order costs several times more epochs."""
    X, y = a9a
    n = X.shape[0]
    kw = dict(C=1.0, loss="hinge", eps=0.01, tol=1e-12)
    _, ram = _fit(X, y, chunk_rows=2000, **kw)
    assert ram.converged and {h["kind"] for h in ram.history} == {"slab", "check"}
    for chunk in (n // 10, n // 50):
        _, res = _fit(X, y, chunk_rows=chunk, memory="1MB", **kw)
        kinds = {h["kind"] for h in res.history}
        assert res.converged and "stream" in kinds and "slab" not in kinds
        assert max(h["hot_rows"] for h in res.history) > 0
        assert res.n_iter <= 1.5 * ram.n_iter, (chunk, res.n_iter, ram.n_iter)
        assert abs(res.dual - ram.dual) <= 1e-4 * abs(ram.dual)
    # dual cached loops: extra visits of hot rows (rows enter the cache during the pass)
    _, extra = _fit(X, y, chunk_rows=n // 50, memory="1MB", cache_visits=0.3, **kw)
    assert extra.converged and abs(extra.dual - ram.dual) <= 1e-4 * abs(ram.dual)
    assert extra.history[-1]["steps"] > n * sum(h["kind"] != "check" for h in extra.history)
    _, cold = _fit(X, y, chunk_rows=n // 50, memory="1MB", cache=0.0, max_passes=2 * ram.n_iter,
                   **kw)
    assert max(h["hot_rows"] for h in cold.history) == 0
    assert not cold.converged


def test_eps_rule_ends_on_an_exact_check_after_a_uniform_epoch(a9a):
    X, y = a9a
    for rule in ("liblinear", "max_violation"):
        _, res = _fit(X, y, C=10.0, loss="squared_hinge", eps=0.05, tol=1e-12, stop_rule=rule)
        h = res.history
        assert res.converged and h[-1]["kind"] == "check" and h[-1]["exact"]
        assert h[-1]["pg_spread"] <= 0.05
        # every epoch makes exactly ℓ steps
        steps = [e["steps"] for e in h if e["kind"] != "check"]
        assert steps == [X.shape[0] * (j + 1) for j in range(len(steps))]


def test_default_rule_tightens_eps_until_the_gap_meets_tol(a9a):
    X, y = a9a
    _, res = _fit(X, y, C=1.0, loss="hinge", tol=1e-4)
    checks = [h for h in res.history if h["kind"] == "check"]
    assert res.converged and checks[-1]["gap"] <= 1e-4
    assert all(c["gap"] > 1e-4 for c in checks[:-1])
    eps = [h["eps"] for h in res.history]
    assert eps[0] == 0.1 and eps == sorted(eps, reverse=True)


def test_one_vs_rest_matches_dcd():
    X, y = _load("dna/dna.scale", 1200)
    _, res = _fit(X, y, C=0.5, loss="squared_hinge", tol=1e-5)
    _, ref = _fit(X, y, solver="dcd", C=0.5, loss="squared_hinge", tol=1e-5)
    assert res.converged and abs(res.primal - ref.primal) <= 1e-4 * ref.primal
    _, streamed = _fit(X, y, C=0.5, loss="squared_hinge", tol=1e-5, chunk_rows=100,
                       memory="600KB")
    assert streamed.converged and abs(streamed.primal - ref.primal) <= 1e-4 * ref.primal
    assert "stream" in {h["kind"] for h in streamed.history}


def test_kill_and_resume_with_hot_rows_is_bit_identical(a9a, tmp_path):
    X, y = a9a
    store = InMemoryStore(X[:3000], y[:3000], chunk_rows=100)

    def fit(**kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return train(store, solver="avsf", memory="1MB", C=10.0, loss="hinge",
                         max_passes=40, **kw)
    _, res = fit()
    assert max(h["hot_rows"] for h in res.history[:12]) > 0      # rows hot at the stops
    check_kill_and_resume(fit, tmp_path, stops=(4, 11))


def test_lazy_reading_skips_cold_blocks_and_keeps_their_visits(a9a, tmp_path):
    """spec §3.7 (``lazy``, off by default): blocks whose owed visits stay below the
    threshold are not read in an epoch, fewer passes for the epochs, the same optimum; the
    visits of the skipped epochs are made later (steps made + steps owed = ℓ per epoch until
    a reset); kill-and-resume stays bit-identical."""
    X, y = a9a
    n = 3000
    store = InMemoryStore(X[:n], y[:n], chunk_rows=100)
    kw = dict(C=1.0, loss="hinge", tol=1e-3, memory="400KB", max_passes=3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, eager = train(store, solver="avsf", **kw)
        _, lazy = train(store, solver="avsf", lazy=0.6, **kw)
    assert eager.converged and lazy.converged
    assert {h["kind"] for h in lazy.history} == {"stream", "check"}
    assert abs(lazy.primal - eager.primal) <= 1e-3 * eager.primal
    assert eager.passes >= eager.n_iter                     # every block read every epoch
    assert lazy.passes < 0.9 * eager.passes
    streamed = [h for h in lazy.history if h["kind"] == "stream"]
    assert any(h2["passes"] - h1["passes"] < 0.9 for h1, h2 in zip(streamed, streamed[1:]))

    from streamsvm.schedule import PassScheduler
    from streamsvm.solvers import SOLVERS
    slv = SOLVERS["avsf"](C=1.0, loss="hinge", lazy=0.6, eps=1e-9)
    with PassScheduler(store, memory="400KB", seed=0) as sched:
        slv.start(sched)
        for _ in range(12):
            slv.step(sched)
        assert slv.epochs == 12 and not slv.pending
        assert slv.steps + slv.owed.sum() == 12 * n            # one model: ℓ per epoch
        assert slv.owed.sum() > 0
        slv.close()

    def fit(**k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return train(store, solver="avsf", memory="400KB", C=10.0, loss="hinge",
                         lazy=0.6, max_passes=30, **k)
    check_kill_and_resume(fit, tmp_path, stops=(3, 9))


def test_bad_preference_bounds_are_refused():
    X, y = _load("a9a/a9a", 50)
    with pytest.raises(InvalidParameterError, match="p_min"):
        _fit(X, y, p_min=5.0, p_max=2.0)


def test_a_budget_without_room_for_the_hot_rows_is_reported(caplog):
    X, y = _load("mushrooms/mushrooms", 3000)
    with caplog.at_level("WARNING", logger="streamsvm.solvers.avsf"):
        _fit(X, y, chunk_rows=300, memory="120KB", max_passes=2)
    assert "room for about 30 hot rows of the 300 asked" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="streamsvm.solvers.avsf"):
        _fit(X, y, chunk_rows=300, max_passes=2)
    assert "hot rows" not in caplog.text
