"""The CoCoA+ outer loop: how the dual coordinate-descent solvers (``dcd``, ``avsf``) train on
a dask cluster (Ma, Smith, Jaggi, Jordan, Richtárik, Takáč 2015, "Adding vs. averaging in
distributed primal-dual optimization").

Problem: ``dcd``'s (LIBLINEAR ``-s 3``/``-s 1``, the bias a regularized feature; its dual
with ``w = Σ α y x̄``). Each worker is one partition (its blocks, ``K`` partitions); an outer
iteration is one pass: every worker runs one epoch of dual coordinate descent over its rows
(each block's rows in a seeded random order) on the local subproblem with the safe
``σ' = K``, against ``w`` plus its own accumulated change ``Δw_k`` (a run accumulator of the
scheduler); each worker's rows are mixed in one fresh random order per pass (``fuse``: in
throw-away experiments on a9a, dual CD over fixed blocks visited in turn, rows kept in the
same neighbourhood pass after pass, needed several times the passes; not a tool in tools/);
then ``w ← w + Σ_k Δw_k``
(aggregation by adding, γ = 1). The duals ``α`` are per-row state kept by the worker that
owns the block (``kernels/_cocoa.py``).

Certificate: the pass also sums, at its start, the primal's loss at ``w`` and the dual's
``Σ α − Σ D α²/2`` (``w = Σ α y x̄`` holds exactly, so ``D(α) = Σ α − ½‖w‖² − Σ D α²/2``); the
gap is that of the best point evaluated (the model returned; dual CD's primal oscillates)
and the best dual, exact; the driver stops on ``tol`` as for every solver. Without
``dcd``'s shrinking, plain dual CD needs many more passes on the hinge loss (BENCHMARKS.md,
"dask").

The iterates differ from the local ``dcd`` (no shrinking, partitions updated in parallel with
steps damped by ``σ'``) but the optimum does not: the same problem, certified by the same
gap. With one partition (the local backend) this is plain dual coordinate descent. ``avsf``'s
adaptive selection frequencies are not used on a cluster: it runs this loop too.
"""

from __future__ import annotations

import logging

import numpy as np

from ..kernels._cocoa import cocoa_rows
from ..problem import Problem
from ..schedule import Accumulator, Need
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, SVC_LOSS_PARAM,
                    Solver, rel_gap)

__all__ = ["CocoaDual"]

log = logging.getLogger(__name__)


class CocoaDual(Solver):
    """CoCoA+ for ``dcd``'s problem (module doc); created by ``dcd``/``avsf`` for a cluster,
    under their name."""

    params = (C_PARAM, SVC_LOSS_PARAM, BIAS_PARAM, *COMMON_PARAMS, CLASS_WEIGHT_PARAM)
    not_distributed = None
    state_version = 1
    history_extras = ("partitions",)

    def __init__(self, name: str, **params):
        self.name = name
        super().__init__(**params)

    def problem(self, store) -> Problem:
        return Problem(loss=self.loss, C=self.C, class_weight=self.class_weight, bias=self.bias,
                       layout="binary" if store.task == "binary" else "ovr")

    def start(self, sched) -> None:
        store = sched.store
        k = self.k = 1 if store.task == "binary" else len(store.classes)
        D1 = sched.n_features + 1
        sched.check_budget(self.name, {"the model and its change": Need((D1, k), count=3)})
        self.model = self.kernel_costs(store)
        self.unit = store.binary_values
        self.alpha = sched.state(f"{self.name}.cocoa.alpha", np.float64, width=k)
        self.W = np.zeros((D1, k))
        self.Wcert = np.zeros((D1, k))
        self.primal = np.full(k, np.inf)
        self.dual = np.full(k, -np.inf)
        self.gap = np.full(k, np.inf)
        self.epochs = 0

    state_arrays = ("W", "Wcert", "primal", "dual", "gap")
    state_values = ("epochs",)

    @property
    def n_iter(self) -> int:
        return self.epochs

    def coef(self):
        return self.Wcert[:-1].T.copy(), self.Wcert[-1] * self.bias

    def step(self, sched) -> dict:
        K = sched.partitions
        res = sched.map_reduce(_cocoa_block, states=(self.alpha,), order="random", fuse=True,
                               args=(self.W, float(K), self.model, self.unit, sched.seed,
                                     self.epochs),
                               acc={"dW": Accumulator(self.W.shape),
                                    "s": Accumulator((self.k, 3))})
        s = res["s"]
        reg = 0.5 * np.einsum("dk,dk->k", self.W, self.W)
        if not self.bias:
            reg -= 0.5 * self.W[-1] ** 2
        P = reg + s[:, 0]
        better = P < self.primal
        self.primal[better] = P[better]                 # the best point evaluated so far
        self.Wcert[:, better] = self.W[:, better]
        self.dual[:] = np.fmax(self.dual, s[:, 1] - reg - s[:, 2])
        self.gap[:] = rel_gap(self.primal, self.dual)
        self.epochs += 1
        entry = {"kind": "cocoa", "primal": float(self.primal.sum()),
                 "dual": float(self.dual.sum()), "gap": float(self.gap.max()), "exact": True,
                 "active": sched.n_rows, "partitions": float(K)}
        if self.gap.max() > self.tol:
            self.W += res["dW"]             # aggregation by adding (γ = 1)
        return entry

    def final_check(self, sched) -> dict:
        return {"kind": "check", "primal": float(self.primal.sum()),
                "dual": float(self.dual.sum()), "gap": float(self.gap.max()), "exact": True,
                "active": sched.n_rows, "partitions": float(sched.partitions)}


def _cocoa_block(block, views, args, acc) -> None:
    """One block of a CoCoA+ pass (``map_reduce`` kernel): :func:`cocoa_rows` over the
    block's rows in a random order seeded by (seed, epoch, block)."""
    W, sigma, model, unit, seed, epoch = args
    order = np.random.default_rng([seed, epoch, block.id]).permutation(block.n_rows)
    cocoa_rows((block.indptr, block.indices, block.data), unit, block.y, order, model, W,
               sigma, views[0], np.empty((2, W.shape[1])), acc["dW"], acc["s"])
