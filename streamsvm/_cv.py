"""Cross-validation and the choice of C in shared passes: ``streamsvm train STORE --cv K``
(with ``--C-path``), :func:`cross_validate`, :func:`cross_validate_path`.

The K fold models train together as one problem (:class:`~streamsvm.io.FoldStore`):
each pass reads every row once and the row updates the K − 1 models that train on it, so
K-fold cross-validation costs the passes of about one training, plus one pass that scores
every row with the model that held it out. Folds come from a seeded hash of the row id
(the same whatever the chunking or the read order). A search over m values of C trains its
m · K models the same way, in one run: the rows of each C scaled by ``√(C / C_max)`` (the
module doc of ``io/_folds.py``), so the search costs about the passes of one training at
the largest C, not m · K trainings.

What is certified: the run's relative gap is that of the (weighted) sum of the models'
objectives, run to ``tol / (m · K)``. Each model's own gap is at most its share of the sum's
gap (every gap is ≥ 0), so each reports the bound ``(C_j / C_max) (P − D) / P_jf`` with
``P_jf`` its own primal objective computed in the scoring pass: about ``tol`` when the
models' objectives are alike. (The joint problem at ``tol`` itself left bounds near
``K · tol``: a9a, C = 1, K = 5, 3.9e-3 for dcd's hinge; at ``tol / K`` 9.3e-4, for 55 passes
instead of 50.) The first-order solvers (nesvm, alm) pay for that tolerance: ``python
tools/bench.py cv --search`` (BENCHMARKS.md, "Cross-validation") measures every solver.

Every solver trains this way, with two exceptions where a model's bias is not a feature like
the others: a free (unregularized) intercept, alm's default (``free_bias=False`` gives alm
LIBLINEAR's regularized bias), and newton's ``l1`` with a bias (the bias stays out of its ℓ1
term; ``bias=0``).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from ._auto import AUTO
from .exceptions import InvalidParameterError
from .model import LinearModel

__all__ = ["cross_validate", "cross_validate_path", "CVResult"]

log = logging.getLogger(__name__)


@dataclasses.dataclass
class CVResult:
    """What :func:`cross_validate` returns (and :func:`cross_validate_path`, one per C).

    Attributes
    ----------
    models : list of LinearModel
        Fold ``f``'s model (trained on every row outside fold ``f``).
    folds : list of dict
        Per fold: ``rows`` held out, ``accuracy`` and the metrics of ``evaluate`` on them
        (confusion matrix, per-class precision / recall / F1, balanced accuracy, binary ROC
        AUC), ``primal`` (the model's objective on its training rows) and ``gap_bound`` (its
        certified relative duality gap is at most this).
    result : SolveResult
        The run of the K models together (passes, converged, the summed objectives).
    solver : str
    chosen_because : str or None
        With ``solver="auto"``: why that solver.
    """

    models: list
    folds: list
    result: object
    solver: str
    chosen_because: str | None = None

    @property
    def accuracy(self) -> float:
        """Held-out accuracy over every row (each scored by the model that held it out)."""
        return sum(f["correct"] for f in self.folds) / sum(f["rows"] for f in self.folds)

    @property
    def passes(self) -> float:
        """Passes over the data: the training's plus the scoring pass (with several Cs,
        shared by all)."""
        return float(self.result.passes) + 1.0

    def summary(self) -> dict:
        """The JSON summary of ``train --cv``: mean and spread of the folds' held-out
        accuracies, passes, the certificate, every fold's report."""
        acc = np.array([f["accuracy"] for f in self.folds if f["rows"]])
        bal = [f["balanced_accuracy"] for f in self.folds if f["balanced_accuracy"] is not None]
        out = {"cv": len(self.folds), "solver": self.solver, "accuracy": self.accuracy,
               "accuracy_mean": float(acc.mean()), "accuracy_std": float(acc.std()),
               "balanced_accuracy_mean": float(np.mean(bal)) if bal else None,
               "passes": self.passes, "training_passes": float(self.result.passes),
               "converged": bool(self.result.converged), "gap": float(self.result.stop_value),
               "largest_fold_gap_bound": max(f["gap_bound"] for f in self.folds),
               "empty_folds": sum(1 for f in self.folds if not f["rows"]),
               "folds": self.folds}
        if self.chosen_because:
            out["chosen_because"] = self.chosen_because
        return out


def cross_validate(data, y=None, *, cv: int = 5, solver: str = AUTO, seed: int = 0,
                   storage_options=None, **kwargs) -> CVResult:
    """K-fold cross-validation of ``solver`` in shared passes (module doc).

    Parameters
    ----------
    data : StoreMeta, str, or array-like / sparse matrix of shape (n_rows, n_features)
        A store (or its path or URL), or in-memory rows with their labels ``y``.
    y : array-like of shape (n_rows,), optional
        With in-memory ``data``: the labels (numbers, or any sortable labels such as
        strings, given back by the fold models' ``predict``).
    cv : int
        Folds, at least 2.
    solver : str
        A solver name or ``"auto"`` (chosen from the store, as by :func:`streamsvm.train`).
    seed : int
        Seed of the folds and of every random order.
    **kwargs
        :func:`streamsvm.train`'s run options and the solver's parameters.

    Examples
    --------
    >>> r = cross_validate("a9a.zarr", cv=5, C=1.0)            # doctest: +SKIP
    >>> r.summary()["accuracy_mean"], r.passes                  # doctest: +SKIP
    """
    if kwargs.get("C_path") is not None:
        raise InvalidParameterError("cross_validate trains one C: for a search over Cs, "
                                    "cross_validate_path(data, cv, Cs)")
    labels = None
    if y is not None:
        from ._estimator_input import check_fit_X, check_y
        from .io import InMemoryStore
        X = check_fit_X(data)
        y, labels = check_y(y, X.shape[0], "cross_validate")
        data = InMemoryStore(X, y)
    out = cross_validate_path(data, cv, None, solver=solver, seed=seed,
                              storage_options=storage_options, **kwargs)[0][0]
    if labels is not None:
        out.models = [dataclasses.replace(m, labels=labels) for m in out.models]
    return out


def cross_validate_path(store, cv: int, Cs, *, solver: str = AUTO, seed: int = 0,
                        storage_options=None, **kwargs) -> tuple[list, int]:
    """``(results, best)``: a :class:`CVResult` per C of ``Cs`` (None: the one C of the
    parameters), in the order given, and the index of the best held-out accuracy (the
    smallest C among ties, as LIBLINEAR's ``-C``). Every C's K fold models train together
    in the same passes (the rows of each C scaled, module doc of ``io/_folds.py``), and one
    scoring pass scores them all: the results share one run."""
    from ._train import train
    from .exceptions import BudgetTooSmallError
    from .io import StoreMeta, open_store
    from .io import FoldStore
    from .solvers import SOLVERS
    if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv < 2:
        raise InvalidParameterError(f"cv must be an integer of at least 2 folds, got {cv!r}")
    for key, why in (("init_model", "cv trains every fold model from the start: drop "
                      "init_model (--init-model)"),
                     ("C_path", "give the Cs of a cross-validated search as Cs")):
        if kwargs.get(key) is not None:
            raise InvalidParameterError(why)
    if not isinstance(store, StoreMeta):
        store = open_store(store, storage_options=storage_options)
    names = _solver_param_names()
    run = {k: v for k, v in kwargs.items() if k not in names and k != "init_model"}
    params = {k: v for k, v in kwargs.items() if k in names}
    if Cs is not None:
        Cs = [float(C) for C in SOLVERS["nesvm"].param_table()["C_path"].validate("cv", Cs)]
        params.pop("C", None)
    ranked, because = [solver], None
    if solver == AUTO:
        from ._auto import choose
        ranked, because = choose(store, params, memory=run.get("memory", "1GB"),
                                 cluster=run.get("scheduler") is not None)
        why = [_cannot_split(s, params) for s in ranked]
        if all(why):
            raise InvalidParameterError(why[0])
        ranked = [s for s, w in zip(ranked, why) if w is None]
    elif solver not in SOLVERS:
        raise InvalidParameterError(f"The 'solver' parameter must be one of "
                                    f"{sorted([AUTO, *SOLVERS])}. Got {solver!r} instead.")
    elif _cannot_split(solver, params):
        raise InvalidParameterError(_cannot_split(solver, params))
    for i, name in enumerate(ranked):
        table = SOLVERS[name].param_table()
        bias = float(params.get("bias", table["bias"].default)) if "bias" in table else 0.0
        path = Cs or [float(params.get("C", table["C"].default))]
        top = max(path)
        folds = FoldStore(store, int(cv), seed, bias, [np.sqrt(C / top) for C in path])
        # the sum's relative gap at tol / (models): each model's certified gap near tol
        joint = dict(params, C=top, tol=float(params.get("tol", table["tol"].default)) /
                     folds.blocks, **({"bias": 0.0} if bias else {}))
        log.info("cv: %d fold models of %s%s trained together (%s rows read once a pass, "
                 "each into the %d models that train on it)", folds.blocks, name,
                 f" for {len(path)} values of C" if len(path) > 1 else "",
                 f"{store.n_rows:,}", folds.m)
        try:
            model, result = train(folds, solver=name, seed=seed,
                                  storage_options=storage_options, **run, **joint)
        except BudgetTooSmallError:
            if solver != AUTO or i == len(ranked) - 1:
                raise
            log.info("cv: %s refused the memory budget, trying the next ranked", name)
            continue
        models = [_split(model, folds, store, name, dict(params, C=C), bias, j)
                  for j, C in enumerate(path)]
        scored = _score(models, folds, store, result.dual, [C / top for C in path])
        results = [CVResult(ms, fs, result, name, because) for ms, fs in zip(models, scored)]
        acc = [r.accuracy for r in results]
        best = max(range(len(results)), key=lambda j: (acc[j], -path[j]))
        return results, best
    raise AssertionError("unreachable: the last ranked solver raises")  # pragma: no cover


def _solver_param_names() -> set:
    from .solvers import SOLVERS
    return {p.name for cls in SOLVERS.values() for p in cls.params}


def _cannot_split(solver: str, params: dict) -> str | None:
    """Why ``solver`` with ``params`` cannot train fold models together, or None."""
    from .solvers import SOLVERS
    table = SOLVERS[solver].param_table()
    bias = params.get("bias", table["bias"].default) if "bias" in table else 0.0
    if bias and params.get("l1", 0.0) and "l1" in table:
        return (f"cv: {solver}'s ℓ1 term leaves the bias out, and the fold models trained "
                f"together keep the bias as a feature of each model, in it: give bias=0, or "
                f"l1=0")
    if "free_bias" not in table or not params.get("free_bias", table["free_bias"].default):
        return None
    if not bias:
        return None
    said = "by default " if "free_bias" not in params else ""
    return (f"cv: {solver} {said}fits a free (unregularized) intercept, which the fold models "
            f"trained together cannot each keep: give free_bias=False ("
            f"LIBLINEAR's regularized bias) or bias=0, or another solver")


def _split(model, folds, store, solver: str, params: dict, bias: float, j: int) -> list:
    """The fold models of the ``j``-th C: block ``j * K + f`` of the joint weights times
    the C's scale (module doc of ``io/_folds.py``), its bias feature's weight times
    ``bias`` as the intercept."""
    from ._train import make_solver
    d, w, scale = store.n_features, folds.width, float(folds.scales[j])
    slv = make_solver(solver, params)
    problem = slv.problem(store).resolved(store.classes, store.label_counts)
    out = []
    for f in range(folds.k):
        b = j * folds.k + f
        block = model.coef[:, b * w:(b + 1) * w] * scale
        intercept = bias * block[:, d] if bias else np.zeros(block.shape[0])
        summary = dict(model.summary, cv_fold=f, cv=folds.k)
        out.append(LinearModel(np.ascontiguousarray(block[:, :d]),
                               np.asarray(intercept, dtype=np.float64), store.classes,
                               store.task, {"solver": solver, **slv.get_params()}, summary,
                               problem=problem.to_dict()))
    return out


def _score(models_by_run, folds, store, dual: float, weights) -> list:
    """One pass over ``store``: every row scored by the model of each C that held it out
    (the metrics of ``evaluate``), and every model's primal objective on its training rows;
    a list of fold reports per C. ``dual``: the joint run's, whose objective weighs the C
    ``j``'s models by ``1 / weights[j]`` (``C_j / C0``), so that a model's gap is at most
    ``weights[j]`` times the joint gap."""
    from ._evaluate import _scores
    from ._metrics import Metrics
    from .io import fold_of
    k, classes, binary = folds.k, store.classes, store.task == "binary"
    flat = [m for ms in models_by_run for m in ms]
    nm = flat[0].coef.shape[0]
    joint = dataclasses.replace(flat[0], coef=np.vstack([m.coef for m in flat]),
                                intercept=np.concatenate([m.intercept for m in flat]))
    W = np.ascontiguousarray(joint.coef.T)
    problems = [ms[0].problem_obj() for ms in models_by_run]
    costs = [p.costs(classes) for p in problems]
    R = len(models_by_run)
    metrics = [[Metrics(classes, binary=binary) for _ in range(k)] for _ in range(R)]
    loss = np.zeros((R, k))
    correct = np.zeros((R, k), dtype=np.int64)
    rows = np.zeros(k, dtype=np.int64)
    for chunk in store.iter_chunks():
        scores = _scores(joint, W, chunk.indptr, chunk.indices, chunk.data)
        which = fold_of(chunk.row_start, chunk.n_rows, k, folds.seed)
        truth = (chunk.y > 0).astype(np.int64) if binary else chunk.y.astype(np.int64)
        labels = classes[truth]
        for f in range(k):
            held = which == f
            rows[f] += int(np.count_nonzero(held))
            for r in range(R):
                s = scores[:, (r * k + f) * nm:(r * k + f + 1) * nm]
                pred = models_by_run[r][f].predict_encoded(s[held, 0] if binary else s[held])
                correct[r, f] += int(np.count_nonzero(pred == truth[held]))
                metrics[r][f].add(truth[held], pred, s[held, 0] if binary else None)
                loss[r, f] += problems[r].loss_sum(s[~held], labels[~held], classes, costs[r])
    primal = np.array([[p.regularizer(m.coef, m.intercept) for m in ms]
                       for p, ms in zip(problems, models_by_run)]) + loss
    gap = max(float((primal / np.asarray(weights)[:, None]).sum() - dual), 0.0)
    out = []
    for r, ms in enumerate(models_by_run):
        out.append([{"fold": f, "rows": int(rows[f]), "correct": int(correct[r, f]),
                     "accuracy": int(correct[r, f]) / rows[f] if rows[f] else None,
                     **metrics[r][f].report(), "primal": float(primal[r, f]),
                     "gap_bound": weights[r] * gap / max(abs(float(primal[r, f])), 1e-300)}
                    for f in range(k)])
    return out
