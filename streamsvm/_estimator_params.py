"""The parameters of the estimators, as scikit-learn reads them.

scikit-learn finds an estimator's parameters in the signature of its ``__init__`` (for
``clone``, ``GridSearchCV`` and ``check_estimator``), so every parameter an estimator takes
is written there: the run's (``memory``, ``random_state``, ...), ``solver``, and the
parameters of every solver it can run (the union of the solvers' tables). A parameter's
default is the one every solver declaring it shares (``C=1.0``, ``tol=1e-3``), else None:
"the chosen solver's own default" (``loss``: squared hinge for dcd, hinge for newton). At
``fit`` a parameter the chosen solver does not take is refused unless it still holds its
default; the fitted model's ``params`` hold every value the solver used.
"""

from __future__ import annotations

import inspect

import numpy as np

from ._auto import AUTO, CHOICES
from .exceptions import InvalidParameterError
from .solvers import SOLVERS

__all__ = ["RUN_PARAMS", "estimator_signature", "solver_kwargs"]

RUN_PARAMS = {"memory": "1GB", "random_state": 0, "checkpoint": None, "resume": True,
              "overwrite_checkpoint": False, "warm_start": False, "chunk_rows": 65536,
              "scheduler": None}
"""The run's parameters and their defaults (not a solver's)."""

_UNSET = object()


def _defaults(solvers) -> dict:
    """Name -> signature default over the union of ``solvers``' tables (module doc)."""
    seen: dict[str, list] = {}
    for name in solvers:
        for p in SOLVERS[name].params:
            seen.setdefault(p.name, []).append((name, p.default))
    out = {}
    for pname, pairs in seen.items():
        values = [v for _, v in pairs]
        out[pname] = values[0] if all(_same(v, values[0]) for v in values) else None
    return out


def _same(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return a is b


def estimator_signature(solvers, default_solver: str, *, with_solver: bool = True):
    """``(signature, defaults)`` of an estimator running ``solvers`` (keyword-only)."""
    defaults = {}
    if with_solver:
        defaults["solver"] = default_solver
    defaults.update(_defaults(solvers))
    defaults.update(RUN_PARAMS)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v)
               for k, v in defaults.items()]
    return inspect.Signature(params), defaults


def is_default(value, default) -> bool:
    """Whether ``value`` is still the signature's ``default`` (arrays and dicts included)."""
    if value is default:
        return True
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return False
    return _same(value, default)


def solver_kwargs(est, defaults: dict, solver: str) -> dict:
    """The parameters of ``est`` to give ``solver``: those it declares, except a None that
    stands for its own default; any other parameter must still hold its default."""
    if solver == AUTO:
        return _auto_kwargs(est, defaults)
    table = SOLVERS[solver].param_table()
    out = {}
    for name, default in defaults.items():
        if name in RUN_PARAMS or name == "solver":
            continue
        value = getattr(est, name, _UNSET)
        if value is _UNSET:
            continue
        if name in table:
            if not (value is None and default is None):
                out[name] = value
        elif name == "C_path" and value is not None:      # one run per C (_c_search.py)
            out[name] = value
        elif not is_default(value, default):
            takes = sorted(s for s in SOLVERS if name in SOLVERS[s].param_table())
            raise InvalidParameterError(
                f"The {name!r} parameter of {type(est).__name__} is taken by "
                f"{' and '.join(takes) or 'no solver'}, not by the chosen solver {solver!r}: "
                f"leave it at its default ({default!r}) or choose "
                f"{'that solver' if len(takes) == 1 else 'one of those solvers'}.")
    return out


def _auto_kwargs(est, defaults: dict) -> dict:
    """``solver="auto"``: the parameters set away from their defaults (auto chooses among
    the solvers taking them all, ``_auto.candidates``); one no solver auto chooses takes
    (ww's) is refused."""
    taken = {p.name for s in CHOICES for p in SOLVERS[s].params}
    out = {}
    for name, default in defaults.items():
        value = getattr(est, name, _UNSET)
        if name in RUN_PARAMS or name == "solver" or value is _UNSET or \
                is_default(value, default):
            continue
        if name not in taken and name != "C_path":
            raise InvalidParameterError(
                f"The {name!r} parameter of {type(est).__name__} is not taken by any solver "
                f"solver='auto' chooses ({', '.join(CHOICES)}): leave it at its default "
                f"({default!r}) or choose the solver taking it")
        out[name] = value
    return out
