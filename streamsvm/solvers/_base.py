"""The solver contract (DESIGN.md §5).

Every solver subclasses :class:`Solver` and declares

* its **parameters** once, as a table of :class:`Param` (name, kind, range, default, help):
  validation, the estimator's ``get_params``/``set_params``, the CLI's options and their
  ``--help`` are generated from it;
* its **problem** (:meth:`Solver.problem`, a :class:`~streamsvm.problem.Problem`): models,
  ``evaluate`` and the benchmark compute objectives and predictions from it;
* one **outer iteration** (:meth:`Solver.step`), written as a plan of passes over the
  scheduler, an exact certificate on demand (:meth:`Solver.final_check`), and
  :meth:`Solver.state_dict` / :meth:`Solver.load_state_dict`.

The shared driver (``_driver.py``) runs every solver: the loop, the stopping rule on the
certificate, ``max_passes``, checkpoints, resume, progress and the history. A solver
registers itself under its public name with :func:`register`; the front end, the CLI and
the benchmark find it in :data:`SOLVERS`.
"""

from __future__ import annotations

import abc
import dataclasses
import numbers

import numpy as np

from ..exceptions import InvalidParameterError
from ..kernels import Costs

__all__ = ["Param", "Solver", "SolveResult", "SOLVERS", "register", "COMMON_PARAMS", "C_PARAM",
           "BIAS_PARAM", "CLASS_WEIGHT_PARAM", "SVC_LOSS_PARAM", "rel_gap"]

SOLVERS: dict[str, type] = {}


REGISTER_HOOKS: list = []
"""Called with no argument after each :func:`register` (the estimators rebuild their
signatures, which list every solver's parameters)."""


def register(name: str):
    """Class decorator adding a solver to :data:`SOLVERS`."""
    def deco(cls):
        cls.name = name
        SOLVERS[name] = cls
        for hook in REGISTER_HOOKS:
            hook()
        return cls
    return deco


def rel_gap(primal, dual):
    """The relative duality gap ``(P − D) / |P|`` of each model (the certificate ``tol``
    is compared with)."""
    return (primal - dual) / np.maximum(np.abs(primal), 1e-300)


@dataclasses.dataclass(frozen=True)
class Param:
    """One declared parameter of a solver.

    Attributes
    ----------
    name : str
    kind : {"float", "int", "bool", "choice", "class_weight", "str", "size", "floats"}
        ``"floats"``: a list of numbers (or one comma-separated string of them, as the CLI
        gives it), each in the range.
    default : object
    help : str
        One line, for the estimator's docstring and the CLI's ``--help``.
    low, high : float, optional
        Range for numbers; ``low_open`` excludes ``low``.
    choices : tuple, optional
        Allowed values for ``kind="choice"``.
    flag : str, optional
        The CLI option (default ``--name`` with ``_`` as ``-``).
    """

    name: str
    kind: str
    default: object
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple | None = None
    flag: str | None = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def describe(self) -> str:
        """The allowed values, in scikit-learn's words."""
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "bool":
            return "a bool"
        if self.kind == "class_weight":
            return "a dict of label to weight > 0, 'balanced' or None"
        if self.kind == "str":
            return "a str"
        if self.kind == "size":
            return "a size such as '2GB' or a number of bytes"
        if self.kind == "floats":
            return "a list of floats (or a comma-separated string of them), each " + \
                dataclasses.replace(self, kind="float").describe()[2:]
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        left = "(" if self.low_open or self.low is None else "["
        right = "]" if self.high is not None else ")"
        return f"a {self.kind} in the range {left}{lo}, {hi}{right}"

    def validate(self, owner: str, value):
        """``value`` checked (and normalized: numbers as float/int); raises
        :class:`InvalidParameterError` in scikit-learn's wording."""
        def fail():
            raise InvalidParameterError(f"The {self.name!r} parameter of {owner} must be "
                                        f"{self.describe()}. Got {value!r} instead.")
        if value is None and self.default is None:
            return None
        if self.kind == "choice":
            if value not in self.choices:
                fail()
            return value
        if self.kind == "str":
            if not isinstance(value, str):
                fail()
            return value
        if self.kind == "size":
            from .._units import parse_size
            return parse_size(value, self.name)
        if self.kind == "floats":
            items = value.split(",") if isinstance(value, str) else value
            try:
                items = [float(v) if isinstance(v, str) else v for v in items]
            except (TypeError, ValueError):
                fail()
            if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
                fail()
            one = dataclasses.replace(self, kind="float")
            try:
                out = [one.validate(owner, v) for v in items]
            except InvalidParameterError:
                fail()
            if not out:
                fail()
            return out
        if self.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                fail()
            return bool(value)
        if self.kind == "class_weight":
            if value is None or value == "balanced":
                return value
            if not isinstance(value, dict):
                fail()
            from ..io import label_key
            out = {}
            for k, v in value.items():
                try:
                    key = label_key(float(k))
                except (TypeError, ValueError):
                    fail()
                if isinstance(v, bool) or not isinstance(v, numbers.Real) or \
                        not np.isfinite(v) or v <= 0:
                    raise InvalidParameterError(
                        f"The 'class_weight[{k}]' parameter of {owner} must be a float in "
                        f"the range (0.0, inf). Got {v!r} instead.")
                out[key] = float(v)
            return out
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            fail()
        if self.kind == "int" and not isinstance(value, numbers.Integral):
            fail()
        if not np.isfinite(value):
            fail()
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            fail()
        if self.high is not None and value > self.high:
            fail()
        return int(value) if self.kind == "int" else float(value)


#: Parameters every solver declares (the driver reads them): the stopping rule and budget.
COMMON_PARAMS = (
    Param("tol", "float", 1e-3, "stop when the solver's certificate (the relative duality "
          "gap, or its named measure) is at most tol", low=0.0, low_open=True),
    Param("max_passes", "float", 200.0, "stop after this many passes over the data, with a "
          "ConvergenceWarning (one more read-only pass then certifies the model returned)",
          low=0.0, low_open=True),
)


#: Parameters of the problem that several solvers share, declared once.
C_PARAM = Param("C", "float", 1.0, "cost of each row's loss (LIBLINEAR -c)", low=0.0,
                low_open=True, flag="-C")
BIAS_PARAM = Param("bias", "float", 1.0, "value of the constant bias feature (LIBLINEAR -B); "
                   "0 for no bias", low=0.0)
SVC_LOSS_PARAM = Param("loss", "choice", "squared_hinge", "squared_hinge = LIBLINEAR -s 1, "
                       "hinge = -s 3", choices=("hinge", "squared_hinge"))
CLASS_WEIGHT_PARAM = Param("class_weight", "class_weight", None, "per-class multiplier of C "
                           "(LIBLINEAR -wi), or 'balanced'")


def _same_kind(value, current) -> bool:
    """Whether a checkpointed state value may replace ``current``: a bool for a bool, a
    number (int or float) for a number, a str, list or dict for one; None, or anything
    where ``current`` is None, is accepted (such values change kind during a run)."""
    if value is None or current is None:
        return True
    if isinstance(current, (bool, np.bool_)):
        return isinstance(value, bool)
    if isinstance(current, numbers.Real):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    for kind, json_kind in ((str, str), ((list, tuple), list), (dict, dict)):
        if isinstance(current, kind):
            return isinstance(value, json_kind)
    return True


@dataclasses.dataclass(frozen=True, eq=False)
class SolveResult:
    """What the driver returns.

    Attributes
    ----------
    coef : ndarray of shape (n_models, n_features)
    intercept : ndarray of shape (n_models,)
    n_iter : int
        The solver's iterations (``dcd``: epochs, streamed or in RAM).
    passes : float
        Rows visited / n_rows (fractional passes over the data).
    converged : bool
        Whether the stopping rule held (False: stopped at ``max_passes``).
    stop_value : float
        The certificate at the end (``dcd``: largest relative duality gap over models).
    primal, dual : float
        Objectives at the end (summed over one-vs-rest models).
    history : list of dict
        One entry per outer iteration (``_driver.HISTORY_KEYS``).
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


class Solver(abc.ABC):
    """Base class of every solver (module doc).

    Parameters
    ----------
    **params
        Values for the declared :attr:`params`; the others take their defaults. An
        unknown name, a wrong type or a value out of range raises
        :class:`~streamsvm.exceptions.InvalidParameterError` before any pass.
    """

    name: str = "solver"
    #: The declared parameters (with :data:`COMMON_PARAMS`).
    params: tuple = ()
    #: One line on what the solver does and when to pick it (CLI help, README).
    summary: str = ""
    #: Name of the certificate in the history's ``gap`` column.
    certificate: str = "relative duality gap"
    warm_start: bool = False    # starts from given weights (``init_W``): the primal solvers
    init_W = None               # those weights, (n_features + 1, k) (``_warm_start.py``)

    def __init__(self, **params):
        table = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(table))
        if unknown:
            raise InvalidParameterError(
                f"Invalid parameter{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))} for solver {self.name!r}. Valid parameters "
                f"are: {sorted(table)}.")
        owner = f"solver {self.name!r}"
        for p in self.params:
            setattr(self, p.name, p.validate(owner, params.get(p.name, p.default)))

    def initial_W(self, D1: int, K: int) -> np.ndarray:
        """The starting weights: zeros, or the warm start's ``init_W`` (tiled when there are
        more models, as one per C of a path)."""
        if self.init_W is None:
            return np.zeros((D1, K))
        return np.tile(self.init_W, (1, K // self.init_W.shape[1]))

    @classmethod
    def param_table(cls) -> dict:
        return {p.name: p for p in cls.params}

    def get_params(self) -> dict:
        return {p.name: getattr(self, p.name) for p in self.params}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    # -- the problem -----------------------------------------------------------------
    @abc.abstractmethod
    def problem(self, store):
        """The :class:`~streamsvm.problem.Problem` this solver solves on ``store``."""

    def kernel_costs(self, store, problem=None) -> Costs:
        """The problem's costs on ``store`` as the kernels read them
        (:class:`~streamsvm.kernels.Costs`): the binary model's positive label 1, or one model
        per class (``y`` holds the class index), each with its ``Cp``/``Cn``; for a path of C
        values (:attr:`Cs`) the models of each C one after the other. ``problem``: the
        problem's (:meth:`problem`) unless given (``ww`` gives its joint problem)."""
        problem = self.problem(store) if problem is None else problem
        path = [problem if C is None else dataclasses.replace(problem, C=C) for C in self.Cs]
        costs = [p.costs(store.classes, store.label_counts) for p in path]
        Cp, Cn = (np.concatenate([c[j] for c in costs]) for j in (0, 1))
        pos = np.array([1], np.int32) if problem.layout == "binary" else \
            np.arange(len(store.classes), dtype=np.int32)
        return Costs(np.tile(pos, len(path)), Cp, Cn, problem.loss == "squared_hinge",
                     float(problem.bias))

    Cs = (None,)
    """The values of C the run trains one model for each: one, the solver's own ``C``
    (None); a solver that trains a path of C values (nesvm's ``C_path``) lists them."""

    def check_store(self, store) -> None:
        """Refuse, before the first pass, a store this solver cannot train on."""

    #: Why the solver cannot run on a dask cluster (None: it can, every pass it makes is a
    #: ``map_reduce``): dual coordinate descent reads blocks in the training process.
    not_distributed: str | None = ("it sweeps blocks in the training process (coordinate "
                                   "descent over resident rows), which a dask cluster's "
                                   "map/reduce passes do not provide")

    def for_cluster(self, store) -> "Solver":
        """The solver that trains on a dask cluster in this one's place: itself when every
        pass it makes is a ``map_reduce`` (after :meth:`check_distributed`); the dual CD
        solvers give their distributed loop (``_cocoa.py``, ``_ww_cocoa.py``)."""
        self.check_distributed(store)
        return self

    def check_distributed(self, store) -> None:
        """Refuse, before the first pass, to run on a dask cluster (``scheduler=``) when the
        solver (with these parameters) needs more than ``map_reduce`` passes."""
        if self.not_distributed is not None:
            raise InvalidParameterError(f"solver {self.name!r} cannot train on a dask cluster: "
                                        f"{self.not_distributed}; use alm, nesvm or newton "
                                        f"there, or train without scheduler=")

    # -- the engine ----------------------------------------------------------------------
    @abc.abstractmethod
    def start(self, sched) -> None:
        """Allocate the solver's state on the scheduler (before a resume loads it)."""

    @abc.abstractmethod
    def step(self, sched) -> dict:
        """One outer iteration: a dict with ``kind``, ``primal``, ``dual``, ``gap``,
        ``exact`` and ``active`` (the driver adds passes, time and I/O)."""

    @abc.abstractmethod
    def final_check(self, sched) -> dict:
        """An exact certificate of the current model (at ``max_passes``, when the last
        iteration's was an estimate): an iteration dict as :meth:`step`'s."""

    @property
    def stale(self) -> bool:
        """Whether the certified model lags the newest iterate (``ww`` certifies a pass's
        start by the next pass): at ``max_passes`` the driver then certifies the newest one
        with :meth:`final_check`."""
        return False

    #: The solver's own numbers in each history entry (keys of :meth:`step`'s dict).
    history_extras: tuple = ()

    #: Attributes a checkpoint holds: arrays (restored in place) and JSON-able values.
    state_arrays: tuple = ()
    state_values: tuple = ()
    #: The layout of the solver's checkpoints, stamped in them and checked on resume (None:
    #: not stamped); raised whenever what :meth:`state_dict` holds changes.
    state_version: int | None = None

    def state_dict(self) -> tuple[dict, dict]:
        """``(arrays, meta)``: everything to continue bit for bit (the scheduler's states
        and counters are saved by the driver); by default :attr:`state_arrays`,
        :attr:`state_values` and :attr:`state_version`."""
        meta = {n: getattr(self, n) for n in self.state_values}
        if self.state_version is not None:
            meta["version"] = self.state_version
        return {n: getattr(self, n) for n in self.state_arrays}, meta

    def load_state_dict(self, arrays: dict, meta: dict) -> None:
        """Restore :meth:`state_dict` (after :meth:`start`); a checkpoint of another
        :attr:`state_version` raises :class:`~streamsvm.exceptions.CheckpointError`."""
        if self.state_version is not None and meta.get("version") != self.state_version:
            from ..exceptions import CheckpointError
            raise CheckpointError(f"{self.name} checkpoint of version {meta.get('version')!r}; "
                                  f"this streamsvm reads version {self.state_version} "
                                  f"(dcd, avsf and ww keep other states on a dask cluster, "
                                  f"their distributed loop, than on one machine: resume a run "
                                  f"where it was started)")
        from ..exceptions import CheckpointError
        for n in self.state_arrays:
            have, got = getattr(self, n), arrays.get(n)
            if got is None:
                raise CheckpointError(f"checkpoint array solver.{n} is missing")
            if got.shape != have.shape or got.dtype != have.dtype:
                raise CheckpointError(f"checkpoint array solver.{n} has shape {got.shape} and "
                                      f"dtype {got.dtype}; this {self.name} run has shape "
                                      f"{have.shape} and dtype {have.dtype}")
        for n in self.state_values:
            if n not in meta:
                raise CheckpointError(f"checkpoint field solver_meta.{n} is missing")
            if not _same_kind(meta[n], getattr(self, n, None)):
                raise CheckpointError(f"checkpoint field solver_meta.{n} is {meta[n]!r}; this "
                                      f"{self.name} run holds a {type(getattr(self, n)).__name__}"
                                      f" there")
        for n in self.state_arrays:
            getattr(self, n)[...] = arrays[n]
        for n in self.state_values:
            setattr(self, n, meta[n])

    @abc.abstractmethod
    def coef(self) -> tuple[np.ndarray, np.ndarray]:
        """``(coef of shape (n_models, n_features), intercept of shape (n_models,))``."""

    @property
    def n_iter(self) -> int:
        """The solver's own iteration count (reported; default: the driver's)."""
        return -1

    rows = None
    """The solver's resident rows (:meth:`PassScheduler.resident_rows`), if it keeps any."""

    def close(self) -> None:
        """Release what the solver holds (its resident rows)."""
