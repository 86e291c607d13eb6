"""One set of defaults: the parameters every solver shares (C, loss, bias, tol,
class_weight) have one default, shown in every solver's ``--help`` and in the estimators'
signatures; ww on two classes solves the binary hinge SVM with the user's C."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import streamsvm as ss
from streamsvm.cli import build_parser
from streamsvm.solvers import SOLVERS

SHARED = {"C": 1.0, "loss": "squared_hinge", "bias": 1.0, "tol": 1e-3, "class_weight": None}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_every_solver_taking_a_shared_parameter_has_its_one_default(name):
    have = {s: SOLVERS[s].param_table()[name].default for s in SOLVERS
            if name in SOLVERS[s].param_table()}
    assert len(have) >= 5 and set(map(repr, have.values())) == {repr(SHARED[name])}, have


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_every_solvers_help_shows_the_shared_defaults(solver, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--solver", solver, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, value in SHARED.items():
        flag = next(p.cli_flag for p in SOLVERS["dcd"].params if p.name == name)
        at = text.index(f" {flag} ", text.index("solver parameters"))
        assert f"(default {value})" in text[at:at + 400], (solver, name)


@pytest.mark.parametrize("cls", [ss.LinearSVC, ss.WestonWatkinsSVC])
def test_the_estimators_show_the_same_defaults(cls):
    params = inspect.signature(cls.__init__).parameters
    for name, value in SHARED.items():
        if name in params:
            assert params[name].default == value, name


def test_ww_on_two_classes_solves_the_binary_hinge_svm_with_the_users_C():
    """ww and dcd (hinge) with the same C reach the same binary model (to the tolerance)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6))
    y = np.where(X @ rng.normal(size=6) + 0.3 * rng.normal(size=400) > 0, 1, -1)
    ww = ss.WestonWatkinsSVC(C=0.5, tol=1e-6, gap_decay=0.0, max_passes=2000).fit(X, y)
    dcd = ss.LinearSVC(C=0.5, loss="hinge", tol=1e-6, max_passes=2000).fit(X, y)
    assert ww.model_.problem["C"] == 0.5 == ww.model_.params["C"]
    assert ww.model_.summary["primal"] == pytest.approx(dcd.model_.summary["primal"], rel=1e-4)
    np.testing.assert_allclose(ww.coef_, dcd.coef_, atol=1e-2)
