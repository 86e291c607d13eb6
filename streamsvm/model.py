"""``LinearModel``: weights, bias, classes and training metadata; save, load, predict.

A model file is one JSON document: metadata plus the weights as base64 of little-endian
float64 (bit-exact round trip), written atomically (temporary name, then rename; on
object stores a single PUT). :meth:`LinearModel.to_liblinear` exports LIBLINEAR's text
model format so ``liblinear``'s ``predict`` can use it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import uuid

import numpy as np

from .exceptions import InvalidParameterError, StoreNotFoundError, StreamSVMError
from .io._urls import is_local, url_to_fs

__all__ = ["LinearModel", "load_model", "MODEL_FORMAT"]

MODEL_FORMAT = "streamsvm-linear-model/1"
_LIBLINEAR_SOLVER = {("dcd", "hinge"): "L2R_L1LOSS_SVC_DUAL",
                     ("dcd", "squared_hinge"): "L2R_L2LOSS_SVC_DUAL"}


def _encode(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a, dtype="<f8")
    return {"dtype": "<f8", "shape": list(a.shape), "base64": base64.b64encode(a.tobytes()).decode()}


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
        Training parameters (solver, loss, C, bias, tol, class weights, ...).
    summary : dict
        Solver report (passes, n_iter, primal, dual, gap, converged, seconds, ...).
    """

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    task: str
    params: dict
    summary: dict

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
    def to_dict(self) -> dict:
        return {"format": MODEL_FORMAT, "task": self.task, "classes": self.classes.tolist(),
                "n_features": self.n_features, "params": self.params, "summary": self.summary,
                "coef": _encode(self.coef), "intercept": _encode(self.intercept)}

    @classmethod
    def from_dict(cls, d: dict, source: str = "model") -> "LinearModel":
        if d.get("format") != MODEL_FORMAT:
            raise StreamSVMError(f"{source}: not a streamsvm model (format {d.get('format')!r}, "
                                 f"expected {MODEL_FORMAT!r})")
        return cls(_decode(d["coef"]), _decode(d["intercept"]),
                   np.asarray(d["classes"], dtype=np.float64), d["task"], d["params"],
                   d["summary"])

    def save(self, path, *, storage_options=None) -> None:
        """Write the model as one JSON file (atomically)."""
        _write_atomic(os.fspath(path), json.dumps(self.to_dict()).encode(), storage_options)

    def to_liblinear(self, path, *, storage_options=None) -> None:
        """Export in LIBLINEAR's text model format (integer class labels only)."""
        labels = self.classes
        if not np.all(labels == np.round(labels)):
            raise InvalidParameterError("LIBLINEAR model files need integer class labels; "
                                        f"this model has {labels.tolist()}")
        bias = float(self.params.get("bias", 0.0) or 0.0)
        solver = _LIBLINEAR_SOLVER.get((self.params.get("solver"), self.params.get("loss")),
                                       "L2R_L2LOSS_SVC_DUAL")
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
        _write_atomic(os.fspath(path), ("\n".join(lines) + "\n").encode(), storage_options)


def load_model(path, *, storage_options=None) -> LinearModel:
    """Read a model written by :meth:`LinearModel.save`."""
    path = os.fspath(path)
    fs, p = url_to_fs(path, storage_options)
    try:
        raw = fs.cat_file(p)
    except FileNotFoundError as exc:
        raise StoreNotFoundError(f"model file {path!r} does not exist") from exc
    try:
        d = json.loads(raw)
    except ValueError as exc:
        raise StreamSVMError(f"{path}: not a streamsvm model (invalid JSON: {exc})") from exc
    return LinearModel.from_dict(d, source=path)


def _write_atomic(path: str, payload: bytes, storage_options=None) -> None:
    if is_local(path):
        local = path[len("file://"):] if path.startswith("file://") else path
        parent = os.path.dirname(os.path.abspath(local))
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(local)}.{uuid.uuid4().hex[:8]}.partial")
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, local)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    fs, p = url_to_fs(path, storage_options)
    fs.pipe_file(p, payload)      # one PUT: an object store never shows a partial object
