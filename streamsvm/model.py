"""``LinearModel``: weights, bias, classes and training metadata; save, load, predict.

A model file is one JSON document: metadata plus the weights as base64 of little-endian
float64 (bit-exact round trip) and the checksums of every field, written atomically
(temporary name, then rename; on object stores a single PUT) and read as a stream
(:mod:`streamsvm._model_json`), every field checked (:mod:`streamsvm._model_check`).
:meth:`LinearModel.to_liblinear` exports LIBLINEAR's text model format so ``liblinear``'s
``predict`` can use it, and :func:`load_model` reads that format back, from LIBLINEAR's
``train`` too (:mod:`streamsvm._model_liblinear`).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ._model_check import MODEL_FORMAT
from .exceptions import ModelError, StoreNotFoundError
from .io import url_to_fs, write_atomic

__all__ = ["LinearModel", "load_model", "MODEL_FORMAT"]


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
        Original labels, strictly increasing.
    task : {"binary", "multiclass"}
    params : dict
        Training parameters (solver and its parameters).
    summary : dict
        Solver report (passes, n_iter, primal, dual, gap, converged, history, ...).
    problem : dict, optional
        The :class:`~streamsvm.problem.Problem` the solver declared (loss, C, class weights,
        bias mode, layout): ``evaluate`` computes the objective from it.
    tie_break : ndarray of shape (n_classes,), optional
        The classes in the order that wins a tie of scores (binary: a score of exactly 0),
        the first winning; None: ``classes``' order. Set for LIBLINEAR's models, which
        favour their labels' order of first appearance.
    labels : ndarray of shape (n_classes,), optional
        The user's labels when they are not numbers (strings, booleans: a model fit in
        Python): ``classes`` are then their codes ``0 .. k-1`` in sorted order, and
        :meth:`predict` gives ``labels``. None: predictions are ``classes``.
    """

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    task: str
    params: dict
    summary: dict
    problem: dict | None = None
    tie_break: np.ndarray | None = None
    labels: np.ndarray | None = None

    @property
    def user_classes(self) -> np.ndarray:
        """The labels predictions are given in: ``labels`` when set, else ``classes``."""
        return self.classes if self.labels is None else self.labels

    def problem_obj(self):
        """The :class:`~streamsvm.problem.Problem` of this model, or None when unknown
        (a LIBLINEAR model of another loss; models of older versions: from their params)."""
        from .problem import LOSSES, Problem
        d = self.problem
        if d is None:
            p = self.params
            if p.get("loss") not in LOSSES or p.get("class_weight") == "balanced":
                return None        # (balanced: weights of data the model no longer has)
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

    def tie_order(self) -> np.ndarray:
        """Indices of the classes in the order that wins ties (see ``tie_break``)."""
        if self.tie_break is None:
            return np.arange(len(self.classes))
        return np.searchsorted(self.classes, self.tie_break)

    def predict_encoded(self, scores: np.ndarray) -> np.ndarray:
        """Class indices (into ``classes``) from decision scores; ties go to the class
        first in :meth:`tie_order`."""
        if self.task == "binary":
            pos = scores > 0 if self.tie_order()[0] == 0 else scores >= 0
            return pos.astype(np.int64)
        if self.tie_break is None:
            return np.argmax(scores, axis=1)
        order = self.tie_order()
        return order[np.argmax(scores[:, order], axis=1)]

    def class_indices(self, labels: np.ndarray) -> np.ndarray:
        """Indices into ``classes`` of original labels that are classes of the model."""
        idx = np.minimum(np.searchsorted(self.classes, labels), len(self.classes) - 1)
        if not np.array_equal(self.classes[idx], labels):
            from .exceptions import DataMismatchError
            raise DataMismatchError(f"labels {np.setdiff1d(labels, self.classes)[:10].tolist()}"
                                    f" are not classes of the model ({self.classes.tolist()})")
        return idx

    def predict(self, X) -> np.ndarray:
        """Original labels predicted for the rows of ``X``."""
        return self.user_classes[self.predict_encoded(self.decision_function(X))]

    # -- persistence -----------------------------------------------------------------
    def to_dict(self) -> dict:
        """The model's JSON document (with its checksums), as :meth:`save` writes it."""
        from ._model_json import document
        return document(self)

    @classmethod
    def from_dict(cls, d: dict, source: str = "model") -> "LinearModel":
        """The model of a JSON document (a dict), every field checked as in :func:`load_model`."""
        import io
        import json
        raw = json.dumps(d).encode()
        return _from_json(io.BytesIO(raw), len(raw), source)

    def save(self, path, *, storage_options=None) -> None:
        """Write the model as one JSON file (atomically), the bytes of
        ``json.dumps(self.to_dict())`` written piece by piece (never whole in memory)."""
        from ._model_json import json_pieces
        write_atomic(os.fspath(path), json_pieces(self), storage_options)

    def to_liblinear(self, path, *, storage_options=None) -> None:
        """Export in LIBLINEAR's text model format (integer class labels only); LIBLINEAR's
        ``predict`` then predicts what this model does, ties included."""
        from ._model_liblinear import liblinear_pieces
        write_atomic(os.fspath(path), liblinear_pieces(self), storage_options)


def _from_json(f, size: int, source: str) -> LinearModel:
    from ._model_json import read_json
    head, coef, intercept = read_json(f, size, source)
    return LinearModel(coef, intercept, head.classes, head.task, head.params, head.summary,
                       head.problem, head.tie_break, head.labels)


def load_model(path, *, storage_options=None) -> LinearModel:
    """Read a model written by :meth:`LinearModel.save`, or a LIBLINEAR text model.

    Every field of a streamsvm model is checked (types, shapes, finite weights, classes
    strictly increasing, the fields the evaluator uses) and its checksums verified; the
    weights are decoded as they stream, so loading takes about their size in memory, and a
    file larger than its header allows is refused unread. Any problem raises
    :class:`~streamsvm.exceptions.ModelError` naming the file and the field (or line).

    A LIBLINEAR model (first line ``solver_type ...``, as written by LIBLINEAR's ``train``
    or :meth:`LinearModel.to_liblinear`) of a classifier becomes the LinearModel that
    predicts the same labels, ties included: its classes sorted, ``coef`` and
    ``intercept = bias·w_bias`` permuted to match (a binary ``w`` negated when LIBLINEAR's
    first label is the smaller), ``tie_break`` LIBLINEAR's label order where it decides,
    and ``params`` with the ``loss`` of its ``solver_type``. Such a file records no ``C``:
    evaluating it gives no objective.
    """
    path = os.fspath(path)
    fs, p = url_to_fs(path, storage_options)
    try:
        info = fs.info(p)
        if info.get("type") == "directory":
            raise ModelError("is a directory (a store?), not a model file", file=path)
        size = int(info.get("size") or 0)
        with fs.open(p, "rb") as f:
            kind = _sniff(f.read(64), path)
            f.seek(0)
            if kind == "liblinear":
                from ._model_liblinear import read_liblinear
                return LinearModel(**read_liblinear(f, size, path))
            return _from_json(f, size, path)
    except FileNotFoundError as exc:
        raise StoreNotFoundError(f"model file {path!r} does not exist") from exc
    except OSError as exc:
        from .io import access_error
        why = access_error(exc, path)
        if why is not None:               # credentials, the endpoint: what to check
            from .exceptions import RemoteAccessError
            raise RemoteAccessError(f"cannot access {path!r}: {why}") from exc
        raise ModelError(f"cannot be read: {getattr(exc, 'strerror', None) or exc}",
                         file=path) from exc


def _sniff(start: bytes, source: str) -> str:
    """``"json"`` or ``"liblinear"`` from a model file's first bytes."""
    text = start.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not start:
        raise ModelError("the file is empty", file=source)
    if text.startswith(b"{"):
        return "json"
    if text.startswith(b"solver_type"):
        return "liblinear"
    try:
        shown = repr(start.decode("utf-8")[:40])
    except UnicodeDecodeError:
        shown = "binary data"
    raise ModelError(f"not a model: neither a streamsvm model (JSON) nor a LIBLINEAR model "
                     f"('solver_type ...'); it begins with {shown}", file=source)
