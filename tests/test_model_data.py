"""Model and data are matched: labels outside the model's classes are refused, unseen
features are reported once, LIBLINEAR model files read back, and ``fit`` refuses labels
that cannot be trained on (issue 10, "Nothing silent")."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import scipy.sparse as sp

import streamsvm as ss
from streamsvm.cli import main
from streamsvm.exceptions import (DataMismatchError, InvalidParameterError, ModelError,
                                  StreamSVMError)
from streamsvm.io import convert, write_store
from streamsvm.model import load_model

from .conftest import data_file

LOGGER = "streamsvm._evaluate"
sk_datasets = pytest.importorskip("sklearn.datasets")


def _load(relpath, n_features=None):
    return sk_datasets.load_svmlight_file(str(data_file(relpath)), n_features=n_features)


@pytest.fixture(scope="module")
def dna(tmp_path_factory):
    """dna stores, and a 3-class model trained on them (180 features, classes 1, 2, 3)."""
    d = tmp_path_factory.mktemp("dna")
    convert(str(data_file("dna/dna.scale")), str(d / "dna.zarr"), chunk_rows=512)
    convert(str(data_file("dna/dna.scale.t")), str(d / "dna.t.zarr"), chunk_rows=512,
            n_features=180)
    convert(str(data_file("usps/usps.t")), str(d / "usps.t.zarr"), chunk_rows=512)
    assert main(["train", str(d / "dna.zarr"), "-o", str(d / "dna.json"), "-q"]) == 0
    assert main(["train", str(d / "dna.zarr"), "-o", str(d / "dna.liblinear"), "-q",
                 "--format", "liblinear"]) == 0
    return d


# -- 1. labels outside the model's classes ------------------------------------------------

def test_evaluate_refuses_labels_outside_the_model_classes(dna, capsys):
    usps = data_file("usps/usps.t")
    model = str(dna / "dna.json")
    assert main(["evaluate", model, str(dna / "usps.t.zarr")]) == 2
    err = capsys.readouterr().err
    assert "usps.t.zarr" in err and "labels 4, 5, 6, 7, 8, 9, 10" in err
    assert "classes 1, 2, 3" in err and "accuracy" not in err
    # a libsvm file: the file and the line of the first such row
    first_bad = next(i for i, line in enumerate(usps.read_text().splitlines(), 1)
                     if float(line.split()[0]) not in (1.0, 2.0, 3.0))
    assert main(["evaluate", model, str(usps), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{usps}, line {first_bad}: label" in err and "not a class of the model" in err
    # a binary model on 3-class data
    a9a_like = dna / "binary.json"
    ss.LinearSVC().fit(*_load("a9a/a9a", n_features=180)).save(a9a_like)
    assert main(["evaluate", str(a9a_like), str(dna / "dna.t.zarr")]) == 2
    assert "labels 2, 3 (883 of 1,186 rows)" in capsys.readouterr().err


def test_score_on_a_store_refuses_labels_outside_the_model_classes(dna):
    clf = ss.LinearSVC.from_model(str(dna / "dna.json"))
    with pytest.raises(DataMismatchError, match="usps.t.zarr.*labels 4, 5") as exc:
        clf.score(str(dna / "usps.t.zarr"))
    assert isinstance(exc.value, ValueError)
    assert clf.score(str(dna / "dna.t.zarr")) > 0.9     # matching data still scores


# -- 1. features beyond the model's ----------------------------------------------------------

@pytest.fixture(scope="module")
def narrow(dna):
    """A model trained on the first 150 of dna's 180 features."""
    X, y = _load("dna/dna.scale")
    clf = ss.LinearSVC().fit(X[:, :150], y)
    clf.save(dna / "dna150.json")
    Xt, _ = _load("dna/dna.scale.t", n_features=180)
    beyond = Xt[:, 150:]
    expect = {"rows": int(np.count_nonzero(beyond.getnnz(axis=1))), "entries": beyond.nnz,
              "max_index": int(beyond.indices.max()) + 151, "model_n_features": 150}
    assert expect["rows"] > 0
    return clf, dna / "dna150.json", expect


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize("data", ["dna.t.zarr", "libsvm"])
def test_unseen_features_are_reported_once(dna, narrow, data, capsys, caplog):
    _, model, expect = narrow
    path = str(dna / data) if data != "libsvm" else str(data_file("dna/dna.scale.t"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert main(["evaluate", str(model), path, "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["unseen_features"] == expect
    (msg,) = _warnings(caplog)
    assert f"{expect['rows']:,} of 1,186 rows" in msg and f"{expect['entries']:,} entries" in msg
    assert "largest index 180" in msg and "model's 150" in msg
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert main(["predict", str(model), path, "-o", str(dna / "p.txt")]) == 0
    assert len(_warnings(caplog)) == 1
    # data within the model's features: no warning, zero counts
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert main(["evaluate", str(dna / "dna.json"), path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unseen_features"]["rows"] == 0
    assert _warnings(caplog) == []


def test_estimator_refuses_a_different_number_of_columns(narrow):
    clf, _, _ = narrow
    Xt, yt = _load("dna/dna.scale.t", n_features=180)
    msg = "X has 180 features, but LinearSVC is expecting 150 features as input."
    for call in (clf.predict, clf.decision_function, lambda X: clf.score(X, yt)):
        with pytest.raises(InvalidParameterError, match=msg) as exc:
            call(Xt)
        assert isinstance(exc.value, ValueError)
    with pytest.raises(ValueError, match="X has 100 features"):
        clf.predict(Xt[:, :100].toarray())
    assert clf.score(Xt[:, :150], yt) > 0.8


# -- 2. LIBLINEAR model files read back ------------------------------------------------------

@pytest.fixture(scope="module")
def a9a_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("a9a")
    convert(str(data_file("a9a/a9a")), str(d / "a9a.zarr"), chunk_rows=4096)
    for fmt in ("streamsvm", "liblinear"):
        assert main(["train", str(d / "a9a.zarr"), "-o", str(d / f"m.{fmt}"), "-q", "--loss",
                     "hinge", "--format", fmt]) == 0
    return d


@pytest.mark.parametrize("which", ["a9a", "dna"])
def test_liblinear_export_reads_back_as_the_same_model(which, dna, a9a_models, capsys):
    if which == "a9a":
        js, ll, test = (a9a_models / "m.streamsvm", a9a_models / "m.liblinear",
                        data_file("a9a/a9a.t"))
    else:
        js, ll, test = dna / "dna.json", dna / "dna.liblinear", data_file("dna/dna.scale.t")
    a, b = load_model(js), load_model(ll)
    assert b.task == a.task and np.array_equal(b.classes, a.classes)
    np.testing.assert_array_equal(b.coef, a.coef)
    np.testing.assert_array_equal(b.intercept, a.intercept)
    assert b.params["loss"] == a.params["loss"] and b.params["bias"] == a.params["bias"]
    for args in ([], ["--scores"]):
        outs = []
        for m in (js, ll):
            out = dna / f"{which}-{m.name}.txt"
            assert main(["predict", str(m), str(test), "-o", str(out), *args]) == 0
            outs.append(out.read_text())
        assert outs[0] == outs[1]
    capsys.readouterr()
    accs = []
    for m in (js, ll):
        assert main(["evaluate", str(m), str(test), "--json"]) == 0
        accs.append(json.loads(capsys.readouterr().out)["accuracy"])
    assert accs[0] == accs[1]


@pytest.mark.parametrize("data, options", [
    ("a9a/a9a", "-s 1 -B 1"),       # binary, data's first label -1: LIBLINEAR lists "-1 1"
    ("a9a/a9a", "-s 0 -B -1"),      # logistic regression, no bias
    ("dna/dna.scale", "-s 3 -B 1"),  # one-vs-rest hinge
    ("dna/dna.scale", "-s 4 -B 1"),  # Crammer-Singer
])
def test_model_written_by_liblinear_predicts_like_liblinear(data, options, tmp_path, capsys):
    ll = pytest.importorskip("liblinear.liblinearutil")
    X, y = _load(data)
    test = data_file(data + ".t")
    Xt, yt = _load(data + ".t", n_features=X.shape[1])
    path = str(tmp_path / "liblinear.model")
    ll.save_model(path, ll.train(y, X, options + " -q"))
    m_ll = ll.load_model(path)
    p_ll, acc, dec_ll = ll.predict(yt, Xt, m_ll, "-q")
    model = load_model(path)
    np.testing.assert_array_equal(model.predict(Xt), np.asarray(p_ll))
    dec = model.decision_function(Xt).reshape(len(yt), -1)
    # columns in the model's (sorted) class order; binary: + for the larger label
    order = m_ll.get_labels()
    want = np.asarray(dec_ll)
    if len(order) == 2:
        want = want * (1.0 if order[0] > order[1] else -1.0)
    else:
        want = want[:, np.argsort(order)]
    np.testing.assert_allclose(want, dec, rtol=1e-12, atol=1e-12)
    out = tmp_path / "pred.txt"                       # the CLI reads it too
    assert main(["predict", path, str(test), "-o", str(out)]) == 0
    np.testing.assert_array_equal(np.loadtxt(out), np.asarray(p_ll))
    assert main(["evaluate", path, str(test), "--json"]) == 0     # (was an IndexError)
    assert json.loads(capsys.readouterr().out)["accuracy"] * 100 == pytest.approx(acc[0])


def test_unreadable_liblinear_models_name_the_file_and_line(tmp_path):
    good = ("solver_type L2R_L2LOSS_SVC_DUAL\nnr_class 2\nlabel 1 -1\nnr_feature 2\n"
            "bias -1\nw\n0.5 \n-0.25 \n")
    path = tmp_path / "m.model"
    path.write_text(good)
    m = load_model(path)
    assert m.task == "binary" and m.classes.tolist() == [-1.0, 1.0]
    assert m.predict(np.array([[1.0, 0.0], [0.0, 1.0]])).tolist() == [1.0, -1.0]
    for text, needle in [
        (good.replace("-0.25 \n", ""), "line 7: expected 2 weights after 'w', found 1"),
        (good.replace("nr_class 2", "nr_class two"), "line 2.*bad 'nr_class'"),
        (good.replace("label 1 -1", "label 1"), "line 3.*bad 'label'"),
        (good.replace("bias -1\n", "bias -1\neps 0.1\n"), "line 6.*unknown text"),
        (good.replace("L2R_L2LOSS_SVC_DUAL", "L2R_L2LOSS_SVR"), "line 1.*not a classifier"),
        (good.replace("0.5 ", "0.5x "), "bad weight"),
    ]:
        path.write_text(text)
        with pytest.raises(ModelError, match=needle) as exc:
            load_model(path)
        assert str(path) in str(exc.value)


# -- 3. labels fit cannot train on -----------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_fit_refuses_non_finite_labels(bad):
    X, y = _load("dna/dna.scale")
    y = y.copy()
    y[[5, 9]] = bad
    with pytest.raises(InvalidParameterError, match=r"y contains NaN or infinity: 2 of 2,000 "
                                                    r"labels \(first at row 5\)"):
        ss.LinearSVC().fit(X, y)
    with pytest.raises(InvalidParameterError, match="y contains NaN"):
        ss.LinearSVC().fit(X, np.full(len(y), np.nan))


def test_fit_refuses_a_single_class():
    X, y = _load("dna/dna.scale")
    with pytest.raises(InvalidParameterError, match="The number of classes has to be greater "
                                                    "than one; got 1 class") as exc:
        ss.LinearSVC().fit(X, np.full(len(y), 3.0))
    assert isinstance(exc.value, ValueError)


def test_train_refuses_a_single_label_store_before_the_first_pass(tmp_path, capsys,
                                                                  monkeypatch):
    X, y = _load("dna/dna.scale")
    keep = y == 3
    write_store(str(tmp_path / "one.zarr"), X[keep], y[keep], chunk_rows=256)
    import streamsvm.schedule as schedule

    def no_pass(*a, **k):
        raise AssertionError("a PassScheduler was created")
    monkeypatch.setattr(schedule, "PassScheduler", no_pass)
    out = tmp_path / "m.json"
    assert main(["train", str(tmp_path / "one.zarr"), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "The number of classes has to be greater than one; got 1 class (label 3" in err
    assert "one.zarr" in err and not out.exists()
    with pytest.raises(StreamSVMError, match="got 1 class"):
        ss.LinearSVC().fit(str(tmp_path / "one.zarr"))


def test_fit_on_a_sparse_matrix_with_labels_as_strings_gives_them_back():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 1.0]]))
    clf = ss.LinearSVC(C=10.0).fit(X, np.array(["1", "1", "-1", "-1"]))
    assert clf.classes_.tolist() == ["-1", "1"]
    assert clf.predict(X).tolist() == ["1", "1", "-1", "-1"]


@pytest.mark.parametrize("k,d", [(1, 1001), (3, 40)])
def test_a_model_file_is_written_in_pieces_with_the_bytes_of_its_document(k, d, tmp_path,
                                                                          monkeypatch):
    """save writes json.dumps(to_dict()) byte for byte, the weights base64-encoded a slice
    at a time (15 bytes here: slices that end inside a float), and loads back bit-exact."""
    from streamsvm import _model_json, model as model_mod
    monkeypatch.setattr(_model_json, "PIECE", 15)
    rng = np.random.default_rng(k)
    classes = np.array([-1.0, 1.0]) if k == 1 else np.arange(1.0, k + 1)
    m = model_mod.LinearModel(rng.standard_normal((k, d)), rng.standard_normal(k), classes,
                              "binary" if k == 1 else "multiclass", {"solver": "dcd", "C": 1.0},
                              {"passes": 3.5, "gap": float("nan")})
    m.save(tmp_path / "m.json")
    raw = (tmp_path / "m.json").read_bytes()
    assert raw == json.dumps(m.to_dict()).encode()
    back = load_model(tmp_path / "m.json")
    assert np.array_equal(back.coef, m.coef) and np.array_equal(back.intercept, m.intercept)
    assert not list(tmp_path.glob(".*partial"))
