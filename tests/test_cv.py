"""Cross-validation in shared passes (``streamsvm._cv``, ``io._folds``): the folds, the
joint problem the K fold models train as, the fold models against K separate trainings on
the same folds, the C search, and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm as ss
from streamsvm._evaluate import evaluate
from streamsvm._train import train
from streamsvm.cli import main
from streamsvm.exceptions import InvalidParameterError
from streamsvm.io import FoldStore, InMemoryStore, fold_of, write_store

from .conftest import data_file


@pytest.fixture(scope="module")
def a9a():
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_svmlight_file(str(data_file("a9a/a9a")), n_features=123)
    return sp.csr_matrix(X[:4000]), y[:4000]


@pytest.fixture(scope="module")
def dna():
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_svmlight_file(str(data_file("dna/dna.scale")), n_features=180)
    return sp.csr_matrix(X[:1500]), y[:1500]


def test_folds_depend_on_the_row_id_and_seed_only():
    whole = fold_of(0, 10_000, 5, 3)
    parts = np.concatenate([fold_of(a, b - a, 5, 3) for a, b in
                            [(0, 7), (7, 4096), (4096, 9999), (9999, 10_000)]])
    np.testing.assert_array_equal(whole, parts)
    counts = np.bincount(whole, minlength=5)
    assert counts.min() > 1800 and counts.max() < 2200          # a hash: near K equal folds
    assert (fold_of(0, 10_000, 5, 4) != whole).mean() > 0.7     # another seed, other folds


def test_the_fold_store_writes_each_row_once_per_model_training_on_it(a9a):
    X, y = a9a
    inner = InMemoryStore(X[:300], y[:300], chunk_rows=64)
    fs = FoldStore(inner, 4, seed=1, bias=2.0)
    assert fs.n_rows == 900 and fs.n_features == 4 * 124 and fs.chunk_rows == 192
    assert fs.nnz == (inner.nnz + 300) * 3
    folds = fold_of(0, 300, 4, 1)
    expected = []                    # the rows, built another way
    for i in range(300):
        row = X[i].toarray().ravel()
        for c in (c for c in range(4) if c != folds[i]):
            out = np.zeros(4 * 124)
            out[c * 124:c * 124 + 123] = row
            out[c * 124 + 123] = 2.0
            expected.append(out)
    expected = np.array(expected)
    whole = sp.vstack([fs.read_chunk(i).to_scipy() for i in range(fs.n_chunks)]).toarray()
    np.testing.assert_array_equal(whole[:, :expected.shape[1]], expected)
    for start, stop in [(0, 5), (7, 193), (191, 192), (500, 900)]:   # ranges cut rows' copies
        got = fs.read_rows(start, stop)
        assert got.row_start == start and got.n_rows == stop - start
        dense = sp.csr_matrix((got.data, got.indices, got.indptr),
                              shape=(got.n_rows, fs.n_features)).toarray()
        np.testing.assert_array_equal(dense, expected[start:stop])
        np.testing.assert_array_equal(got.y, np.repeat(np.where(y[:300] > 0, 1, -1), 3)
                                      [start:stop])
    assert max(fs.chunk_max_sq_norm) == pytest.approx(max(inner.chunk_max_sq_norm) + 4.0)
    # two values of C: a second group of blocks, its rows scaled
    two = FoldStore(inner, 4, seed=1, bias=2.0, scales=[1.0, 0.5])
    assert two.n_rows == 1800 and two.n_features == 8 * 124
    got = two.read_chunk(0).to_scipy().toarray()
    np.testing.assert_array_equal(got[:3, :4 * 124], expected[:3])
    np.testing.assert_allclose(got[3:6, 4 * 124:], expected[:3] * 0.5)


@pytest.mark.parametrize("solver,loss", [("dcd", "hinge"), ("newton", "squared_hinge")])
def test_fold_models_match_separate_trainings_on_the_same_folds(a9a, solver, loss):
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=1000)
    r = ss.cross_validate(store, cv=5, solver=solver, loss=loss, C=0.5, seed=2)
    folds = fold_of(0, X.shape[0], 5, 2)
    one = train(store, solver=solver, loss=loss, C=0.5, seed=2)[1]
    assert r.passes <= 1.5 * one.passes + 1                      # shared passes
    for f, model in enumerate(r.models):
        alone, _ = train(InMemoryStore(X[folds != f], y[folds != f], chunk_rows=1000),
                         solver=solver, loss=loss, C=0.5, seed=2)
        held = InMemoryStore(X[folds == f], y[folds == f])
        assert r.folds[f]["rows"] == int(np.count_nonzero(folds == f))
        assert r.folds[f]["accuracy"] == pytest.approx(evaluate(model, held)["accuracy"])
        assert abs(r.folds[f]["accuracy"] - evaluate(alone, held)["accuracy"]) <= 0.004
        # the same optimum: fold model and separate run agree to the certified gaps
        train_rows = InMemoryStore(X[folds != f], y[folds != f])
        p_fold = evaluate(model, train_rows)["objective"]
        p_alone = evaluate(alone, train_rows)["objective"]
        assert p_fold == pytest.approx(r.folds[f]["primal"], rel=1e-9)
        assert abs(p_fold - p_alone) <= 2e-3 * p_alone
        assert r.folds[f]["gap_bound"] <= 2e-3
    assert r.result.converged and r.summary()["largest_fold_gap_bound"] <= 2e-3
    # the sum of the fold objectives is the joint run's primal
    assert sum(f["primal"] for f in r.folds) == pytest.approx(r.result.primal, rel=1e-6)


def test_multiclass_and_string_labels(dna):
    X, y = dna
    names = np.array(["ei", "ie", "n"])[(y - 1).astype(int)]
    r = ss.cross_validate(X, names, cv=3, solver="dcd", C=0.1)
    assert [m.coef.shape for m in r.models] == [(3, 180)] * 3
    assert set(r.models[0].predict(X[:50])) <= {"ei", "ie", "n"}
    assert 0.85 < r.accuracy < 1 and r.result.converged
    ww = ss.cross_validate(InMemoryStore(X, y), cv=3, solver="ww", C=0.1)
    assert 0.85 < ww.accuracy < 1


def test_refusals(a9a):
    store = InMemoryStore(*a9a)
    with pytest.raises(InvalidParameterError, match="free .*intercept.*free_bias=False"):
        ss.cross_validate(store, cv=3, solver="alm")
    assert ss.cross_validate(store, cv=3, solver="alm", free_bias=False, C=0.1).accuracy > 0.8
    with pytest.raises(InvalidParameterError, match="at least 2 folds"):
        ss.cross_validate(store, cv=1)
    with pytest.raises(InvalidParameterError, match="ℓ1 term leaves the bias out"):
        ss.cross_validate(store, cv=3, solver="newton", l1=0.1)
    assert ss.cross_validate(store, cv=3, solver="newton", l1=0.1, bias=0.0, C=0.1).accuracy > 0.7
    with pytest.raises(InvalidParameterError, match="cross_validate_path"):
        ss.cross_validate(store, cv=3, C_path=[0.1, 1])


def test_c_search_trains_every_c_in_the_same_passes(a9a):
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=1000)
    Cs = [1.0, 0.01, 0.1]
    results, best = ss.cross_validate_path(store, 3, Cs, solver="newton", seed=1)
    acc = [r.accuracy for r in results]
    assert acc[best] == max(acc) and len({id(r.result) for r in results}) == 1
    assert [r.models[0].params["C"] for r in results] == Cs
    one = train(store, solver="newton", C=1.0, seed=1)[1]
    assert results[0].passes <= 3 * one.passes                  # shared passes
    folds = fold_of(0, X.shape[0], 3, 1)
    for r, C in zip(results, Cs):          # each C's fold models: that C's optimum
        assert r.summary()["largest_fold_gap_bound"] <= 2e-3
        for f in (0, 2):
            rows = InMemoryStore(X[folds != f], y[folds != f])
            alone, _ = train(rows, solver="newton", C=C, tol=1e-6)
            assert evaluate(r.models[f], rows)["objective"] == pytest.approx(
                evaluate(alone, rows)["objective"], rel=2e-3)


def test_command_line(a9a, tmp_path, capsys):
    X, y = a9a
    write_store(tmp_path / "s.zarr", X, y, chunk_rows=1000)
    s = str(tmp_path / "s.zarr")
    assert main(["train", s, "--cv", "4", "--solver", "dcd", "-C", "0.5", "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and out[0].startswith("fold 1: ") and "certified gap <= " in out[0]
    assert out[-1].startswith("cv 4 folds (dcd): accuracy ") and "converged" in out[-1]
    model = tmp_path / "m.json"
    assert main(["train", s, "--cv", "3", "--solver", "newton", "--C-path", "0.01,0.1",
                 "-o", str(model), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cv"] == 3 and len(summary["C_search"]) == 2 and len(summary["folds"]) == 3
    assert summary["chosen_C"] in (0.01, 0.1) and summary["model"] == str(model)
    assert ss.load_model(model).params["C"] == summary["chosen_C"]
    for argv, words in [(["--cv", "1"], "at least 2 folds"),
                        ([], "give -o"),
                        (["--cv", "3", "--validation", s], "give one of them"),
                        (["--cv", "3", "--solver", "alm"], "--no-free-bias")]:
        assert main(["train", s, *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err
