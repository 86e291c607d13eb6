"""The presets of the solver suite (``tools/bench.py suite --suite NAME``) and its constants."""

from __future__ import annotations

from .suite_data import REAL

__all__ = ["SUITES", "OOC", "SCHEMA", "TARGET_GAP", "IN_MEMORY_METHODS"]

SCHEMA = "streamsvm-bench/1"
TARGET_GAP = 1e-3

SUITES = {
    "quick": dict(
        datasets=list(REAL) + ["synth-1e5"], Cs=[1.0],
        binary_losses=["hinge", "squared_hinge"],
        multiclass_losses=["hinge", "squared_hinge", "ww"],
        methods=None, repeat=3, repeat_under=2.0, tol=1e-3, max_passes=200,
        eps_dual=[0.1, 0.01, 0.001, 1e-4], eps_primal=[0.1, 0.01, 0.001, 1e-4],
        sgd_epochs=10, vw_passes=[1, 2, 4, 8, 16], reference_tol=1e-5, ladder_budget=15.0,
        timeout=300, ooc_rows=None),
    "full": dict(
        datasets=list(REAL) + ["synth-1e5", "synth-1e6", "synth-1e7"], Cs=[0.1, 1.0, 10.0],
        binary_losses=["hinge", "squared_hinge"],
        multiclass_losses=["hinge", "squared_hinge", "ww"],
        methods=None, repeat=3, repeat_under=2.0, tol=1e-3, max_passes=500,
        eps_dual=[0.1, 0.01, 0.001, 1e-4, 1e-5], eps_primal=[0.1, 0.01, 0.001, 1e-4, 1e-5],
        sgd_epochs=20, vw_passes=[1, 2, 4, 8, 16, 32], reference_tol=1e-5, ladder_budget=600.0,
        timeout=7200, ooc_rows=10**7),
    "dcd": dict(
        datasets=["a9a", "mushrooms", "synth-1e7"], Cs=[1.0],
        binary_losses=["hinge", "squared_hinge"], multiclass_losses=["hinge"],
        methods=["streamsvm-dcd", "liblinear-s3", "liblinear-s1", "sklearn-sgd", "vw"],
        repeat=9, repeat_under=2.0, tol=1e-3, max_passes=200,
        eps_dual=[0.1, 0.01, 0.001, 1e-4, 1e-5], eps_primal=[0.1, 0.01, 0.001, 1e-4],
        sgd_epochs=10, vw_passes=[1, 2, 4, 8, 16], reference_tol=1e-6, ladder_budget=60.0,
        timeout=3600, ooc_rows=10**7, ooc_losses=["hinge"]),
}
#: Out-of-core settings (data sets with at least ``ooc_rows`` rows).
OOC = dict(budget_fraction=0.125, sgd_epochs=3, vw_passes=[1, 3], repeat=1)

#: Methods that need the whole data set in memory (not run out of core).
IN_MEMORY_METHODS = ("liblinear", "linearsvc")
