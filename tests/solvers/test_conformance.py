"""The solver contract, checked for every registered solver and for a small reference solver
that lives in tests/ (``reference_solver.py``): parameter validation from the declared
table, chunk-size invariance, kill-and-resume identity, the estimator's parameters and
clone, the CLI's --help, and a certificate that reaches ``tol`` on real data with the
objective of the declared problem."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm as ss
from streamsvm._evaluate import evaluate
from streamsvm._train import train
from streamsvm.cli import build_parser
from streamsvm.exceptions import ConvergenceWarning, InvalidParameterError
from streamsvm.io import InMemoryStore, write_store
from streamsvm.solvers import SOLVERS
from streamsvm.solvers._base import register

from ..conftest import data_file
from .reference_solver import ReferenceGD

NAMES = sorted(SOLVERS) + ["ref-gd"]


@pytest.fixture(autouse=True, scope="module")
def reference_registered():
    register("ref-gd")(ReferenceGD)
    yield
    SOLVERS.pop("ref-gd", None)


@pytest.fixture(scope="module")
def data():
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_svmlight_file(str(data_file("a9a/a9a")), n_features=123)
    return sp.csr_matrix(X[:1500]), y[:1500]


def _bad_values(p):
    """Values that the parameter must refuse."""
    if p.kind == "choice":
        return ["no-such-choice", 3]
    if p.kind == "bool":
        return ["yes", 1]
    if p.kind == "class_weight":
        return [5, {1: -1.0}, "all"]
    out = ["x", None] if p.default is not None else ["x"]
    if p.low is not None:
        out.append(p.low if p.low_open else p.low - 1)
    if p.high is not None:
        out.append(p.high + 1)
    if p.kind == "int":
        out.append(1.5)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_parameters_are_validated_from_the_table(name):
    cls = SOLVERS[name]
    solver = cls()
    assert solver.get_params() == {p.name: p.default for p in cls.params}
    for p in cls.params:
        for bad in _bad_values(p):
            with pytest.raises(InvalidParameterError, match=f"'{p.name}"):
                cls(**{p.name: bad})
    with pytest.raises(InvalidParameterError, match="'bogus'"):
        cls(bogus=1)


def _fit(name, store, **kw):
    kw.setdefault("max_passes", max(400, SOLVERS[name]().max_passes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return train(store, solver=name, **kw)


@pytest.mark.parametrize("name", NAMES)
def test_chunk_size_invariance(name, data, tmp_path):
    """1 row per chunk, a ragged last chunk, one chunk: the same optimum (within tol)."""
    X, y = data
    objectives = []
    for chunk_rows in (1, 7 * 53, 1500):
        store = write_store(tmp_path / f"{chunk_rows}.zarr", X, y, chunk_rows=chunk_rows,
                            dtype="float64")
        model, res = _fit(name, store)
        assert res.converged, (name, chunk_rows)
        objectives.append(evaluate(model, store)["objective"])
    tol = SOLVERS[name]().tol
    assert max(objectives) - min(objectives) <= 2 * tol * min(objectives)


def check_kill_and_resume(fit, tmp_path, stops=(1, 3)):
    """``fit(**kw) -> (model, result)`` stopped after each of ``stops`` iterations (a
    checkpoint, then KeyboardInterrupt) and resumed gives the uninterrupted run's model,
    passes and history length."""
    ref, ref_res = fit()
    for stop_after in stops:
        calls = {"n": 0}

        def stop():
            calls["n"] += 1
            return calls["n"] >= stop_after
        ckpt = tmp_path / f"ck{stop_after}"
        with pytest.raises(KeyboardInterrupt):
            fit(checkpoint=str(ckpt), should_stop=stop)
        model, res = fit(checkpoint=str(ckpt), resume=True)
        np.testing.assert_array_equal(model.coef, ref.coef)
        np.testing.assert_array_equal(model.intercept, ref.intercept)
        assert res.passes == ref_res.passes and len(res.history) == len(ref_res.history)


@pytest.mark.parametrize("name", NAMES)
def test_kill_and_resume_is_bit_identical(name, data, tmp_path):
    X, y = data
    store = InMemoryStore(X, y, chunk_rows=300)
    check_kill_and_resume(lambda **kw: _fit(name, store, memory="64MB", **kw), tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_estimator_parameters_and_clone(name, data):
    """Every parameter of the solver is in the estimator's signature, at the solver's default
    or at None (solvers disagree: the chosen solver's own); a fit gives the solver exactly
    its defaults; clone copies; unknown names are refused."""
    import inspect
    sklearn_base = pytest.importorskip("sklearn.base")
    table = SOLVERS[name].param_table()
    signature = inspect.signature(ss.LinearSVC.__init__).parameters
    est = ss.LinearSVC(solver=name, memory="64MB")
    params = est.get_params()
    assert {"solver", "memory", "random_state", "checkpoint", "chunk_rows"} <= set(params)
    assert set(params) == set(signature) - {"self"}
    for k, p in table.items():
        assert params[k] is None or params[k] == p.default, k
        assert signature[k].default is params[k]
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = ss.LinearSVC(solver=name, memory="64MB", max_passes=3).fit(X[:300], y[:300])
    used = fitted.model_.params
    assert {k: used[k] for k in table if k != "max_passes"} == \
        {k: p.default for k, p in table.items() if k != "max_passes"}
    some = next(iter(table))
    est.set_params(**{some: params[some]})
    twin = sklearn_base.clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    with pytest.raises(InvalidParameterError, match="'bogus'"):
        est.set_params(bogus=1)
    with pytest.raises(TypeError, match="'bogus'"):
        ss.LinearSVC(bogus=1)


@pytest.mark.parametrize("name", NAMES)
def test_cli_help_lists_the_parameters(name):
    parser = build_parser()
    train_parser = parser._subparsers._group_actions[0].choices["train"]
    text = train_parser.format_help()
    for p in SOLVERS[name].params:
        assert p.cli_flag in text, (name, p.cli_flag)
    assert name in text


@pytest.mark.parametrize("name", NAMES)
def test_certificate_reaches_tol_with_the_declared_objective(name, data):
    X, y = data
    model, res = _fit(name, InMemoryStore(X, y, chunk_rows=500))
    tol = SOLVERS[name]().tol
    last = res.history[-1]
    assert res.converged and last["exact"]
    assert last["gap"] <= tol or (name == "ww" and last["gap_decay"] <= SOLVERS[name]().gap_decay)
    assert res.stop_value == last["gap"] and res.primal == last["primal"]
    # the primal the solver reports is the objective of its declared problem on the data
    assert evaluate(model, InMemoryStore(X, y))["objective"] == pytest.approx(res.primal,
                                                                              rel=1e-9)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("memory", [None, "1MB"], ids=["in-ram", "streamed"])
def test_training_leaves_no_reference_cycle(name, data, memory):
    """What a run built is freed when ``train`` returns, not at the cyclic collector's next
    full sweep: a cycle through a solver, the scheduler or a reduction held O(d) arrays
    (models, run accumulators) for many passes (64 MB above --memory on a 2·10^6-feature
    store)."""
    import gc
    X, y = data
    store = InMemoryStore(X, y, chunk_rows=100)
    kw = {} if memory is None else {"memory": memory}
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        _fit(name, store, max_passes=5, **kw)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = sorted({type(o).__qualname__ for o in gc.garbage
                       if type(o).__module__.startswith(("streamsvm", "tests"))})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert ours == []
