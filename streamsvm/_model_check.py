"""The fields of a model file, checked one by one before any is believed.

A model file's header (everything but its weights) is validated here, field by field, each
against the others: its ``format``, a ``task`` of ``binary`` (one row of weights, two
classes) or ``multiclass`` (one row per class), ``classes`` finite and strictly increasing,
``n_features`` a count, the ``params``, ``problem`` and ``summary`` the evaluator and the
estimators read, and ``tie_break``. A field that is missing, of the wrong type, or that
contradicts another raises :class:`~streamsvm.exceptions.ModelError` naming the file and
the field; :func:`check_weights` does the same for the shape of ``coef`` and ``intercept``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .exceptions import ModelError

__all__ = ["Header", "check_header", "check_array_meta", "FORMATS", "MODEL_FORMAT"]

FORMATS = ("streamsvm-linear-model/1", "streamsvm-linear-model/2", "streamsvm-linear-model/3")
MODEL_FORMAT = FORMATS[1]
"""The format written for numeric labels; ``/1`` files (no checksums, no ``tie_break``) are
still read. ``/3`` (:data:`LABELLED_FORMAT`) is ``/2`` with the field ``labels``."""
LABELLED_FORMAT = FORMATS[2]
"""The format of a model with non-numeric ``labels`` (fit in Python on strings, ...)."""
HEADER_FIELDS = ("format", "task", "classes", "n_features", "params", "problem", "summary",
                 "tie_break", "labels")
WEIGHT_FIELDS = ("coef", "intercept")
CHECKSUM_FIELDS = HEADER_FIELDS + WEIGHT_FIELDS


@dataclasses.dataclass(frozen=True)
class Header:
    """A model file's validated header; ``rows`` is the number of rows of ``coef``."""

    format: str
    task: str
    classes: np.ndarray
    n_features: int
    params: dict
    problem: dict | None
    summary: dict
    tie_break: np.ndarray | None
    labels: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return 1 if self.task == "binary" else len(self.classes)

    def shape(self, field: str) -> tuple:
        return (self.rows, self.n_features) if field == "coef" else (self.rows,)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def check_header(d: dict, source: str, *, complete: bool = True) -> Header | None:
    """The validated :class:`Header` of a model document ``d`` (a dict of its fields, the
    weights' ``base64`` values possibly left out).

    With ``complete=False`` (a document read so far) return None while ``format``, ``task``,
    ``classes`` or ``n_features`` is still to come, and check only the fields present."""
    def bad(field, message):
        return ModelError(message, file=source, field=field)
    if not isinstance(d, dict):
        raise ModelError(f"not a streamsvm model: a JSON {type(d).__name__}, not an object",
                         file=source)
    if not complete and any(k not in d for k in ("format", "task", "classes", "n_features")):
        return None
    fmt = d.get("format")
    if "format" not in d:
        raise bad("format", f"missing: not a streamsvm model (expected {MODEL_FORMAT!r})")
    if fmt not in FORMATS:
        raise bad("format", f"{_short(fmt)} is not a streamsvm model format (expected one "
                            f"of {', '.join(map(repr, FORMATS))})")
    if complete:
        _check_keys(d, fmt, bad)
    task = d["task"]
    if task not in ("binary", "multiclass"):
        raise bad("task", f"{_short(task)} is not a task (expected 'binary' or 'multiclass')")
    classes = _check_classes(d["classes"], task, bad)
    n_features = d["n_features"]
    if not _count(n_features):
        raise bad("n_features", f"{_short(n_features)} is not a number of features")
    head = Header(fmt, task, classes, n_features, d.get("params", {}), d.get("problem"),
                  d.get("summary", {}), None)
    for name, value in (("params", head.params), ("summary", head.summary)):
        if not isinstance(value, dict):
            raise bad(name, f"a JSON {type(value).__name__}, expected an object")
    if head.problem is not None:
        _check_problem(head.problem, head, bad)
    _check_params(head.params, head, bad, head.problem is None)
    _check_summary(head.summary, bad)
    labels = _check_labels(d["labels"], classes, bad) if "labels" in d else None
    return dataclasses.replace(head, tie_break=_check_ties(d.get("tie_break"), classes, bad),
                               labels=labels)


def _check_keys(d: dict, fmt: str, bad) -> None:
    """No field unknown, none missing (``tie_break`` came with ``/2``, ``labels`` with
    ``/3``, the only format that has it)."""
    fields = tuple(k for k in HEADER_FIELDS + WEIGHT_FIELDS
                   if k != "labels" or fmt == LABELLED_FORMAT)
    for key in sorted(set(d) - set(fields) - {"checksums"}):
        raise bad(key, f"not a field of a {fmt!r} model (fields: {', '.join(fields)}, "
                       f"checksums)")
    for key in fields:
        if key not in d and not (fmt == FORMATS[0] and key == "tie_break"):
            raise bad(key, "missing")


def _check_summary(summary: dict, bad) -> None:
    """What the estimators read of the solver's report."""
    for key, ok, what in (("n_iter", _count, "a count"), ("passes", _number, "a number"),
                          ("converged", lambda v: isinstance(v, bool), "true or false")):
        if summary.get(key) is not None and not ok(summary[key]):
            raise bad("summary", f"{key!r} is {_short(summary[key])}, expected {what}")


def _check_ties(ties, classes: np.ndarray, bad):
    if ties is None:
        return None
    if not isinstance(ties, list) or not all(_number(v) for v in ties) or \
            sorted(ties) != classes.tolist():
        raise bad("tie_break", f"{_short(ties)} is not an order of the classes "
                               f"{classes.tolist()}")
    return np.asarray(ties, dtype=np.float64)


def _check_labels(labels, classes: np.ndarray, bad) -> np.ndarray:
    """A ``/3`` model's user labels: as many as its classes (the codes 0 .. k-1), all
    strings or all booleans, distinct, in sorted order."""
    if not isinstance(labels, list) or len(labels) != len(classes):
        raise bad("labels", f"{_short(labels)} is not a list of {len(classes)} labels")
    if not (all(isinstance(v, str) for v in labels) or
            all(isinstance(v, bool) for v in labels)):
        raise bad("labels", f"{_short(labels)}: labels must be all strings or all booleans")
    if any(a >= b for a, b in zip(labels, labels[1:])):
        raise bad("labels", f"{_short(labels)} is not strictly increasing")
    if not np.array_equal(classes, np.arange(len(classes))):
        raise bad("labels", f"the classes of a labelled model are the codes 0 .. "
                            f"{len(classes) - 1}, not {_short(classes.tolist())}")
    return np.asarray(labels)


def _check_classes(classes, task, bad) -> np.ndarray:
    if not isinstance(classes, list) or not all(_number(v) for v in classes):
        raise bad("classes", f"{_short(classes)} is not a list of labels")
    out = np.asarray(classes, dtype=np.float64)
    if not np.isfinite(out).all():
        raise bad("classes", f"{_short(classes)}: labels must be finite")
    if len(out) < 2 or (task == "binary" and len(out) != 2):
        raise bad("classes", f"{len(out)} classes contradict task {task!r} (expected "
                             f"{'2' if task == 'binary' else 'at least 2'})")
    if not (np.diff(out) > 0).all():
        raise bad("classes", f"{_short(classes)} is not strictly increasing")
    return out


def _positive(v) -> bool:
    return _number(v) and math.isfinite(v) and v > 0


def _check_weights_dict(cw, head, bad, field, balanced_ok):
    if cw is None or (balanced_ok and cw == "balanced"):
        return
    from .io import label_key
    if not isinstance(cw, dict):
        raise bad(field, f"class_weight {_short(cw)} is not an object of label: weight")
    keys = {label_key(c) for c in head.classes}
    for k, v in cw.items():
        try:
            known = label_key(float(k)) in keys
        except ValueError:
            known = False
        if not known:
            raise bad(field, f"class_weight names {k!r}, not a class of the model "
                             f"({sorted(keys)})")
        if not _positive(v):
            raise bad(field, f"class_weight[{k!r}] is {_short(v)}, expected a positive number")


def _check_problem(p, head, bad) -> None:
    """A model's problem: ``evaluate`` computes the objective from it."""
    from .problem import BIAS_MODES, LOSSES, Problem
    if not isinstance(p, dict):
        raise bad("problem", f"a JSON {type(p).__name__}, expected an object or null")
    names = {f.name for f in dataclasses.fields(Problem)}
    for key in sorted(set(p) - names):
        raise bad("problem", f"{key!r} is not a field of a problem ({', '.join(sorted(names))})")
    for key in ("loss", "C"):
        if key not in p:
            raise bad("problem", f"{key!r} is missing")
    layouts = ("binary",) if head.task == "binary" else ("ovr", "joint")
    checks = {"loss": (lambda v: v in LOSSES, f"one of {LOSSES}"),
              "C": (lambda v: v is None or _positive(v), "a positive number or null"),
              "bias": (lambda v: _number(v) and math.isfinite(v) and v >= 0,
                       "a number >= 0"),
              "bias_mode": (lambda v: v in BIAS_MODES, f"one of {BIAS_MODES}"),
              "l1": (lambda v: _number(v) and math.isfinite(v) and v >= 0, "a number >= 0"),
              "l2": (lambda v: _number(v) and math.isfinite(v) and v >= 0, "a number >= 0"),
              "power": (lambda v: _number(v) and math.isfinite(v) and v >= 1, "a number >= 1"),
              "layout": (lambda v: v in layouts, f"one of {layouts} for task {head.task!r}")}
    for key, (ok, what) in checks.items():
        if key in p and not ok(p[key]):
            raise bad("problem", f"{key!r} is {_short(p[key])}, expected {what}")
    _check_weights_dict(p.get("class_weight"), head, bad, "problem", balanced_ok=False)


def _check_params(params, head, bad, objective_from_params: bool) -> None:
    """What is read of the training parameters: the estimators' ``solver``, LIBLINEAR's
    ``solver_type`` and ``bias``; and, for a model without a ``problem`` (older files), the
    ``loss``, ``C`` and ``class_weight`` its objective is computed from."""
    for key in ("solver", "solver_type"):
        if params.get(key) is not None and not isinstance(params[key], str):
            raise bad("params", f"{key!r} is {_short(params[key])}, expected a name")
    bias = params.get("bias")
    if bias not in (None, False) and not (_number(bias) and math.isfinite(bias) and bias >= 0):
        raise bad("params", f"'bias' is {_short(bias)}, expected a number >= 0")
    from .problem import LOSSES
    if objective_from_params and params.get("loss") in LOSSES:
        C = params.get("C")
        if C is not None and not _positive(C):
            raise bad("params", f"'C' is {_short(C)}, expected a positive number")
        _check_weights_dict(params.get("class_weight"), head, bad, "params", balanced_ok=True)


def check_array_meta(obj, field: str, head: Header, source: str, *, complete: bool = True):
    """The shape of weights ``field`` (``coef`` or ``intercept``): an object of ``dtype``
    ``'<f8'``, ``shape`` the header's and ``base64``; returns the shape."""
    def bad(message):
        return ModelError(message, file=source, field=field)
    if not isinstance(obj, dict):
        raise bad(f"a JSON {type(obj).__name__}, expected an object of dtype, shape, base64")
    if complete:
        for key in sorted(set(obj) - {"dtype", "shape", "base64"}):
            raise bad(f"{key!r} is not a key of weights (dtype, shape, base64)")
        for key in ("dtype", "shape", "base64"):
            if key not in obj:
                raise bad(f"{key!r} is missing")
    if "dtype" in obj and obj["dtype"] != "<f8":
        raise bad(f"dtype {_short(obj['dtype'])}, expected '<f8' (little-endian float64)")
    want = head.shape(field)
    if "shape" in obj and obj["shape"] != list(want):
        raise bad(f"shape {_short(obj['shape'])} contradicts the header: expected "
                  f"{list(want)} ({head.task}, {len(head.classes)} classes, n_features "
                  f"{head.n_features})")
    if complete and not isinstance(obj["base64"], str):
        raise bad(f"base64 is {_short(obj['base64'])}, expected a string")
    return want
