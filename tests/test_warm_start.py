"""Warm start (``--init-model``, ``init_model=``, ``warm_start=True``): the primal solvers
begin at a model's weights and reach the same certified optimum in fewer passes; the dual
solvers and mismatched models are refused before any pass; the starting model is part of
the run's identity."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm as ss
from streamsvm._train import train
from streamsvm.cli import main
from streamsvm.exceptions import CheckpointError, ConvergenceWarning, InvalidParameterError
from streamsvm.io import InMemoryStore, write_store
from streamsvm.model import load_model

from .conftest import data_file


@pytest.fixture(scope="module")
def a9a():
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_svmlight_file(str(data_file("a9a/a9a")), n_features=123)
    return sp.csr_matrix(X[:6000]), y[:6000]


@pytest.mark.parametrize("solver, loss", [("newton", "squared_hinge"), ("newton", "hinge"),
                                          ("nesvm", "squared_hinge"), ("alm", "squared_hinge")])
def test_a_warm_start_from_c1_certifies_c2_in_fewer_passes(a9a, solver, loss):
    store = InMemoryStore(*a9a, chunk_rows=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m1, _ = train(store, solver=solver, loss=loss, C=1.0)
        _, cold = train(store, solver=solver, loss=loss, C=2.0)
        m2, warm = train(store, solver=solver, loss=loss, C=2.0, init_model=m1)
    assert cold.converged and warm.converged and warm.passes < cold.passes
    assert warm.primal == pytest.approx(cold.primal, rel=2e-3)
    assert m2.summary["init_model"]["model"] == "in-memory model"
    assert len(m2.summary["init_model"]["sha256"]) == 64


@pytest.mark.parametrize("solver", ["dcd", "avsf", "ww"])
def test_the_dual_solvers_refuse_a_warm_start(a9a, solver):
    store = InMemoryStore(*a9a, chunk_rows=1000)
    m1, _ = train(store, solver="newton", max_passes=3)
    with pytest.raises(InvalidParameterError, match=f"{solver}'s state is one dual variable "
                                                    f"per row"):
        train(store, solver=solver, init_model=m1)


def test_a_model_of_other_classes_or_more_features_is_refused(a9a):
    X, y = a9a
    m1, _ = train(InMemoryStore(X, y), solver="newton")
    three = np.where(np.arange(len(y)) % 3 == 0, 2.0, y)
    with pytest.raises(InvalidParameterError, match="a warm start needs the same classes"):
        train(InMemoryStore(X, three), solver="newton", init_model=m1)
    with pytest.raises(InvalidParameterError, match="has 123 features, the store 100"):
        train(InMemoryStore(X[:, :100], y), solver="newton", init_model=m1)
    narrow, _ = train(InMemoryStore(X[:, :100], y), solver="newton")
    wide, res = train(InMemoryStore(X, y), solver="newton", init_model=narrow)
    assert res.converged and wide.coef.shape == (1, 123)


def test_the_cli_warm_starts_and_checkpoints_remember_it(a9a, tmp_path, capsys):
    store = tmp_path / "s.zarr"
    write_store(store, *a9a, chunk_rows=1000)
    base = ["train", str(store), "--solver", "nesvm", "-q"]
    assert main(base + ["-o", str(tmp_path / "c1.json"), "-C", "1"]) == 0
    assert main(base + ["-o", str(tmp_path / "c05.json"), "-C", "0.5"]) == 0
    ck = str(tmp_path / "ck")
    assert main(base + ["-o", str(tmp_path / "c2.json"), "-C", "2", "--init-model",
                        str(tmp_path / "c1.json"), "--checkpoint", ck]) == 0
    model = load_model(tmp_path / "c2.json")
    assert model.summary["init_model"]["model"] == str(tmp_path / "c1.json")
    # the same command resumes (finished: the same model); another starting model is refused
    assert main(base + ["-o", str(tmp_path / "again.json"), "-C", "2", "--init-model",
                        str(tmp_path / "c1.json"), "--checkpoint", ck]) == 0
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "c2.json").read_bytes()
    capsys.readouterr()
    assert main(base + ["-o", str(tmp_path / "other.json"), "-C", "2", "--init-model",
                        str(tmp_path / "c05.json"), "--checkpoint", ck]) == 2
    err = capsys.readouterr().err
    assert "written by a run with --init-model sha256:" in err, err
    assert main(["train", str(store), "-o", str(tmp_path / "d.json"), "-q", "--init-model",
                 str(tmp_path / "c1.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dcd's state is one dual variable per row" in err[0]
    with pytest.raises(CheckpointError):
        train(str(store), solver="nesvm", C=2.0, checkpoint=ck)     # without the model


def test_the_estimators_warm_start_on_a_second_fit(a9a):
    X, y = a9a
    clf = ss.LinearSVC(solver="newton", loss="hinge", warm_start=True).fit(X, y)
    first = clf.n_passes_
    clf.set_params(C=2.0).fit(X, y)
    assert clf.converged_ and clf.n_passes_ < first
    assert "init_model" in clf.model_.summary
    labels = np.where(y > 0, "yes", "no")
    named = ss.LinearSVC(solver="newton", warm_start=True).fit(X, labels)
    named.set_params(C=2.0).fit(X, labels)
    assert named.classes_.tolist() == ["no", "yes"]
    with pytest.raises(InvalidParameterError, match="warm_start=True starts at the fitted"):
        named.fit(X, np.where(y > 0, "yes", "nope"))
    with pytest.raises(InvalidParameterError, match="dcd's state is one dual variable"):
        ss.LinearSVC(warm_start=True).fit(X, y).fit(X, y)
