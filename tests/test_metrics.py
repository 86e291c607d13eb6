"""``evaluate``'s metrics against scikit-learn's: confusion matrix, per-class precision /
recall / F1, balanced accuracy, macro F1, binary ROC AUC (exact, and from a uniform sample
past the cap)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.datasets import load_svmlight_file

from streamsvm._metrics import Metrics
from streamsvm.cli import main
from streamsvm.model import load_model

from .conftest import data_file


def _check_against_sklearn(res, y, pred, classes):
    cm = skm.confusion_matrix(y, pred, labels=classes)
    assert res["confusion_matrix"]["matrix"] == cm.tolist()
    p, r, f1, support = skm.precision_recall_fscore_support(y, pred, labels=classes,
                                                            zero_division=np.nan)
    for c, stats in enumerate(res["per_class"].values()):
        for ours, theirs in ((stats["precision"], p[c]), (stats["recall"], r[c]),
                             (stats["f1"], f1[c])):
            assert (ours is None and np.isnan(theirs)) or ours == pytest.approx(theirs) or \
                (ours == 0 and np.isnan(theirs))    # F1 with one side undefined: 0
        assert stats["rows"] == support[c] and stats["accuracy"] == stats["recall"]
    assert res["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(y, pred))


@pytest.mark.parametrize("data, n_features", [("a9a/a9a", 123), ("dna/dna.scale", 180)])
def test_evaluate_metrics_equal_scikit_learns(data, n_features, tmp_path, capsys):
    train, test = data_file(data), data_file(data + ".t")
    model_path = tmp_path / "m.json"
    store = tmp_path / "train.zarr"
    assert main(["convert", str(train), str(store), "-q"]) == 0
    assert main(["train", str(store), "-o", str(model_path), "--loss", "hinge", "-q"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(model_path), str(test), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    model = load_model(model_path)
    X, y = load_svmlight_file(str(test), n_features=n_features)
    pred = model.predict(X)
    _check_against_sklearn(res, y, pred, model.classes)
    assert res["accuracy"] == pytest.approx(skm.accuracy_score(y, pred))
    if model.task == "binary":
        scores = model.decision_function(X).ravel()
        assert res["roc_auc"] == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-12)
        assert res["roc_auc_rows"] == len(y)
    else:
        assert "roc_auc" not in res
        assert res["macro_f1"] == pytest.approx(skm.f1_score(y, pred, average="macro"))
    assert main(["evaluate", str(model_path), str(test)]) == 0
    text = capsys.readouterr().out
    assert "confusion matrix (rows: true class, columns: predicted):" in text
    assert f"balanced accuracy {res['balanced_accuracy']:.4f}" in text
    if model.task == "binary":
        assert f"ROC AUC {res['roc_auc']:.4f}" in text and "sample" not in text


def test_auc_ties_undefined_classes_and_the_sample_past_the_cap():
    m = Metrics(np.array([0.0, 1.0]), binary=True)
    truth = np.array([0, 1, 0, 1, 1])
    scores = np.array([0.0, 0.0, -1.0, 2.0, 0.0])       # ties across classes count half
    m.add(truth, np.zeros(5, dtype=np.int64), scores)  # class 1 is never predicted
    res = m.report()
    assert res["roc_auc"] == pytest.approx(skm.roc_auc_score(truth, scores))
    assert res["per_class"]["1"]["precision"] is None and res["per_class"]["1"]["recall"] == 0
    assert res["per_class"]["1"]["f1"] == 0 and res["per_class"]["0"]["precision"] == 0.4
    assert res["balanced_accuracy"] == 0.5 and res["macro_f1"] == pytest.approx(
        skm.f1_score(truth, np.zeros(5), average="macro", zero_division=0))
    one = Metrics(np.array([0.0, 1.0]), binary=True)
    one.add(np.ones(3, dtype=np.int64), np.ones(3, dtype=np.int64), np.arange(3.0))
    assert one.report()["roc_auc"] is None              # one class only: no AUC
    rng = np.random.default_rng(1)
    cap = Metrics(np.array([0.0, 1.0]), binary=True, auc_rows=5000)
    ys, ss = [], []
    for _ in range(40):                                 # 40,000 rows, a sample of 5,000
        y = (rng.random(1000) < 0.3).astype(np.int64)
        s = rng.normal(size=1000) + 1.2 * y
        cap.add(y, (s > 0).astype(np.int64), s)
        ys.append(y)
        ss.append(s)
    res = cap.report()
    exact = skm.roc_auc_score(np.concatenate(ys), np.concatenate(ss))
    assert res["roc_auc_rows"] == 5000
    assert abs(res["roc_auc"] - exact) < 0.02           # sampling error ~ 0.007
    assert res["confusion_matrix"]["matrix"][1][1] + res["confusion_matrix"]["matrix"][1][0] \
        == int(np.concatenate(ys).sum())                # the matrix counts every row
