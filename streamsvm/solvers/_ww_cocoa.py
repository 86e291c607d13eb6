"""The distributed loop of ``ww``: how the Weston–Watkins multiclass SVM trains on a dask
cluster, in rounds of local Walrus epochs with shrinking on every worker and an exact step
along the workers' combined changes (the β-form dual of ``ww.py``, the round of
``_cocoa.py``; kernels in ``kernels/_ww_cocoa.py``).

The problem is ``ww``'s (the same ``problem()``, ``coef()`` and two-class mapping). Each
worker owns its blocks' rows and keeps their multipliers β and γ, their last changes Δβ and
a shrinking flag per row. A round:

1. every worker takes the client's last steps into β and sums ``Σ γ`` over all its rows
   (exact; no row is read), so the dual ``D = Σ γ − ½‖W‖²`` at the round's start is exact;
2. every worker runs one epoch of Walrus steps over its rows in one fresh random order, on
   CoCoA+'s local subproblem with ``σ'`` (the measured overlap of the workers' changes, as in
   ``_cocoa.py``); a *full* epoch visits every row, sums its loss at ``W`` (so the primal at
   the round's start is exact too) and decides its flag; the epochs between full ones visit
   only the active rows (shrinking, as the local ``ww``: a row skipped or left unchanged
   sits out until the next full epoch);
3. the client sums the changes and moves along them by the steps that maximize the dual
   over the box (``best_steps``: one for the entries that ended at a bound, at most 1, one
   for those inside, up to the largest feasible step).

With several workers an epoch over the active rows is cut in 8 rounds (as in ``_cocoa.py``,
fewer when a part would give a worker fewer than 64 rows: a fixed random slot per row, the ``due`` flags set at the end of the round
before), so each visit sees a less stale ``W``. Measured (C = 0.1, tol 1e-3, passes on 2 / 4
workers): dna 75.6 / 238.4 in one round per epoch, 54.3 / 95.8 in 4 parts, 53.1 / 80.8 in
8; letter 23.0 / –, 18.1 / 24.9, 16.8 / 23.3.

The next epoch is full after the first, once the active rows' largest projected gradient
over an epoch is at most 0.3 of the last full epoch's (the local ``ww``'s slab sweeps stop at
0.1; 0.3 measured best here: dna on 2 workers 72.2 passes against 75.6 at 0.1, 78.5 at 0.5,
letter 22.2, 23.0, 22.9, before the parts), when no row is active, or after 50 epochs over
the active rows.

Certificate: exact every round. The primal is known at each full epoch's weights, the dual
at every round's; the gap reported is that of the best primal point evaluated (the model
returned) and the best dual; the driver stops on ``tol`` or on ``ww``'s gap-decay rule
(``DG_1``: the gap after the second full epoch, the first after a round of steps).
``max_passes`` ends with a full epoch whose changes are not taken.

Passes: a worker's blocks stay in its block cache while they fit (its ``memory``); an epoch
over the active rows then counts only those rows (``map_reduce(visits=...)``), as the local
``ww``'s RAM slab does; blocks read from the store count all their rows.

The iterates differ from the local ``ww`` but the optimum does not: the same problem,
certified by the same gap.
"""

from __future__ import annotations

import numpy as np

from ..kernels import row_sq_norms
from ..kernels._ww_cocoa import ww_cocoa_due, ww_cocoa_rows, ww_cocoa_settle
from ..schedule import Accumulator
from ._cocoa import SigmaFromOverlap, best_steps, round_order, sweep_parts
from ._ww_common import WestonWatkinsBase, class_index

__all__ = ["WestonWatkinsCocoa"]

_PG_SHARE = 0.3         # a full epoch once the active rows' largest PG is this × the full's
_MAX_ACTIVE = 50        # ... or after this many epochs over the active rows


class WestonWatkinsCocoa(SigmaFromOverlap, WestonWatkinsBase):
    """``ww``'s distributed loop (module doc); created by ``ww`` for a cluster, under its
    name. ``slab`` has no effect here (a worker keeps its rows in its block cache)."""

    not_distributed = None
    state_version = 4                   # (the local ww's checkpoints are version 3)
    history_extras = ("gap_decay", "partitions", "step")
    state_arrays = ("W", "Wcert", "gsum", "cert", "gap1", "eta", "sigma", "pgfull", "pgsweep")
    state_values = ("epochs", "visits", "full", "since_full", "fulls", "part", "parts", "live")

    def for_cluster(self, store):
        return self

    def start(self, sched) -> None:
        k = self._start_common(sched, "the weights, their change and the best point")
        self.dbeta = sched.state("ww.cocoa.dbeta", np.float64, width=k - 1)
        self.active = sched.state("ww.cocoa.active", np.uint8, fill=1)
        self.due = sched.state("ww.cocoa.due", np.uint8, fill=1)
        self.eta = np.ones(2)               # the steps along the last round's changes
        self.sigma = np.zeros(1)            # the local subproblem's σ' (0: not yet measured)
        self.pgfull = np.full(1, np.inf)    # the last full epoch's largest PG
        self.pgsweep = np.zeros(1)          # the largest PG of this sweep's parts so far
        self.full, self.since_full, self.fulls = True, 0, 0
        self.part = 0                       # the part of the active rows this round visits
        self.parts = 1                      # ... of how many (this epoch's)
        self.live = sched.n_rows            # active rows, at the last count

    def step(self, sched) -> dict:
        return self._round(sched, take=True)

    def final_check(self, sched) -> dict:
        """An exact certificate of the newest weights: a full epoch whose changes are not
        taken."""
        self.full = True
        return self._round(sched, take=False)

    def _round(self, sched, take: bool) -> dict:
        K, W, full = sched.partitions, self.W, self.full
        following = 0 if full else (self.part + 1) % self.parts
        planned = sweep_parts(K, self.live) if following == 0 else self.parts
        res = sched.map_reduce(
            _ww_cocoa_block, states=(self.beta, self.gamma, self.dbeta, self.active, self.due),
            order="random", fuse=True, visits=None if full else self.due,
            args=(W, self._sigma(K), full, self.eta, self.costs,
                  self.unit, self.binary, sched.seed, self.epochs, K > 1,
                  (following, planned)),
            acc={"dW": Accumulator(W.shape), "dWb": Accumulator(W.shape),
                 "s": Accumulator(8), "pg": Accumulator(1, op="max"),
                 "room": Accumulator(1, op="min"), "own": Accumulator(1)})
        s = res["s"]
        self.epochs += 1
        self.visits += int(s[2])
        self.gsum[0] = s[1]
        if full:
            self.fulls += 1
            self._offer(W, *self._objectives(W, s[0], s[1]))
        else:
            reg = 0.5 * float(np.einsum("dk,dk->", W, W))
            self.cert[1] = max(self.cert[1], float(s[1]) - reg)
            self.cert[2] = self._rules(self.cert[0], self.cert[1])[0]
        entry = self._entry("check" if full else "cocoa", active=int(s[2]))
        self.live = int(s[7])
        if following == 0:
            self.parts = planned
        self._next_round(full, float(res["pg"][0]), self.live, following)
        done = entry.get("stop", False) or self.cert[2] <= self.tol
        if take and not done:
            dWb, dWi = res["dWb"], res["dW"] - res["dWb"]
            sums = np.array([[s[4], 0.0, 0.0, s[5], 0.0, 0.0]])
            self.eta[:] = best_steps(W.reshape(-1, 1), (dWb.reshape(-1, 1), dWi.reshape(-1, 1)),
                                     sums, res["room"])[0]
            W += self.eta[0] * dWb + self.eta[1] * dWi
            self._overlap(K, res)
        else:                                   # stopping here: the changes are not taken
            self.eta[:] = 0.0
        entry["partitions"] = float(K)
        entry["step"] = float(self.eta[1])
        return entry

    def _next_round(self, full, pg, active, following) -> None:
        """Whether the next round is a full epoch (module doc): decided at the end of a
        sweep over the active rows' parts."""
        self.part = following
        if full:
            self.pgfull[0], self.since_full, self.pgsweep[0] = pg, 0, 0.0
            self.full = bool(active == 0)
            return
        self.pgsweep[0] = max(self.pgsweep[0], pg)
        if following != 0:                  # the sweep goes on
            self.full = False
            return
        self.since_full += 1
        # (a bool, not numpy's: a snapshot kept in memory to resume after a lost worker is
        # checked against the fresh solver's types)
        self.full = bool(active == 0 or self.since_full >= _MAX_ACTIVE or
                         self.pgsweep[0] <= _PG_SHARE * self.pgfull[0])
        self.pgsweep[0] = 0.0

    def _offer(self, W, primal, dual) -> None:
        """A point evaluated exactly: kept when its primal is the best so far; the dual
        bound is the best seen (module doc)."""
        if primal < self.cert[0]:
            self.Wcert[...] = W
            self.cert[0] = primal
        self.cert[1] = max(self.cert[1], dual)
        self.cert[2] = self._rules(self.cert[0], self.cert[1])[0]
        if self.fulls == 2 and np.isnan(self.gap1[0]):
            self.gap1[0] = self.cert[0] - self.cert[1]


def _ww_cocoa_block(block, views, args, acc) -> None:
    """One worker's round (``map_reduce`` kernel, its blocks fused into one):
    :func:`ww_cocoa_settle`, then :func:`ww_cocoa_rows` over its rows in a random order
    seeded by (seed, epoch, block); with ``measure`` (several partitions, so each call is one
    worker's) it adds its own ``‖ΔW_k‖²`` for ``σ'``."""
    W, sigma, full, eta, costs, unit, binary, seed, epoch, measure, part = args
    beta, gamma, dbeta, active, due = views
    y = block.derived(("ww.y", binary), lambda: class_index(block.y, binary))
    out = np.zeros(8)
    ww_cocoa_settle(y, costs.Cp, beta, gamma, dbeta, eta, out)
    X = (block.indptr, block.indices, block.data)
    # (the rows' squared norms, like their classes: kept with a worker's fused block,
    # which every round visits)
    q = block.derived(("ww.q", costs.B), lambda: _sq_norms(X, costs.B))
    order = round_order(np.random.default_rng([seed, epoch, block.id]), due, full)
    k = W.shape[1]
    scratch = (np.empty(k), np.empty(k), np.empty(k - 1), np.empty(k - 1), np.empty(k),
               np.empty(k - 1), np.empty(k - 1), np.empty(k), np.empty(k - 1), np.empty(k))
    ww_cocoa_rows(X, unit, y, q, order, (beta, gamma, dbeta, active, due),
                  costs, (W, sigma, full), scratch, acc["dW"], acc["dWb"], out,
                  acc["room"])
    slots = np.random.default_rng([seed, 0x5107, block.id]).integers(0, part[1], block.n_rows)
    ww_cocoa_due(active, slots, part[0], due, out)
    acc["pg"][0] = max(acc["pg"][0], out[3])
    out[3] = 0.0
    acc["s"] += out
    if measure:
        acc["own"] += float(np.einsum("dk,dk->", acc["dW"], acc["dW"]))


def _sq_norms(X, B):
    """``‖x̄_i‖²`` of the CSR rows ``X``, the bias feature ``B`` included."""
    q = np.empty(len(X[0]) - 1)
    row_sq_norms(X, B * B, q)
    return q
