"""``streamsvm info MODEL``: task, classes, features, non-zero weights, the largest weights,
the training summary and the store; a damaged model is one line and exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamsvm.cli import main
from streamsvm.model import LinearModel, load_model
from streamsvm._model_info import model_info

from .conftest import data_file


@pytest.fixture(scope="module")
def dna_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("info")
    store = d / "dna.zarr"
    assert main(["convert", str(data_file("dna/dna.scale")), str(store), "-q"]) == 0
    return store


def test_info_of_a_trained_model_says_what_it_is_and_how_it_was_trained(dna_store, tmp_path,
                                                                       capsys):
    out = tmp_path / "m.json"
    assert main(["train", str(dna_store), "-o", str(out), "--solver", "dcd", "--loss",
                 "hinge", "-C", "0.1", "-q"]) == 0
    capsys.readouterr()
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    model = load_model(out)
    assert info["task"] == "multiclass" and info["classes"] == [1, 2, 3]
    assert info["n_features"] == 180 and info["n_models"] == 3
    assert info["nonzero_weights"] == np.count_nonzero(model.coef)
    assert list(info["nonzero_per_model"]) == ["1 vs rest", "2 vs rest", "3 vs rest"]
    mags = [abs(w["weight"]) for w in info["largest_weights"]]
    assert len(mags) == 10 and mags == sorted(mags, reverse=True)
    assert mags[0] == np.abs(model.coef).max()
    for w in info["largest_weights"]:     # the ids of the libsvm file (1-based), the rows
        row = ["1 vs rest", "2 vs rest", "3 vs rest"].index(w["model"])
        assert model.coef[row, w["feature"] - 1] == w["weight"]
    t = info["training"]
    assert t["solver"] == "dcd" and t["params"]["C"] == 0.1 and t["params"]["loss"] == "hinge"
    from streamsvm.io import open_store
    assert t["certified"] and t["gap"] <= 1e-3
    assert t["store"] == {"store_id": open_store(str(dna_store)).meta["store_id"],
                          "converted_from": [str(data_file("dna/dna.scale"))]}
    assert t["n_rows"] == 2000 and t["passes"] == model.summary["passes"]
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "task        multiclass" in text and "classes     1, 2, 3" in text
    assert "certified (exact gap within tol)" in text
    assert f"converted from {data_file('dna/dna.scale')} (2,000 rows)" in text
    assert "largest weights (feature id: weight, model):" in text


def test_largest_weights_of_a_binary_model_by_magnitude():
    coef = np.array([[0.0, -3.0, 0.5, 3.0, 0.0, -0.25]])
    m = LinearModel(coef, np.array([0.5]), np.array([-1.0, 1.0]), "binary", {}, {})
    info = model_info(m, "x.json", top=3)
    assert info["nonzero_weights"] == 4 and info["nonzero_per_model"] == {"1 vs -1": 4}
    # ties keep the feature order: 2 (-3.0) before 4 (3.0)
    assert [(w["feature"], w["weight"]) for w in info["largest_weights"]] == \
        [(2, -3.0), (4, 3.0), (3, 0.5)]
    assert info["training"] is None
    zero = LinearModel(np.zeros((1, 4)), np.zeros(1), np.array([0.0, 1.0]), "binary", {}, {})
    assert model_info(zero, "z.json")["largest_weights"] == []


def test_info_of_a_liblinear_model_and_of_a_damaged_model(dna_store, tmp_path, capsys):
    ll = tmp_path / "m.txt"
    assert main(["train", str(dna_store), "-o", str(ll), "--format", "liblinear", "-q"]) == 0
    capsys.readouterr()
    assert main(["info", str(ll)]) == 0
    text = capsys.readouterr().out
    assert "solver      LIBLINEAR" in text and "solver_type=L2R_L2LOSS_SVC_DUAL" in text
    good = tmp_path / "good.json"
    assert main(["train", str(dna_store), "-o", str(good), "-q"]) == 0
    doc = json.loads(good.read_text())
    doc["summary"]["passes"] += 1.0             # tampered: its checksum no longer matches
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.json" in err and "summary" in err
