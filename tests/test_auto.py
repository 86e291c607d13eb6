"""``--solver auto``, the default of the CLI, ``LinearSVC`` and ``train()``: the solver chosen
before the first pass by the rules of ``streamsvm/_auto.py`` (made from the measured matrix,
``tools/bench.py matrix``), the choice and its reason kept in the model and ``--json``; an
explicit solver wins; a parameter only some solvers take limits the choice to them."""

from __future__ import annotations

import inspect
import json
import logging

import numpy as np
import pytest

import streamsvm as ss
from streamsvm import _auto
from streamsvm._train import train
from streamsvm.cli import build_parser, main
from streamsvm.exceptions import InvalidParameterError
from streamsvm.io import convert
from streamsvm.model import load_model

from .conftest import data_file


@pytest.fixture(scope="module")
def vowel(tmp_path_factory):
    out = tmp_path_factory.mktemp("auto") / "vowel.zarr"
    convert(str(data_file("vowel/vowel.scale")), str(out))
    return out


def test_auto_is_the_default_of_the_cli_the_estimator_and_train():
    assert build_parser().parse_args(["train", "s.zarr", "-o", "m.json"]).solver == "auto"
    assert ss.LinearSVC().get_params()["solver"] == "auto"
    assert inspect.signature(train).parameters["solver"].default == "auto"


def test_the_cli_keeps_the_choice_and_why_in_the_model_and_json(vowel, tmp_path, capsys,
                                                                 caplog):
    out = tmp_path / "m.json"
    with caplog.at_level(logging.INFO, logger="streamsvm._auto"):
        assert main(["train", str(vowel), "-o", str(out), "--json", "-q", "-v"]) == 0
    summary = json.loads(capsys.readouterr().out)
    model = load_model(out)
    assert summary["solver"] == model.params["solver"] in _auto.CHOICES
    assert summary["chosen_because"] == model.summary["chosen_because"]
    assert "528 rows, 10 features, 11 classes" in summary["chosen_because"]
    assert any(f"--solver auto chose {summary['solver']}" in r.getMessage()
               for r in caplog.records)
    assert summary["converged"] and summary["gap"] <= 1e-3
    assert main(["info", str(out)]) == 0
    assert f"chosen by auto  {summary['chosen_because']}" in capsys.readouterr().out


def test_an_explicit_solver_wins_and_says_nothing_of_a_choice(vowel, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["train", str(vowel), "-o", str(out), "--solver", "nesvm", "-q",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["solver"] == "nesvm" == load_model(out).params["solver"]
    assert "chosen_because" not in summary and "chosen_because" not in load_model(out).summary


@pytest.mark.parametrize("flags, solver", [(["--l1", "0.01"], "newton"),
                                           (["--penalty", "l1", "--loss", "hinge"], "nesvm"),
                                           (["--no-shrinking"], "dcd"),
                                           (["--mode", "paper", "--mu", "0.1", "--rho", "1"],
                                            "alm"),
                                           (["--loss", "squared"], "nesvm")])
def test_a_parameter_some_solvers_take_limits_the_choice(vowel, tmp_path, capsys, flags,
                                                         solver):
    out = tmp_path / "m.json"
    assert main(["train", str(vowel), "-o", str(out), "-q", "--json", "--max-passes", "3",
                 *flags]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["solver"] == solver


def test_a_parameter_no_solver_auto_chooses_takes_is_one_line_exit_2(vowel, tmp_path, capsys):
    rc = main(["train", str(vowel), "-o", str(tmp_path / "m.json"), "--gap-decay", "0.01"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "--gap-decay" in err and "--solver auto" in err and not (tmp_path / "m.json").exists()
    with pytest.raises(InvalidParameterError, match="gap_decay"):
        ss.LinearSVC(gap_decay=0.01).fit(np.eye(4), [0, 1, 0, 1])


def test_two_parameters_no_one_solver_takes_are_refused_before_any_pass():
    with pytest.raises(InvalidParameterError, match="no solver takes all of l1, penalty"):
        _auto.candidates({"l1": 0.1, "penalty": "l1"})


def test_the_estimator_chooses_at_fit_and_keeps_auto_as_its_parameter():
    X = np.random.default_rng(0).normal(size=(200, 5))
    y = np.where(X[:, 0] + 0.1 * X[:, 1] > 0, 1, -1)
    clf = ss.LinearSVC(C=0.5).fit(X, y)
    assert clf.get_params()["solver"] == "auto"          # (scikit-learn's clone: unchanged)
    assert clf.model_.params["solver"] in _auto.CHOICES
    assert "200 rows, 5 features, 2 classes" in clf.model_.summary["chosen_because"]
    assert clf.converged_


def test_a_path_of_C_values_is_chosen_for_at_its_largest_C(vowel):
    f = _auto.facts(_open(vowel), {"C_path": [0.01, 100.0]}, memory="1GB", cluster=False)
    assert f.C == 100.0
    models, _ = train(str(vowel), C_path=[0.1, 1.0], max_passes=5)
    assert len({m.params["solver"] for m in models}) == 1
    assert all(m.summary["chosen_because"] for m in models)


def _open(path):
    from streamsvm.io import open_store
    return open_store(str(path))


def _f(**kw):
    base = dict(rows=10**5, features=100, classes=2, nnz_per_row=20.0, r2=2.0, C=1.0,
                loss="hinge", in_ram=True, cluster=False)
    return _auto.Facts(**{**base, **kw})


@pytest.mark.parametrize("kw, first", [
    (dict(), "dcd"),                                                   # C·R² 2
    (dict(C=100.0), "dcd"),                                            # binary hinge, 200
    (dict(C=100.0, in_ram=False), "alm"),                              # the same, streamed
    (dict(C=100.0, classes=5), "dcd"),                                 # ≤ 800: multiclass
    (dict(C=1000.0, classes=5), "newton"),                             # dense, in memory
    (dict(C=1000.0, classes=5, features=10**5), "alm"),                # no dense Hessian
    (dict(C=1000.0, classes=5, in_ram=False), "alm"),                  # streamed
    (dict(loss="squared_hinge", C=100.0), "newton"),                   # binary, in memory
    (dict(loss="squared_hinge", C=1e4, classes=3), "dcd"),             # multiclass: dcd
    (dict(loss="squared_hinge", C=100.0, in_ram=False), "alm"),        # streamed
    (dict(loss="squared_hinge", C=0.01, in_ram=False), "dcd"),
    (dict(loss="squared_hinge", C=2.0, in_ram=False), "dcd"),          # C·R² 4 ≤ 5
    (dict(loss="squared_hinge", C=5.0, in_ram=False), "alm"),          # C·R² 10
    (dict(features=10**6), "avsf"),                                    # wide
    (dict(cluster=True, loss="squared_hinge"), "newton"),
    (dict(cluster=True, loss="squared_hinge", features=10**5), "dcd"),
    (dict(cluster=True, C=100.0), "newton"),
    (dict(cluster=True, C=100.0, features=10**5), "dcd"),
])
def test_the_rules_rank_by_c_r2_loss_classes_memory_and_cluster(kw, first):
    ranked, why = _auto._ranked(_f(**kw))
    assert ranked[0] == first and why
    assert set(ranked) <= set(_auto.CHOICES) and len(set(ranked)) == len(ranked)


def test_the_reason_names_the_pick_the_rules_would_make_when_a_parameter_limits_it(vowel):
    order, because = _auto.choose(_open(vowel), {"C": 100.0, "loss": "hinge", "l1": 0.01},
                                 memory="1GB", cluster=False)
    assert order == ["newton"] and "but only newton takes C, l1, loss" in because


def test_a_value_no_solver_takes_is_that_parameter_s_error():
    with pytest.raises(InvalidParameterError, match="'loss' parameter"):
        _auto.candidates({"loss": "logistic"})


def test_a_solver_refusing_the_budget_gives_way_to_the_next_ranked(vowel, monkeypatch):
    from streamsvm.exceptions import BudgetTooSmallError
    from streamsvm.solvers.dcd import DCDSolver

    def refuse(self, sched):
        raise BudgetTooSmallError("The 'memory' budget (1 MB) is too small for dcd")
    monkeypatch.setattr(DCDSolver, "start", refuse)
    order, _ = _auto.choose(_open(vowel), {}, memory="1GB", cluster=False)
    model, res = train(str(vowel), max_passes=50)
    assert order[0] == "dcd" and model.params["solver"] == order[1]
    assert f"dcd refused the memory budget: the next ranked, {order[1]}" in \
        model.summary["chosen_because"]
    with pytest.raises(BudgetTooSmallError, match="too small for dcd"):
        train(str(vowel), shrinking=False)              # dcd alone takes it: its error
