"""A path of C values for every solver (one run per C, the primal solvers warm-started from
the previous C) and ``--validation``, which keeps the C of the best held-out accuracy."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm as ss
from streamsvm._train import train
from streamsvm.cli import main
from streamsvm.exceptions import InvalidParameterError
from streamsvm.io import InMemoryStore, write_store
from streamsvm.model import load_model

from .conftest import data_file

CS = [1.0, 0.01, 0.1]


@pytest.fixture(scope="module")
def a9a():
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_svmlight_file(str(data_file("a9a/a9a")), n_features=123)
    return sp.csr_matrix(X[:3000]), y[:3000]


def test_a_primal_solver_walks_the_path_warm_started(a9a):
    store = InMemoryStore(*a9a, chunk_rows=500)
    models, res = train(store, solver="newton", C_path=CS)
    assert [m.params["C"] for m in models] == CS               # the path's order
    assert "init_model" not in models[1].summary               # the smallest C: cold
    assert "init_model" in models[2].summary and "init_model" in models[0].summary
    assert res.passes == sum(m.summary["passes"] for m in models) and res.converged
    alone, _ = train(store, solver="newton", C=0.1)
    assert models[2].summary["primal"] == pytest.approx(alone.summary["primal"], rel=1e-3)


def test_a_dual_solver_trains_each_c_afresh(a9a):
    store = InMemoryStore(*a9a, chunk_rows=500)
    models, res = train(store, solver="dcd", C_path=CS)
    for m, C in zip(models, CS):
        alone, _ = train(store, solver="dcd", C=C)
        np.testing.assert_array_equal(m.coef, alone.coef)
        assert "init_model" not in m.summary
    with pytest.raises(InvalidParameterError, match="own run and checkpoint directory"):
        train(store, solver="dcd", C_path=CS, checkpoint="unused")


def test_the_estimator_keeps_a_model_per_c(a9a):
    clf = ss.LinearSVC(solver="alm", C_path=CS).fit(*a9a)
    assert sorted(clf.path_) == sorted(CS) and clf.model_.params["C"] == CS[-1]


def test_validation_keeps_the_best_c(a9a, tmp_path, capsys):
    X, y = a9a
    write_store(tmp_path / "train.zarr", X[:2000], y[:2000], chunk_rows=500)
    write_store(tmp_path / "valid.zarr", X[2000:], y[2000:], chunk_rows=500)
    base = ["train", str(tmp_path / "train.zarr"), "--C-path", "0.01,0.1,1", "-q"]
    assert main(base + ["-o", str(tmp_path / "m-{C}.json"), "--json", "--validation",
                        str(tmp_path / "valid.zarr")]) == 0
    report = json.loads(capsys.readouterr().out)
    accs = [ss.LinearSVC.from_model(str(tmp_path / f"m-{C:g}.json")).score(X[2000:], y[2000:])
            for C in (0.01, 0.1, 1.0)]
    assert [r["accuracy"] for r in report["C_search"]] == pytest.approx(accs, abs=1e-12)
    best = (0.01, 0.1, 1.0)[int(np.argmax(accs))]      # (argmax: the first, smallest C)
    assert report["chosen_C"] == best
    # -o without {C}: the chosen model alone
    assert main(base + ["-o", str(tmp_path / "best.json"), "--validation",
                        str(tmp_path / "valid.zarr")]) == 0
    out = capsys.readouterr().out
    assert f"C={best:g}: validation accuracy" in out and "(chosen)" in out
    assert load_model(tmp_path / "best.json").params["C"] == best
    assert main(["train", str(tmp_path / "train.zarr"), "-o", str(tmp_path / "x.json"), "-q",
                 "--validation", str(tmp_path / "valid.zarr")]) == 2
    assert "--validation chooses a C of --C-path" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
