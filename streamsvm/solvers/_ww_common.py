"""What ``ww``'s two outer loops share: the local one (``ww.py``: dual block coordinate
descent with shrinking and a RAM slab) and the one a dask cluster runs (``_ww_cocoa.py``:
local epochs with shrinking on every worker, the best steps along their changes).

The problem (``ww.py``'s module doc, spec_002 §1.2) and its β-form dual
``D(β) = Σ_i γ_i − ½‖W‖²`` (spec §1.4, ``γ_i = Σ β_i``) are the same for both, and so are the
parameters, the per-row states (β, γ), the weights (``W`` the newest, ``Wcert`` the
certified iterate, the model returned), the certificate (``cert = [P, D, relative gap]`` and
``DG_1``), the stopping rules and the history entries; the loops differ in their iterates
and their checkpoints (:class:`WestonWatkinsBase` leaves ``start``, ``step``,
``final_check`` and ``state_version`` to each). Two classes (a binary store): Weston–Watkins
with ``C`` is the binary hinge SVM with ``2C`` (spec §7.12), so it is solved with ``C/2``:
the binary hinge SVM with the user's ``C``; ``u = w_+ − w_−`` is returned as a binary model
and declared as that problem.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..exceptions import InvalidParameterError
from ..kernels._ww import ww_scores_loss
from ..problem import Problem
from ..schedule import Accumulator, Need
from ._base import C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, Param, Solver

__all__ = ["WestonWatkinsBase", "class_index", "ww_loss_block"]


class WestonWatkinsBase(Solver):
    """``ww``'s problem, states and certificate, shared by its local and cluster loops
    (module doc)."""

    name = "ww"
    summary = ("Weston-Watkins multiclass SVM (one joint model, not one-vs-rest) by dual "
               "block coordinate descent with the exact Walrus subproblem solver; the "
               "duality gap of each pass's iterate certified by the next pass")
    params = (
        C_PARAM,
        Param("bias", "float", 1.0, "value of a constant bias feature, regularized like the "
              "weights (LIBLINEAR -B); 0: no bias, the paper's setting", low=0.0),
        *COMMON_PARAMS,
        CLASS_WEIGHT_PARAM,
        Param("gap_decay", "float", 0.0009, "also stop once the duality gap is at most this "
              "share of the gap after the first pass (the paper's rule; 0: off)", low=0.0),
        Param("slab", "bool", True, "between passes, sweep the rows still active (β ≠ 0 or a "
              "margin < 1) again and again in RAM while they fit the memory budget"),
    )

    def problem(self, store) -> Problem:
        joint = self.joint_problem(store)
        if store.task != "binary":
            return joint
        return dataclasses.replace(joint, C=self.C, layout="binary")   # (module doc)

    def joint_problem(self, store) -> Problem:
        """The Weston–Watkins problem the kernels solve: with ``C``, or ``C/2`` on two
        classes, where it is the binary hinge SVM with ``C`` (module doc)."""
        C = self.C / 2 if store.task == "binary" else self.C
        return Problem(loss="hinge", C=C, class_weight=self.class_weight, bias=self.bias,
                       bias_mode="regularized" if self.bias else "none", layout="joint")

    def check_store(self, store) -> None:
        if len(store.classes) < 2:
            raise InvalidParameterError(
                f"ww needs rows of at least two classes; the store has one label "
                f"({store.classes[0]!r})")

    def _start_common(self, sched, weights: str) -> int:
        """What both loops start with: the classes and their costs, β and γ, the weights
        (three (n_features + 1) × k arrays, ``weights`` says which, charged to the budget)
        and the certificate; returns k."""
        store = sched.store
        self.binary = store.task == "binary"
        k = self.k = 2 if self.binary else len(store.classes)
        D1 = sched.n_features + 1
        sched.check_budget("ww", {weights: Need((D1, k), count=3)})
        # the joint problem's costs: Cp[y] of a row of class y (a binary store's classes:
        # −1, +1 → 0, 1), the kernels' (kernels/_ww.py)
        self.costs = self.kernel_costs(store, self.joint_problem(store))
        self.unit = store.binary_values
        self.beta = sched.state("ww.beta", np.float64, width=k - 1)
        self.gamma = sched.state("ww.gamma", np.float64)
        self.W = np.zeros((D1, k))          # the newest weights, W(β)
        self.Wcert = np.zeros((D1, k))      # the certified iterate (the model returned)
        self.gsum = np.zeros(1)             # Σ γ of the β that W is made of
        self.cert = np.array([np.inf, -np.inf, np.inf])    # primal, dual, gap of Wcert
        self.gap1 = np.full(1, np.nan)      # the gap after the first outer iteration
        self.epochs = 0
        self.visits = 0                     # row visits so far (what the sweeps return)
        return k

    @property
    def n_iter(self) -> int:
        return self.epochs

    @property
    def stale(self) -> bool:
        return not np.array_equal(self.W, self.Wcert)

    def _store_loss(self, sched, W) -> float:
        """The summed hinge loss of weights ``W`` over the store: one read-only
        ``map_reduce`` pass (:func:`ww_loss_block`)."""
        return sched.map_reduce(ww_loss_block, args=(W, self.costs, self.unit, self.binary),
                                acc={"loss": Accumulator(1)})["loss"][0]

    @staticmethod
    def _objectives(W, loss, gsum) -> tuple[float, float]:
        """``(P, D)`` at weights ``W`` with their summed hinge loss and ``Σ γ`` (module doc)."""
        reg = 0.5 * float(np.einsum("dk,dk->", W, W))
        return reg + float(loss), float(gsum) - reg

    def _rules(self, primal, dual) -> tuple[float, float, bool]:
        """The relative gap, the gap over ``DG_1`` (NaN before it is known) and whether the
        paper's gap-decay rule holds."""
        rel = (primal - dual) / max(abs(primal), 1e-300)
        decay = (primal - dual) / self.gap1[0] if self.gap1[0] > 0 else np.nan
        return rel, decay, bool(self.gap_decay > 0 and decay <= self.gap_decay)

    def _entry(self, kind, active) -> dict:
        primal, dual, rel = self.cert
        _, decay, by_decay = self._rules(primal, dual)
        # two classes: the declared binary problem's objectives (2C, u = w_+ − w_−) are
        # twice these, at every iterate (β keeps w_− = −w_+)
        scale = 2.0 if self.binary else 1.0
        entry = {"kind": kind, "primal": scale * float(primal), "dual": scale * float(dual),
                 "gap": float(rel), "exact": True, "active": active, "gap_decay": float(decay)}
        if by_decay:
            entry["stop"] = True                    # the paper's rule (module doc)
        return entry

    def coef(self):
        W, B = self.Wcert, float(self.bias)
        if self.binary:                             # u = w_+ − w_− (module doc)
            u = W[:, 1] - W[:, 0]
            return u[None, :-1].copy(), np.array([u[-1] * B])
        return W[:-1].T.copy(), W[-1] * B


def class_index(y, binary) -> np.ndarray:
    """Class indices 0..k−1 of stored labels (a binary store's ±1 as 0, 1)."""
    return (y > 0).astype(np.int64) if binary else y.astype(np.int64)


def ww_loss_block(block, views, args, acc):
    """The Weston–Watkins hinge loss of one block at fixed weights (``map_reduce`` kernel)."""
    W, costs, unit, binary = args
    X = (block.indptr, block.indices, block.data)
    ww_scores_loss(X, unit, class_index(block.y, binary), W, costs, np.empty(W.shape[1]),
                   acc["loss"])
