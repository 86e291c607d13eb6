"""A path of C values for every solver, and the choice of C on a validation store.

``nesvm`` trains a path of C values in the same passes (its ``C_path``). Every other solver
takes ``C_path`` too: one run per C, from the smallest C up, the primal solvers (newton,
alm) each warm-started from the previous C's model (:mod:`streamsvm._warm_start`), the dual
ones afresh. ``streamsvm train --C-path ... --validation STORE`` then scores every model on
the validation store and picks the C of the best accuracy (the smallest C among ties, as
LIBLINEAR's ``-C`` does), reporting each C's passes against the total.
"""

from __future__ import annotations

import dataclasses
import logging

from .exceptions import InvalidParameterError

__all__ = ["sequential_path", "train_path", "choose_C"]

log = logging.getLogger(__name__)


def sequential_path(solver: str, params: dict) -> bool:
    """Whether ``params`` ask ``solver`` for a path of C values it does not train in-pass."""
    from .solvers import SOLVERS
    cls = SOLVERS.get(solver)
    return params.get("C_path") is not None and cls is not None and \
        "C_path" not in cls.param_table()


def train_path(train, store, solver: str, params: dict, init_model, checkpoint):
    """``(models, result)`` of one ``train(store, C=C, ...)`` per C of ``params["C_path"]``
    (models in the path's order; ``result`` their sum: passes, iterations, converged if
    every run did, the largest gap)."""
    from .solvers import SOLVERS
    params = dict(params)
    path_param = SOLVERS["nesvm"].param_table()["C_path"]
    Cs = list(path_param.validate(f"solver {solver!r}", params.pop("C_path")))
    params.pop("C", None)
    if checkpoint is not None:
        raise InvalidParameterError(
            f"checkpoint=... with C_path trains one run per C for {solver}: give each C its "
            f"own run and checkpoint directory (nesvm trains a path in one run)")
    warm = SOLVERS[solver].warm_start
    models, results, prev = [None] * len(Cs), [], init_model
    for i in sorted(range(len(Cs)), key=Cs.__getitem__):
        log.info("C path: C=%g (%d of %d)%s", Cs[i], len(results) + 1, len(Cs),
                 ", warm-started" if warm and prev is not None else "")
        models[i], r = train(store, solver=solver, C=Cs[i], init_model=prev if warm else None,
                             **params)
        results.append(r)
        prev = models[i]
    last = results[-1]
    result = dataclasses.replace(
        last, n_iter=sum(r.n_iter for r in results), passes=sum(r.passes for r in results),
        converged=all(r.converged for r in results),
        stop_value=max(r.stop_value for r in results),
        history=[h for r in results for h in r.history])
    return models, result


def choose_C(models, validation, storage_options=None):
    """``(index, rows)``: the model of the best accuracy on ``validation`` (the smallest C
    among ties) and one row per model ``{"C", "passes", "accuracy", "converged"}``."""
    from ._evaluate import evaluate
    rows = []
    for m in models:
        acc = evaluate(m, validation, storage_options=storage_options)["accuracy"]
        rows.append({"C": float(m.params["C"]), "passes": m.summary.get("passes"),
                     "accuracy": acc, "converged": m.summary.get("converged")})
    best = max(range(len(rows)), key=lambda i: (rows[i]["accuracy"], -rows[i]["C"]))
    return best, rows
