"""``LinearModel``: weights, bias, classes and training metadata; save, load, predict.

A model file is one JSON document: metadata plus the weights as base64 of little-endian
float64 (bit-exact round trip), written atomically (temporary name, then rename; on
object stores a single PUT). :meth:`LinearModel.to_liblinear` exports LIBLINEAR's text
model format so ``liblinear``'s ``predict`` can use it, and :func:`load_model` reads that
format back (from LIBLINEAR's ``train`` too).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os

import numpy as np

from .exceptions import FormatError, InvalidParameterError, StoreNotFoundError, StreamSVMError
from .io import is_local, url_to_fs, write_atomic

__all__ = ["LinearModel", "load_model", "MODEL_FORMAT"]

MODEL_FORMAT = "streamsvm-linear-model/1"
def _liblinear_solver(problem) -> str:
    """LIBLINEAR's ``solver_type`` for a problem (informational: its ``predict`` scores every
    linear model alike)."""
    if problem is None:
        return "L2R_L2LOSS_SVC_DUAL"
    if problem.layout == "joint":
        return "MCSVM_CS"
    if problem.l1:
        return "L1R_L2LOSS_SVC"
    return "L2R_L1LOSS_SVC_DUAL" if problem.loss == "hinge" else "L2R_L2LOSS_SVC_DUAL"
_LIBLINEAR_LOSS = {"L2R_LR": "log", "L2R_L2LOSS_SVC_DUAL": "squared_hinge",
                   "L2R_L2LOSS_SVC": "squared_hinge", "L2R_L1LOSS_SVC_DUAL": "hinge",
                   "MCSVM_CS": "crammer_singer", "L1R_L2LOSS_SVC": "squared_hinge",
                   "L1R_LR": "log", "L2R_LR_DUAL": "log"}


def _encode(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a, dtype="<f8")
    return {"dtype": "<f8", "shape": list(a.shape), "base64": base64.b64encode(a.tobytes()).decode()}


_PIECE = 3 << 18
"""Bytes of weights base64-encoded at a time by :func:`_json_pieces` (a multiple of 3: the
pieces' encodings join into the whole's)."""


def _json_pieces(model):
    """The bytes of ``json.dumps(model.to_dict())``, in pieces: the weights (the document's
    last two entries) base64-encoded a slice at a time. Whole, a 2·10^6-feature model's
    document took its bytes, their base64, that as a str, the JSON and its encoding (about
    100 MB for a 16 MB model): the peak of a `streamsvm train` that streamed at 96 MB."""
    d = model.to_dict(weights=False)
    yield json.dumps(d)[:-1].encode()
    for key in ("coef", "intercept"):
        a = np.ascontiguousarray(getattr(model, key), dtype="<f8")
        yield (f', "{key}": {{"dtype": "<f8", "shape": {json.dumps(list(a.shape))}, '
               f'"base64": "').encode()
        raw = memoryview(a).cast("B")
        for i in range(0, len(raw), _PIECE):
            yield base64.b64encode(raw[i:i + _PIECE])
        yield b'"}'
    yield b"}"


def _decode(d: dict) -> np.ndarray:
    raw = base64.b64decode(d["base64"])
    return np.frombuffer(raw, dtype=d["dtype"]).reshape(d["shape"]).astype(np.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class LinearModel:
    """A fitted linear classifier.

    Attributes
    ----------
    coef : ndarray of shape (n_models, n_features)
        One row for binary problems (positive class = ``classes[1]``), one per class for
        one-vs-rest multiclass.
    intercept : ndarray of shape (n_models,)
        ``bias * w_b``: the bias is a regularized constant feature of value ``bias``.
    classes : ndarray of shape (n_classes,)
        Original labels.
    task : {"binary", "multiclass"}
    params : dict
        Training parameters (solver and its parameters).
    summary : dict
        Solver report (passes, n_iter, primal, dual, gap, converged, history, ...).
    problem : dict, optional
        The :class:`~streamsvm.problem.Problem` the solver declared (loss, C, class weights,
        bias mode, layout): ``evaluate`` computes the objective from it.
    """

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    task: str
    params: dict
    summary: dict
    problem: dict | None = None

    def problem_obj(self):
        """The :class:`~streamsvm.problem.Problem` of this model, or None when unknown
        (a LIBLINEAR model of another loss; models of older versions: from their params)."""
        from .problem import LOSSES, Problem
        d = self.problem
        if d is None:
            p = self.params
            if p.get("loss") not in LOSSES:
                return None
            d = {"loss": p["loss"], "C": p.get("C"), "class_weight": p.get("class_weight"),
                 "bias": float(p.get("bias", 0.0) or 0.0),
                 "layout": "binary" if self.task == "binary" else "ovr"}
        return Problem.from_dict(d)

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[1])

    # -- prediction ----------------------------------------------------------------
    def decision_function(self, X) -> np.ndarray:
        """Scores ``X @ coef.T + intercept``; shape (n,) for binary, (n, n_classes) else."""
        import scipy.sparse as sp
        X = X if sp.issparse(X) else np.atleast_2d(np.asarray(X, dtype=np.float64))
        if X.shape[1] > self.n_features:
            X = X[:, :self.n_features]       # features never seen in training weigh 0
        elif X.shape[1] < self.n_features:
            X = sp.csr_matrix(X)
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], self.n_features))
        scores = np.asarray(X @ self.coef.T) + self.intercept
        return scores[:, 0] if self.task == "binary" else scores

    def predict_encoded(self, scores: np.ndarray) -> np.ndarray:
        """Class indices (into ``classes``) from decision scores."""
        if self.task == "binary":
            return (scores > 0).astype(np.int64) if len(self.classes) > 1 else \
                np.zeros(len(scores), dtype=np.int64)
        return np.argmax(scores, axis=1)

    def predict(self, X) -> np.ndarray:
        """Original labels predicted for the rows of ``X``."""
        return self.classes[self.predict_encoded(self.decision_function(X))]

    # -- persistence -----------------------------------------------------------------
    def to_dict(self, weights: bool = True) -> dict:
        d = {"format": MODEL_FORMAT, "task": self.task, "classes": self.classes.tolist(),
             "n_features": self.n_features, "params": self.params, "problem": self.problem,
             "summary": self.summary}
        if weights:                 # last: _json_pieces writes them after the rest
            d["coef"] = _encode(self.coef)
            d["intercept"] = _encode(self.intercept)
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str = "model") -> "LinearModel":
        if d.get("format") != MODEL_FORMAT:
            raise StreamSVMError(f"{source}: not a streamsvm model (format {d.get('format')!r}, "
                                 f"expected {MODEL_FORMAT!r})")
        return cls(_decode(d["coef"]), _decode(d["intercept"]),
                   np.asarray(d["classes"], dtype=np.float64), d["task"], d["params"],
                   d["summary"], d.get("problem"))

    def save(self, path, *, storage_options=None) -> None:
        """Write the model as one JSON file (atomically), the bytes of
        ``json.dumps(self.to_dict())`` written piece by piece (:func:`_json_pieces`)."""
        write_atomic(os.fspath(path), _json_pieces(self), storage_options)

    def to_liblinear(self, path, *, storage_options=None) -> None:
        """Export in LIBLINEAR's text model format (integer class labels only)."""
        labels = self.classes
        if not np.all(labels == np.round(labels)):
            raise InvalidParameterError("LIBLINEAR model files need integer class labels; "
                                        f"this model has {labels.tolist()}")
        problem = self.problem_obj()
        bias = float(problem.bias if problem is not None else
                     self.params.get("bias", 0.0) or 0.0)
        solver = self.params.get("solver_type") or _liblinear_solver(problem)
        if self.task == "binary":
            order = [1, 0]                 # LIBLINEAR: w scores the first label as positive
            W = self.coef[:1]
            b = self.intercept[:1]
        else:
            order = list(range(len(labels)))
            W, b = self.coef, self.intercept
        lines = [f"solver_type {solver}", f"nr_class {len(order)}",
                 "label " + " ".join(str(int(labels[i])) for i in order),
                 f"nr_feature {self.n_features}", f"bias {bias if bias > 0 else -1:.17g}", "w"]
        cols = np.vstack([W.T, (b / bias)[None, :]]) if bias > 0 else W.T
        lines += [" ".join(f"{v:.17g}" for v in row) + " " for row in cols]
        write_atomic(os.fspath(path), ("\n".join(lines) + "\n").encode(), storage_options)


def load_model(path, *, storage_options=None) -> LinearModel:
    """Read a model written by :meth:`LinearModel.save`, or a LIBLINEAR text model.

    A LIBLINEAR model (first line ``solver_type ...``, as written by LIBLINEAR's ``train``
    or :meth:`LinearModel.to_liblinear`) of a classifier becomes the LinearModel that
    predicts the same labels: ``coef`` from its ``w``, ``intercept = bias·w_bias``,
    ``classes`` from its ``label`` line (binary: ``[second, first]``, since LIBLINEAR's
    ``w`` scores the first label as positive), and ``params`` with the ``loss`` of its
    ``solver_type``. Such a file records no ``C``: evaluating it gives no objective.
    """
    path = os.fspath(path)
    fs, p = url_to_fs(path, storage_options)
    try:
        raw = fs.cat_file(p)
    except FileNotFoundError as exc:
        raise StoreNotFoundError(f"model file {path!r} does not exist") from exc
    if raw.lstrip().startswith(b"solver_type"):
        return _from_liblinear(raw, path)
    try:
        d = json.loads(raw)
    except ValueError as exc:
        raise StreamSVMError(f"{path}: not a streamsvm model (invalid JSON: {exc})") from exc
    return LinearModel.from_dict(d, source=path)


def _from_liblinear(raw: bytes, source: str) -> LinearModel:
    """The LinearModel of a LIBLINEAR text model file (see :func:`load_model`)."""
    try:
        lines = raw.decode("ascii").split("\n")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not a LIBLINEAR model: {exc}", file=source) from None
    head, w_line = {}, None
    for i, line in enumerate(lines):
        key, *rest = line.split() or [""]
        if key == "w":
            w_line = i
            break
        if key not in ("solver_type", "nr_class", "label", "nr_feature", "bias", "rho"):
            raise FormatError(f"unknown text in a LIBLINEAR model: {line[:60]!r}", file=source,
                              line=i + 1)
        head[key] = (rest, i + 1)
    missing = [k for k in ("solver_type", "nr_class", "nr_feature", "bias") if k not in head]
    if w_line is None or missing:
        raise FormatError(f"incomplete LIBLINEAR model: no {missing[0] if missing else 'w'!r} "
                          f"line", file=source)

    def field(key, conv, n=1, low=None):
        values, line = head[key]
        try:
            if len(values) != n:
                raise ValueError(f"{len(values)} values, expected {n}")
            out = [conv(v) for v in values]
            if low is not None and out[0] < low:
                raise ValueError(f"expected at least {low}")
        except ValueError as exc:
            raise FormatError(f"bad {key!r} line: {' '.join(values)!r} ({exc})", file=source,
                              line=line) from None
        return out[0] if n == 1 else out
    solver = field("solver_type", str)
    if solver not in _LIBLINEAR_LOSS:
        raise FormatError(f"solver_type {solver} is not a classifier; streamsvm reads "
                          f"LIBLINEAR classification models ({', '.join(_LIBLINEAR_LOSS)})",
                          file=source, line=head["solver_type"][1])
    nr_class, nr_feature = field("nr_class", int, low=1), field("nr_feature", int, low=0)
    bias = field("bias", float)
    if "label" not in head:
        raise FormatError("incomplete LIBLINEAR model: no 'label' line", file=source)
    labels = np.asarray(field("label", float, nr_class), dtype=np.float64)
    nr_w = 1 if nr_class <= 2 and solver != "MCSVM_CS" else nr_class
    n = nr_feature + (1 if bias >= 0 else 0)
    tokens = " ".join(lines[w_line + 1:]).split()
    if len(tokens) != n * nr_w:
        raise FormatError(f"expected {n:,} rows of {nr_w} weights after 'w' (nr_feature "
                          f"{nr_feature}{' + bias' if bias >= 0 else ''}), found "
                          f"{len(tokens):,} values", file=source, line=w_line + 2)
    try:
        W = np.array(tokens, dtype=np.float64).reshape(n, nr_w).T
    except ValueError as exc:
        raise FormatError(f"bad weight after 'w': {exc}", file=source) from None
    coef = np.ascontiguousarray(W[:, :nr_feature])
    intercept = bias * W[:, nr_feature] if bias >= 0 else np.zeros(nr_w)
    if nr_w == 1:
        task, classes = "binary", labels[::-1].copy()   # positive (first listed) last
    else:
        task, classes = "multiclass", labels
    params = {"solver_type": solver, "loss": _LIBLINEAR_LOSS[solver], "bias": max(bias, 0.0)}
    return LinearModel(coef, np.asarray(intercept, dtype=np.float64), classes, task, params,
                       {"format": "liblinear"})
