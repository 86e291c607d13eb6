"""The CoCoA+ outer loop for ``ww``: how the Weston–Watkins multiclass SVM trains on a dask
cluster (Ma et al. 2015 applied to the β-form dual of spec_002 §1.4; ``_cocoa.py`` does the
same for ``dcd``'s binary duals).

The problem is ``ww``'s (the same ``problem()``, ``coef()`` and two-class mapping). Each
worker is one partition (its blocks, ``K`` partitions); an outer iteration is one pass in
which every worker runs one epoch over its rows in one fresh seeded random order
(``map_reduce(fuse=True)``): each row's block of the dual is minimized exactly by Walrus on
CoCoA+'s local subproblem with the safe ``σ' = K`` — scores at ``W + σ'·ΔW_k``, curvature
``σ'‖x̄_i‖²`` (``kernels/_ww.py``: :func:`~streamsvm.kernels._ww.ww_cocoa`) — and then
``W ← W + Σ_k ΔW_k`` (aggregation by adding). β and γ are per-row state kept by the worker
that owns the block. With one partition (the local backend) this is ``ww``'s own sweep
without its shrinking and RAM slab.

Certificate, with no pass of its own: the pass sums the hinge losses of ``W`` (its start),
so ``P(W)`` is known at its end, and ``D`` of the β that ``W`` is made of was known when the
previous pass ended (``Σ γ − ½‖W‖²``; ``W = W(β)`` holds since every change of β goes into
ΔW). The gap reported is that of the best primal point evaluated (the model returned: CoCoA+
is monotone in the dual, not in the primal) against the best dual, exact; the driver stops
on ``tol`` or on ``ww``'s gap-decay rule, as locally. ``max_passes`` ends with an exact
read-only pass at the newest weights.

The iterates differ from the local ``ww`` (no shrinking, partitions updated in parallel
with steps damped by ``σ'``) but the optimum does not: the same problem, certified by the
same gap.
"""

from __future__ import annotations

import numpy as np

from ..kernels import row_sq_norms
from ..kernels._ww import ww_cocoa
from ..schedule import Accumulator
from ._ww_common import WestonWatkinsBase, class_index

__all__ = ["WestonWatkinsCocoa"]


class WestonWatkinsCocoa(WestonWatkinsBase):
    """CoCoA+ for ``ww``'s problem (module doc); created by ``ww`` for a cluster, under its
    name. ``slab`` has no effect here (a cluster has no RAM slab of the training process)."""

    not_distributed = None
    state_version = 2                   # (the local ww's checkpoints are version 3)
    history_extras = ("gap_decay", "partitions")
    state_arrays = ("W", "Wcert", "gsum", "cert", "gap1")
    state_values = ("epochs",)

    def for_cluster(self, store):
        return self

    def start(self, sched) -> None:
        self._start_common(sched, "the weights, their change and the best point")

    def step(self, sched) -> dict:
        K = sched.partitions
        W = self.W
        res = sched.map_reduce(_ww_cocoa_block, states=(self.beta, self.gamma),
                               order="random", fuse=True,
                               args=(W, self.costs, float(K), self.unit, self.binary,
                                     sched.seed, self.epochs),
                               acc={"dW": Accumulator(W.shape), "s": Accumulator(4)})
        s = res["s"]
        self.epochs += 1
        self._offer(W, *self._objectives(W, s[0], self.gsum[0]))
        W += res["dW"]                      # aggregation by adding (γ = 1)
        self.gsum[0] = s[1]
        entry = self._entry("cocoa", active=sched.n_rows)
        entry["partitions"] = float(K)
        return entry

    def final_check(self, sched) -> dict:
        """An exact read-only pass at the newest weights."""
        W = self.W
        self._offer(W, *self._objectives(W, self._store_loss(sched, W), self.gsum[0]))
        entry = self._entry("check", active=sched.n_rows)
        entry["partitions"] = float(sched.partitions)
        return entry

    def _offer(self, W, primal, dual) -> None:
        """A point evaluated exactly: kept when its primal is the best so far; the dual
        bound is the best seen (module doc)."""
        if primal < self.cert[0]:
            self.Wcert[...] = W
            self.cert[0] = primal
        self.cert[1] = max(self.cert[1], dual)
        self.cert[2] = self._rules(self.cert[0], self.cert[1])[0]
        if self.epochs == 2 and np.isnan(self.gap1[0]):
            self.gap1[0] = self.cert[0] - self.cert[1]


def _ww_cocoa_block(block, views, args, acc) -> None:
    """One block of a CoCoA+ pass (``map_reduce`` kernel): its rows in a random order seeded
    by (seed, epoch, block), through :func:`~streamsvm.kernels._ww.ww_cocoa`."""
    W, costs, sigma, unit, binary, seed, epoch = args
    X = (block.indptr, block.indices, block.data)
    q = np.empty(block.n_rows)
    row_sq_norms(X, costs.B * costs.B, q)
    order = np.random.default_rng([seed, epoch, block.id]).permutation(block.n_rows)
    k = W.shape[1]
    scratch = (np.empty(k), np.empty(k), np.empty(k - 1), np.empty(k - 1), np.empty(k),
               np.empty(k - 1), np.empty(k - 1), np.empty(k))
    ww_cocoa(X, unit, class_index(block.y, binary), q, order.astype(np.int64),
             (views[0], views[1]), costs, (W, sigma), scratch, acc["dW"], acc["s"])
