"""The solver contract: ``Solver(**params).solve(sched, state=None, callback=None)``.

Solvers declare their parameters (validated before the first pass), receive a
:class:`~streamsvm.schedule.PassScheduler` (never a store), and return a frozen
:class:`SolveResult`. Each registers itself in :data:`SOLVERS` under its public name, so
estimators, the CLI and the benchmark harness discover solvers without listing them.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from ..exceptions import InvalidParameterError

__all__ = ["SolveResult", "SOLVERS", "register", "check_param", "class_costs"]

SOLVERS: dict[str, type] = {}


def register(name: str):
    """Class decorator adding a solver to :data:`SOLVERS`."""
    def deco(cls):
        cls.name = name
        SOLVERS[name] = cls
        return cls
    return deco


@dataclasses.dataclass(frozen=True, eq=False)
class SolveResult:
    """What a solver returns.

    Attributes
    ----------
    coef : ndarray of shape (n_models, n_features)
    intercept : ndarray of shape (n_models,)
    n_iter : int
        Outer iterations (for ``dcd``: sweeps, streamed or in the RAM slab).
    passes : float
        Rows visited / n_rows (fractional passes over the data).
    converged : bool
        Whether the stopping rule held (False: stopped at ``max_passes``).
    stop_value : float
        The certificate at the end (``dcd``: largest relative duality gap over models).
    primal, dual : float
        Objectives at the end (summed over one-vs-rest models).
    history : list of dict
        One entry per outer iteration (pass, passes, primal, dual, gap, active, ...).
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    passes: float
    converged: bool
    stop_value: float
    primal: float
    dual: float
    history: list

    def summary(self) -> dict:
        return {"n_iter": self.n_iter, "passes": round(self.passes, 6),
                "converged": self.converged, "gap": self.stop_value, "primal": self.primal,
                "dual": self.dual}


def check_param(owner: str, name: str, value, kind: str, low=None, high=None,
                low_open: bool = False, choices=None):
    """Validate one parameter with scikit-learn's wording; returns the value."""
    def fail(desc):
        raise InvalidParameterError(f"The {name!r} parameter of {owner} must be {desc}. "
                                    f"Got {value!r} instead.")
    if choices is not None:
        if value not in choices:
            fail("one of " + ", ".join(repr(c) for c in choices))
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            fail(f"a float in the range {_range(low, high, low_open)}")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            fail(f"an int in the range {_range(low, high, low_open)}")
    if low is not None and (value < low or (low_open and value == low)):
        fail(f"a {kind} in the range {_range(low, high, low_open)}")
    if high is not None and value > high:
        fail(f"a {kind} in the range {_range(low, high, low_open)}")
    return value


def _range(low, high, low_open):
    lo = "-inf" if low is None else low
    hi = "inf" if high is None else high
    return f"{'(' if low_open or low is None else '['}{lo}, {hi}{']' if high is not None else ')'}"


def class_costs(owner: str, C: float, class_weight, task: str, classes: np.ndarray,
                label_counts: dict):
    """Per-model costs ``(Cp, Cn)`` following LIBLINEAR's ``-wi`` convention.

    Binary: ``Cp = C·w(positive class)``, ``Cn = C·w(negative class)``. One-vs-rest model
    ``c``: ``Cp = C·w(c)``, ``Cn = C``. ``class_weight`` maps original labels to
    multipliers, or is ``"balanced"`` (``n_rows / (n_classes · count(c))``).
    """
    from ..io._labels import label_key
    keys = [label_key(c) for c in classes]
    if class_weight is None:
        weights = np.ones(len(classes))
    elif class_weight == "balanced":
        counts = np.array([label_counts.get(k, 0) for k in keys], dtype=np.float64)
        weights = counts.sum() / (len(classes) * np.maximum(counts, 1))
    elif isinstance(class_weight, dict):
        norm = {label_key(float(k)): v for k, v in class_weight.items()}
        unknown = sorted(set(norm) - set(keys))
        if unknown:
            raise InvalidParameterError(f"The 'class_weight' parameter of {owner} names labels "
                                        f"{unknown} that are not in the data (labels: {keys})")
        for k, v in norm.items():
            check_param(owner, f"class_weight[{k}]", v, "float", 0.0, low_open=True)
        weights = np.array([float(norm.get(k, 1.0)) for k in keys])
    else:
        raise InvalidParameterError(f"The 'class_weight' parameter of {owner} must be a dict, "
                                    f"'balanced' or None. Got {class_weight!r} instead.")
    if task == "binary":
        if len(classes) == 1:
            return np.array([C * weights[0]]), np.array([C * weights[0]])
        return np.array([C * weights[1]]), np.array([C * weights[0]])
    return C * weights, np.full(len(classes), float(C))
