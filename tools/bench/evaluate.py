"""The benchmark's yardstick: one primal objective, accuracy and gaps for every method.

Objective (LIBLINEAR ``-B 1`` convention, DESIGN.md §5)::

    P(W, b) = Σ_c [ ½‖w_c‖² + ½ b_c² + C Σ_i loss(y_ic (w_cᵀx_i + B·b_c)) ],   B = 1

``loss`` is the hinge ``max(0, 1 − m)`` or the squared hinge ``max(0, 1 − m)²``. A binary problem
has one model (``y_i = ±1``, positive = the larger original label, the store's encoding); a
multiclass problem is one-vs-rest, ``y_ic = +1`` if row ``i`` is of class ``c`` else ``−1``,
and ``P`` is the sum of the binary objectives (what LIBLINEAR ``-s 1``/``-s 3`` minimize on
multiclass data, one model after the other).

Weights are given as ``W`` of shape ``(n_models, d)`` and intercepts ``b`` of shape
``(n_models,)`` equal to ``B·b_c`` (``LinearModel.intercept``, ``LinearSVC.intercept_`` with
``intercept_scaling=1``, a LIBLINEAR model's last weight times ``-B``); with ``B = 1`` both are the
same number. Everything here is plain numpy/scipy (no streamsvm import) so that it can judge
streamsvm.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["LOSSES", "ObjectiveAccumulator", "primal_objective", "accuracy", "rel_gap",
           "best_objective", "as_weights", "one_vs_rest_targets", "first_within"]

LOSSES = ("hinge", "squared_hinge", "ww")   # ww: the Weston–Watkins (joint) hinge


def as_weights(W, b, n_features: int | None = None):
    """``W`` as a float64 array of shape (k, d) and ``b`` of shape (k,); pads/crops to d."""
    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    b = np.atleast_1d(np.asarray(b, dtype=np.float64)).ravel()
    if b.shape[0] != W.shape[0]:
        raise ValueError(f"{W.shape[0]} weight vectors but {b.shape[0]} intercepts")
    if n_features is not None and W.shape[1] != n_features:
        out = np.zeros((W.shape[0], n_features))
        m = min(n_features, W.shape[1])
        out[:, :m] = W[:, :m]
        W = out
    return W, b


def one_vs_rest_targets(y, task: str, k: int) -> np.ndarray:
    """±1 targets of shape (n, k): binary ``y`` is ±1 (k = 1), multiclass ``y`` a class index."""
    y = np.asarray(y)
    if task == "binary":
        if k != 1:
            raise ValueError(f"a binary problem has one model, got {k}")
        return np.where(y > 0, 1.0, -1.0)[:, None]
    return np.where(y.astype(np.int64)[:, None] == np.arange(k)[None, :], 1.0, -1.0)


def _scores(X, W, b) -> np.ndarray:
    """``X @ W.T + b`` for a scipy sparse (or dense) ``X`` with at most ``d`` columns used."""
    d = W.shape[1]
    if X.shape[1] > d:
        X = X[:, :d]
    elif X.shape[1] < d:
        W = W[:, :X.shape[1]]
    return np.asarray(X @ W.T) + b[None, :]


def predict_encoded(scores: np.ndarray, task: str) -> np.ndarray:
    """Binary: ±1 (score > 0 → +1); multiclass: argmax class index."""
    if task == "binary":
        return np.where(scores[:, 0] > 0, 1.0, -1.0)
    return np.argmax(scores, axis=1)


class ObjectiveAccumulator:
    """Streams row blocks and accumulates the loss sum and the correct predictions.

    Parameters
    ----------
    W, b : arrays
        Weights (k, d) and intercepts (k,) (``b = B·b_c`` with ``B = bias``).
    C : float
    loss : {"hinge", "squared_hinge"} or None
        None: accuracy only.
    task : {"binary", "multiclass"}
    bias : float
        ``B``; the regularized bias weight is ``b / B`` (``B = 0``: no bias term).
    """

    def __init__(self, W, b, *, C: float, loss: str | None, task: str, bias: float = 1.0):
        self.W, self.b = as_weights(W, b)
        if loss is not None and loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES} or None, got {loss!r}")
        if loss == "ww" and task != "multiclass":
            raise ValueError("the Weston–Watkins loss is multiclass")
        if task not in ("binary", "multiclass"):
            raise ValueError(f"task must be 'binary' or 'multiclass', got {task!r}")
        if task == "binary" and self.W.shape[0] != 1:
            raise ValueError("a binary model has exactly one weight vector")
        self.C, self.loss, self.task, self.bias = float(C), loss, task, float(bias)
        self.loss_sum = 0.0
        self.correct = 0
        self.n = 0

    def add(self, X, y) -> None:
        """One block: ``X`` scipy CSR (n, ≤ d), ``y`` encoded labels (±1 or class index)."""
        S = _scores(X, self.W, self.b)
        y = np.asarray(y)
        self.correct += int(np.count_nonzero(predict_encoded(S, self.task) == y))
        self.n += len(y)
        if self.loss == "ww":          # Σ_{c≠y} max(0, 1 − (s_y − s_c))
            yi, rows = y.astype(np.int64), np.arange(len(y))
            t = np.maximum(0.0, 1.0 - (S[rows, yi][:, None] - S))
            t[rows, yi] = 0.0
            self.loss_sum += float(t.sum())
        elif self.loss is not None:
            M = one_vs_rest_targets(y, self.task, self.W.shape[0]) * S
            xi = np.maximum(0.0, 1.0 - M)
            self.loss_sum += float((xi * xi).sum() if self.loss == "squared_hinge" else xi.sum())

    @property
    def regularizer(self) -> float:
        bw = self.b / self.bias if self.bias > 0 else np.zeros_like(self.b)
        return 0.5 * float(np.einsum("kd,kd->", self.W, self.W) + bw @ bw)

    @property
    def primal(self) -> float | None:
        if self.loss is None:
            return None
        return self.regularizer + self.C * self.loss_sum

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None


def primal_objective(W, b, X, y, *, C: float, loss: str, task: str, bias: float = 1.0) -> float:
    """The objective of the module docstring on in-memory data."""
    acc = ObjectiveAccumulator(W, b, C=C, loss=loss, task=task, bias=bias)
    acc.add(X, y)
    return acc.primal


def accuracy(W, b, X, y, *, task: str) -> float:
    acc = ObjectiveAccumulator(W, b, C=1.0, loss=None, task=task)
    acc.add(X, y)
    return acc.accuracy


def rel_gap(value, best) -> float | None:
    """``(value − best) / |best|``; None when either is missing or not finite."""
    if value is None or best is None:
        return None
    value, best = float(value), float(best)
    if not (math.isfinite(value) and math.isfinite(best)) or best == 0.0:
        return None
    return (value - best) / abs(best)


def best_objective(values) -> float | None:
    """The smallest finite value (the best primal objective found), or None."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return min(finite) if finite else None


def first_within(steps, target: float, key: str = "rel_gap"):
    """The first step (in the given order) whose ``key`` is ≤ ``target``, or None."""
    for s in steps:
        g = s.get(key)
        if g is not None and g <= target:
            return s
    return None
