"""scikit-learn's estimator checks on LinearSVC and WestonWatkinsSVC, and the labels the
estimators take: numbers, strings, booleans, given back by predict and kept in model files."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (the 'test' extra) runs these checks")

from sklearn.datasets import make_blobs  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.utils.estimator_checks import estimator_checks_generator  # noqa: E402

import streamsvm as ss  # noqa: E402
from streamsvm.exceptions import (ConvergenceWarning, DataMismatchError,  # noqa: E402
                                  InvalidParameterError)

#: None: with ``solver="auto"`` (the default) check_class_weight_classifiers' max_iter, a
#: parameter of alm only, makes auto choose alm (``dcd`` named refuses it: it is not one of
#: its parameters; test_a_parameter_of_another_solver_is_refused_unless_at_its_default).
EXPECTED_FAILURES: dict = {"LinearSVC": {}, "WestonWatkinsSVC": {}}


NOT_RUN = {
    "check_array_api_input":
        "runs only with SCIPY_ARRAY_API=1 set before scipy's import; the estimators take "
        "numpy and scipy.sparse input",
    "check_classifier_data_not_an_array":
        "needs pandas, not a dependency; lists and tuples: test_lists_are_data",
}


def _checks():
    with warnings.catch_warnings():        # "does not inherit from BaseEstimator": by design
        warnings.simplefilter("ignore", UserWarning)
        for est in (ss.LinearSVC(), ss.WestonWatkinsSVC()):
            for item in estimator_checks_generator(
                    est, expected_failed_checks=EXPECTED_FAILURES[type(est).__name__],
                    mark="xfail", xfail_strict=True):
                # a pair, or a pytest.param (values, marks, id) for an expected failure
                (e, check), marks = (item, ()) if len(item) == 2 else item[:2]
                name = getattr(check, "func", check).__name__
                if name not in NOT_RUN:
                    yield pytest.param(e, check, id=f"{type(e).__name__}-{name}", marks=marks)


@pytest.mark.parametrize("estimator, check", list(_checks()))
def test_scikit_learn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_lists_are_data():
    X = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]
    clf = ss.LinearSVC(C=10.0).fit(X, ["a", "a", "b", "b"])
    assert clf.predict(tuple(map(tuple, X))).tolist() == ["a", "a", "b", "b"]


@pytest.mark.parametrize("est", [ss.LinearSVC(), ss.LinearSVC(solver="newton"),
                                 ss.WestonWatkinsSVC()], ids=repr)
@pytest.mark.parametrize("n_centers", [2, 3])
def test_class_weights_as_scikit_learn_checks_them(est, n_centers):
    """check_class_weight_classifiers without its max_iter: a weight of 1000 on class 0
    against 1e-4 on the others predicts class 0 for nearly every test row."""
    X, y = make_blobs(centers=n_centers, random_state=0, cluster_std=20)
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.5, random_state=0)
    weights = {0: 1000, **{c: 0.0001 for c in range(1, n_centers)}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = est.set_params(class_weight=weights).fit(X_train, y_train)
    assert np.mean(clf.predict(X_test) == 0) > 0.87


def _blobs(labels):
    X, y = make_blobs(n_samples=60 * len(labels), centers=len(labels), random_state=1,
                      cluster_std=0.5)
    return X, np.asarray(labels, dtype=object)[y]


@pytest.mark.parametrize("labels", [["cat", "dog"], ["b", "a", "c"], [False, True]],
                         ids=["two strings", "three strings", "booleans"])
@pytest.mark.parametrize("cls", [ss.LinearSVC, ss.WestonWatkinsSVC])
def test_labels_round_trip_through_fit_predict_and_model_files(cls, labels, tmp_path):
    X, y = _blobs(labels)
    clf = cls(C=1.0, bias=1.0).fit(X, y)
    assert clf.classes_.tolist() == sorted(labels)
    pred = clf.predict(X)
    assert set(pred.tolist()) == set(labels) and clf.score(X, y) > 0.95
    clf.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["format"] == "streamsvm-linear-model/3" and doc["labels"] == sorted(labels)
    back = ss.LinearSVC.from_model(str(tmp_path / "m.json"))
    assert back.classes_.tolist() == sorted(labels)
    assert back.predict(X).tolist() == pred.tolist()


def test_numeric_labels_keep_the_numeric_model_format(tmp_path):
    X, y = _blobs([0, 1, 2])
    ss.LinearSVC().fit(X, y.astype(int)).save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["format"] == "streamsvm-linear-model/2" and "labels" not in doc


def test_class_weight_names_the_users_labels():
    """Weights keyed by string labels train the model that the same weights keyed by the
    labels' codes train on the codes."""
    X, y = _blobs(["a", "b"])
    X = X + np.random.default_rng(0).normal(scale=3.0, size=X.shape)
    named = ss.LinearSVC(class_weight={"a": 5.0, "b": 0.5}).fit(X, y)
    coded = ss.LinearSVC(class_weight={0: 5.0, 1: 0.5}).fit(X, (y == "b").astype(int))
    np.testing.assert_array_equal(named.coef_, coded.coef_)
    other = ss.LinearSVC(class_weight={"a": 0.5, "b": 5.0}).fit(X, y)
    assert np.mean(named.predict(X) == "a") > np.mean(other.predict(X) == "a")
    with pytest.raises(InvalidParameterError, match="'z', not a label of y"):
        ss.LinearSVC(class_weight={"z": 2.0}).fit(X, y)


def test_a_labelled_model_is_refused_where_labels_are_numbers(tmp_path):
    X, y = _blobs(["a", "b"])
    model = ss.LinearSVC().fit(X, y).model_
    with pytest.raises(DataMismatchError, match="labels \\['a', 'b'\\]"):
        ss.LinearSVC.from_model(model).score(ss.InMemoryStore(X, (y == "b").astype(float)))
    with pytest.raises(InvalidParameterError, match="LIBLINEAR model files need integer"):
        model.to_liblinear(tmp_path / "m.liblinear")
    assert not (tmp_path / "m.liblinear").exists()
    odd = ss.LinearSVC().fit(X, np.array([(1, 2) if v == "a" else (3,) for v in y],
                                         dtype=object))
    with pytest.raises(InvalidParameterError, match="a label of type tuple"):
        odd.save(tmp_path / "odd.json")
    assert not (tmp_path / "odd.json").exists()


def test_the_cli_predicts_and_describes_a_labelled_model(tmp_path):
    X, y = _blobs(["no", "yes"])
    ss.LinearSVC().fit(X, y).save(tmp_path / "m.json")
    data = tmp_path / "d.svm"
    data.write_text("".join(f"0 1:{a} 2:{b}\n" for a, b in X[:5]))
    run = [sys.executable, "-m", "streamsvm"]
    out = subprocess.run(run + ["predict", str(tmp_path / "m.json"), str(data), "-o", "-"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == \
        ss.LinearSVC.from_model(str(tmp_path / "m.json")).predict(X[:5]).tolist()
    info = subprocess.run(run + ["info", str(tmp_path / "m.json"), "--json"],
                          capture_output=True, text=True)
    assert info.returncode == 0 and json.loads(info.stdout)["classes"] == ["no", "yes"]
    ev = subprocess.run(run + ["evaluate", str(tmp_path / "m.json"), str(data)],
                        capture_output=True, text=True)
    assert ev.returncode == 2 and len(ev.stderr.strip().splitlines()) == 1
    assert "score it in Python" in ev.stderr


@pytest.mark.parametrize("y, match", [
    (np.linspace(0, 1, 40), "Unknown label type: continuous"),
    (None, "requires y to be passed"),
    (np.zeros((40, 2)), "y should be a 1d array"),
])
def test_bad_labels_are_refused_before_any_pass(y, match):
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(InvalidParameterError, match=match):
        ss.LinearSVC().fit(X, y)


def test_a_parameter_of_another_solver_is_refused_unless_at_its_default():
    X, y = _blobs([0, 1])
    ss.LinearSVC(solver="dcd", polish=True).fit(X, y)    # newton's default: ignored by dcd
    with pytest.raises(InvalidParameterError,
                       match="'polish' .* taken by newton, not by the chosen solver 'dcd'"):
        ss.LinearSVC(solver="dcd", polish=False).fit(X, y)
    # auto: a parameter only newton takes limits the choice to newton
    assert ss.LinearSVC(polish=False).fit(X, y).model_.params["solver"] == "newton"
