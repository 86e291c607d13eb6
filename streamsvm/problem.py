"""What a model minimizes: the problem a solver declares, and its objective on any data.

Every solver declares its :class:`Problem` (loss, regularizer, bias mode, output layout,
costs); models carry it, and ``evaluate``, the estimators and the benchmark compute
objectives, costs and predictions from it, so a new solver touches no code outside its own
module. The library's convention (LIBLINEAR's)::

    P(W) = Σ_c [ ½‖w_c‖² + ρ‖w_c‖₁ + ½b_c² ] + Σ_i Σ_c C_ic loss(y_ic (w_cᵀx_i + B·b_c))

with ``loss(m)`` the hinge ``max(0, 1 − m)``, the squared hinge ``max(0, 1 − m)²``, the
``p``-th power hinge ``max(0, 1 − m)^p`` (``power_hinge``, ``p = power ≥ 1``) or the squared
residual ``(1 − m)²`` (LS-SVM). Without the ℓ2 term (``l2=0``, LP-SVM: ``ρ‖w‖₁``
alone) a regularized bias is in the ℓ1 term, ``ρ|b_c|``.

with ``b_c`` a regularized constant feature of value ``B`` (``bias_mode="regularized"``),
an unregularized intercept (``"free"``) or none; ``c`` runs over one model (binary),
one per class (one-vs-rest: ``y_ic = +1`` for class ``c``, else ``-1``). A joint multiclass
model (``layout="joint"``, Weston–Watkins) has the loss ``Σ_i C_{y_i} Σ_{c ≠ y_i}
loss(s_{i,y_i} − s_{i,c})`` of its scores ``s_ic = w_cᵀx_i + B·b_c`` instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .exceptions import InvalidParameterError

__all__ = ["Problem", "LOSSES", "class_costs"]

LOSSES = ("hinge", "squared_hinge", "squared", "power_hinge")
LAYOUTS = ("binary", "ovr", "joint")
BIAS_MODES = ("regularized", "free", "none")


@dataclasses.dataclass(frozen=True)
class Problem:
    """A linear classification problem (module doc).

    Attributes
    ----------
    loss : {"hinge", "squared_hinge", "squared", "power_hinge"}
    C : float or None
        Cost of each row's loss (None: unknown, e.g. a model read from LIBLINEAR's format).
    class_weight : dict, "balanced" or None
        Per-class multipliers of C (LIBLINEAR's ``-wi``): keys are original labels.
    bias : float
        Value ``B`` of the constant bias feature (0: no bias).
    bias_mode : {"regularized", "free", "none"}
    l1 : float
        Weight ``ρ`` of ``‖w‖₁`` (0: ℓ2 only).
    l2 : float
        Weight of ``½‖w‖²`` (1, or 0 for ``ρ‖w‖₁`` alone).
    power : float
        The power ``p ≥ 1`` of ``loss="power_hinge"`` (ignored by the other losses).
    layout : {"binary", "ovr", "joint"}
        One model; one model per class (one-vs-rest); one joint multiclass model.
    """

    loss: str
    C: float | None
    class_weight: object = None
    bias: float = 1.0
    bias_mode: str = "regularized"
    l1: float = 0.0
    layout: str = "binary"
    l2: float = 1.0
    power: float = 1.0

    def __post_init__(self):
        for name, value, allowed in (("loss", self.loss, LOSSES), ("layout", self.layout, LAYOUTS),
                                     ("bias_mode", self.bias_mode, BIAS_MODES)):
            if value not in allowed:
                raise InvalidParameterError(f"The {name!r} of a Problem must be one of "
                                            f"{allowed}. Got {value!r} instead.")
        if not (isinstance(self.power, (int, float)) and self.power >= 1.0):
            raise InvalidParameterError(f"The 'power' of a Problem must be a float in the "
                                        f"range [1.0, inf). Got {self.power!r} instead.")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Problem":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    # -- costs -------------------------------------------------------------------------
    def resolved(self, classes: np.ndarray, label_counts: dict) -> "Problem":
        """This problem with ``class_weight="balanced"`` replaced by the weights it gives on
        the training data (a model then carries costs it can apply to any data)."""
        if self.class_weight != "balanced":
            return self
        from .io import label_key
        counts = np.array([label_counts.get(label_key(c), 0) for c in classes], dtype=np.float64)
        weights = counts.sum() / (len(classes) * np.maximum(counts, 1))
        return dataclasses.replace(self, class_weight={label_key(c): float(w)
                                                       for c, w in zip(classes, weights)})

    def costs(self, classes: np.ndarray, label_counts: dict | None = None):
        """Per-model costs ``(Cp, Cn)`` (:func:`class_costs`)."""
        task = "binary" if self.layout == "binary" else "multiclass"
        return class_costs("problem", self.C, self.class_weight, task, np.asarray(classes),
                           label_counts or {})

    # -- objective -----------------------------------------------------------------------
    def regularizer(self, coef: np.ndarray, intercept: np.ndarray) -> float:
        """``Σ_c l2·½‖w_c‖² + ρ‖w_c‖₁`` plus, for a regularized bias, ``½b_c²`` (or ``ρ|b_c|``
        without the ℓ2 term)."""
        coef = np.asarray(coef, dtype=np.float64)
        reg = self.l2 * 0.5 * float(np.einsum("kd,kd->", coef, coef))
        if self.l1:
            reg += self.l1 * float(np.abs(coef).sum())
        if self.bias_mode == "regularized" and self.bias:
            b = np.asarray(intercept, dtype=np.float64) / self.bias
            reg += 0.5 * float(b @ b) if self.l2 else self.l1 * float(np.abs(b).sum())
        return reg

    def loss_sum(self, scores: np.ndarray, labels: np.ndarray, classes: np.ndarray,
                 costs) -> float:
        """``Σ_i Σ_c C_ic loss(y_ic · score_ic)`` over a block of rows.

        Parameters
        ----------
        scores : ndarray of shape (n_rows, n_models)
        labels : ndarray of shape (n_rows,)
            Original labels.
        classes : ndarray of shape (n_classes,)
        costs : tuple (Cp, Cn) from :meth:`costs`
        """
        Cp, Cn = costs
        if self.layout == "joint":                 # Weston–Watkins: Σ_{c≠y} hinge(s_y − s_c)
            yi = np.searchsorted(classes, labels)
            rows = np.arange(len(labels))
            t = np.maximum(0.0, 1.0 - (scores[rows, yi][:, None] - scores))
            t[rows, yi] = 0.0
            if self.loss == "squared_hinge":
                t = t * t
            return float((Cp[yi] * t.sum(axis=1)).sum())
        if self.layout == "binary":
            pos = (labels == classes[-1])[:, None]
        else:
            pos = labels[:, None] == classes[None, :]
        y = np.where(pos, 1.0, -1.0)
        xi = 1.0 - y * scores if self.loss == "squared" else np.maximum(0.0, 1.0 - y * scores)
        if self.loss in ("squared_hinge", "squared"):
            xi = xi * xi
        elif self.loss == "power_hinge" and self.power != 1.0:
            xi = xi ** self.power
        return float((np.where(pos, Cp[None, :], Cn[None, :]) * xi).sum())


def class_costs(owner: str, C: float, class_weight, task: str, classes: np.ndarray,
                label_counts: dict):
    """Per-model costs ``(Cp, Cn)`` following LIBLINEAR's ``-wi`` convention.

    Binary: ``Cp = C·w(positive class)``, ``Cn = C·w(negative class)``. One-vs-rest model
    ``c``: ``Cp = C·w(c)``, ``Cn = C``. ``class_weight`` maps original labels to
    multipliers, or is ``"balanced"`` (``n_rows / (n_classes · count(c))``).
    """
    from .io import label_key
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
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or \
                    not np.isfinite(v) or v <= 0:
                raise InvalidParameterError(f"The 'class_weight[{k}]' parameter of {owner} "
                                            f"must be a float in the range (0.0, inf). Got "
                                            f"{v!r} instead.")
        weights = np.array([float(norm.get(k, 1.0)) for k in keys])
    else:
        raise InvalidParameterError(f"The 'class_weight' parameter of {owner} must be a dict, "
                                    f"'balanced' or None. Got {class_weight!r} instead.")
    if task == "binary":
        if len(classes) == 1:
            return np.array([C * weights[0]]), np.array([C * weights[0]])
        return np.array([C * weights[1]]), np.array([C * weights[0]])
    return C * weights, np.full(len(classes), float(C))
