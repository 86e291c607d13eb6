"""The distributed dual loop: how the dual coordinate-descent solvers (``dcd``, ``avsf``)
train on a dask cluster, in rounds of local dual CD with shrinking on every worker and an
exact step along the workers' combined changes (after Lee & Roth, ICML 2015, "Distributed
box-constrained quadratic optimization for dual linear SVM"; LIBLINEAR's shrinking per
worker).

Problem: ``dcd``'s (LIBLINEAR ``-s 3``/``-s 1``, the bias a regularized feature; its dual
with ``w = Σ α y x̄``). Each worker owns its blocks' rows (one block of the dual's variables,
``K`` partitions) and keeps their duals, their last changes and their shrinking flags as
per-row state. A round (``kernels/_cocoa.py``):

1. every worker takes the client's last steps into its duals and sums the dual's terms of
   all its rows (exact; no row is read);
2. every worker runs one epoch of dual CD over its *active* rows in one fresh random order,
   against ``w`` plus its own change, on CoCoA+'s local subproblem with ``σ'`` (below);
   rows are shrunk as LIBLINEAR shrinks them, with the previous round's projected-gradient
   thresholds over all workers;
3. the client sums the changes and moves along them by the steps that maximize the dual (a
   concave quadratic in the steps, over the box: :func:`best_steps`), one for the rows that
   ended at a bound (at most 1) and one for those inside the box (up to the largest
   feasible). The sums the steps need come with the round: O(1) extra communication.

``σ'`` weighs a worker's own change in its subproblem: 1 is the block's exact subproblem
(Lee & Roth), ``K`` CoCoA+'s safe bound (Ma et al. 2015; this loop until 2026-11, with steps
of 1 and no shrinking: 18× the local passes on a9a with 2 workers, BENCHMARKS.md). Here it
follows the measured overlap of the workers' changes, ``‖Σ_k Δw_k‖² / Σ_k ‖Δw_k‖²`` (1 when
orthogonal, ``K`` when equal; each worker adds its own ``‖Δw_k‖²``), averaged over the rounds,
starting at ``(K + 1)/2``; the step corrects what ``σ'`` misjudges. Measured on two and four
workers (hinge, C = 1, tol 1e-3; passes): a9a 78 and 131 with ``σ' = (K + 1)/2`` fixed, 73
and 144 with the overlap; mushrooms (9 chunks) 141 and 237 fixed, 102 and 184 with the
overlap, 106 with ``σ' = 1`` on two workers (the fixed values by editing ``_sigma``, not a
tool in tools/; the loop as it is: BENCHMARKS.md, "dask, to a certified gap").

Parts: with several workers, a sweep over the active rows is cut in ``_PARTS`` = 8 rounds
(fewer when a part would give a worker fewer than 64 rows: :func:`sweep_parts`), each over
the rows of one part (a fixed random slot per row; the ``due`` flags, set by
:func:`~streamsvm.kernels._cocoa.cocoa_due` at the end of the round before): the workers
then exchange their changes eight times a sweep, and each visit sees a ``w`` less stale.
The shrinking thresholds, the primal estimate and the choice of the next full round are
taken over the whole sweep, at its last part. Measured (hinge, C = 1, tol 1e-3, passes on
2 / 4 workers): a9a 73.0 / 143.9 in one round per sweep, 75.3 / 104.1 in 4 parts, 67.7 /
93.0 in 8; mushrooms 102.2 / 183.7, 48.8 / 135.3, 45.2 / 101.1; the squared hinge on a9a,
2 workers: 618.6, 302.8, 173.5. More parts are more rounds (a round's cost on this 2-core
machine is ~30 ms of task round trips: a9a on 2 workers takes 96 s in 8 parts against 24
s in one); on a cluster with large data a part is still a large share of a worker's rows.

Passes: a worker's blocks stay in its block cache while they fit (its ``memory``); a round
then counts only the rows it visits, as the local ``dcd``'s RAM slab does
(``map_reduce(visits=...)``); blocks read from the store count all their rows.

Certificate: the dual at each round's start is exact. The primal is exact in a *check*, a
round that sums the loss of every row at ``w`` (one pass): the first round, a round after
which every row is active again (*unshrink*: LIBLINEAR's projected-gradient spread below
``ε`` — 0.1, divided by 10 each time it fires too early — or no row left active), and a
round asked for by the estimated gap, which re-activates only the shrunk rows that violate
their bound (as ``dcd``'s exact check). Between checks the primal is estimated as ``dcd``'s
is: the visited rows' losses at ``w``, 0 for rows shrunk at 0, and for rows shrunk at ``C``
their loss ``Σ C − w·zu``, linear in ``w`` (``zu`` summed as they are shrunk). The estimate
asks for a check when it is at most ``tol``, no sooner than half a pass of visits after the
last check (doubled after each miss, up to 4×). The gap reported is that of the best primal
point evaluated exactly (the model returned) and the best dual; the driver stops on an exact
gap ≤ ``tol``.

The iterates differ from the local ``dcd`` (partitions updated in parallel) but the optimum
does not: the same problem, certified by the same gap. With one partition (the local
backend, or one worker) ``σ' = 1``: plain dual CD with shrinking and an exact step along
each epoch's change. ``avsf``'s adaptive selection frequencies are not used on a cluster: it
runs this loop too.
"""

from __future__ import annotations

import logging

import numpy as np

from ..kernels._cocoa import cocoa_due, cocoa_rows, cocoa_settle
from ..problem import Problem
from ..schedule import Accumulator, Need
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, SVC_LOSS_PARAM,
                    Solver, rel_gap)

__all__ = ["CocoaDual", "SigmaFromOverlap", "best_steps", "sweep_parts"]

log = logging.getLogger(__name__)

_PARTS = 8          # several workers: a sweep over the active rows is this many rounds,
_PART_ROWS = 64     # ... fewer when a part would give a worker fewer rows than this


class SigmaFromOverlap:
    """The local subproblem's ``σ'`` of the distributed loops (this module's and
    ``_ww_cocoa.py``'s), from the workers' overlap; the solver keeps it in ``self.sigma``
    (one entry, 0 until measured)."""

    def _sigma(self, K) -> float:
        """The local subproblem's ``σ'`` on ``K`` partitions (:meth:`_overlap`)."""
        if K == 1:
            return 1.0
        return float(min(self.sigma[0], K)) if self.sigma[0] > 0 else (K + 1) / 2

    def _overlap(self, K, res) -> None:
        """``σ'`` for the next round: the workers' changes' overlap ``‖Σ_k Δw_k‖² /
        Σ_k ‖Δw_k‖²`` (1 when they are orthogonal, ``K`` when they are the same), averaged
        over the rounds (weight 0.3 for the newest), within [1, K]; ``(K + 1)/2`` at first
        (module doc)."""
        own = float(res["own"].sum())
        if K > 1 and own > 0:
            ratio = float(np.einsum("dk,dk->", res["dW"], res["dW"])) / own
            prev = self._sigma(K)
            self.sigma[0] = float(np.clip(0.7 * prev + 0.3 * ratio, 1.0, K))


class CocoaDual(SigmaFromOverlap, Solver):
    """The distributed dual loop for ``dcd``'s problem (module doc); created by
    ``dcd``/``avsf`` for a cluster, under their name."""

    params = (C_PARAM, SVC_LOSS_PARAM, BIAS_PARAM, *COMMON_PARAMS, CLASS_WEIGHT_PARAM)
    not_distributed = None
    state_version = 3
    history_extras = ("partitions", "step")

    def __init__(self, name: str, *, shrinking: bool = True, **params):
        self.name = name
        self.shrinking = bool(shrinking)
        super().__init__(**params)

    def problem(self, store) -> Problem:
        return Problem(loss=self.loss, C=self.C, class_weight=self.class_weight, bias=self.bias,
                       layout="binary" if store.task == "binary" else "ovr")

    def start(self, sched) -> None:
        store = sched.store
        k = self.k = 1 if store.task == "binary" else len(store.classes)
        D1 = sched.n_features + 1
        sched.check_budget(self.name, {"the model, its changes and the shrunk rows' sums":
                                       Need((D1, k), count=6)})
        self.model = self.kernel_costs(store)
        self.unit = store.binary_values
        if self.loss == "squared_hinge" and sched.partitions > 1:
            log.warning("%s with the squared hinge on %d dask workers needs more passes than "
                        "one machine (a9a: 1.9x on 2 workers, 5.2x on 4; BENCHMARKS.md); newton "
                        "trains the squared hinge there in a few passes, bit for bit as locally",
                        self.name, sched.partitions)
        self.alpha = sched.state(f"{self.name}.cocoa.alpha", np.float64, width=k)
        self.dalpha = sched.state(f"{self.name}.cocoa.dalpha", np.float64, width=k)
        self.active = sched.state(f"{self.name}.cocoa.active", np.uint8, width=k, fill=1)
        self.due = sched.state(f"{self.name}.cocoa.due", np.uint8, fill=1)
        self.W = np.zeros((D1, k))
        self.Wcert = np.zeros((D1, k))
        self.zu = np.zeros((D1, k))         # Σ C y x̄ of the pairs shrunk at C
        self.zs = np.zeros(k)               # Σ C of those pairs
        self.eta = np.ones((k, 2))          # the steps along the last round's changes
        self.sigma = np.zeros(1)            # the local subproblem's σ' (0: not yet measured)
        self.thresholds = np.empty((2, k))  # the last round's largest and smallest PG
        self.thresholds[0], self.thresholds[1] = np.inf, -np.inf
        self.primal = np.full(k, np.inf)
        self.dual = np.full(k, -np.inf)
        self.gap = np.full(k, np.inf)
        self.epochs = 0
        self.visits = 0                     # pairs visited (what the rounds report)
        self.next = "unshrink"              # the next round: "round", "check" or "unshrink"
        self.eps_pg = 0.1                   # LIBLINEAR's default dual stopping tolerance
        self.check_due, self.check_misses = 0, 0
        self.cause = [False, False]         # what asked for the next full round: gap, PG
        self.part = 0                       # the part of the active rows this round visits
        self.parts = 1                      # ... of how many (this sweep's)
        self.live = sched.n_rows            # rows with an active pair, at the last count
        self.sweep = np.zeros((3, k))       # this sweep's loss sum, largest and smallest PG
        self.shown = np.full(k, np.inf)     # the primal estimated at the last sweep's end
        self._new_sweep()

    state_arrays = ("W", "Wcert", "zu", "zs", "eta", "sigma", "thresholds", "primal", "dual",
                    "gap", "sweep", "shown")
    state_values = ("epochs", "visits", "next", "eps_pg", "check_due", "check_misses",
                    "cause", "part", "parts", "live")

    @property
    def n_iter(self) -> int:
        return self.epochs

    def coef(self):
        return self.Wcert[:-1].T.copy(), self.Wcert[-1] * self.bias

    def step(self, sched) -> dict:
        return self._round(sched, take=True)

    def final_check(self, sched) -> dict:
        """An exact certificate of the newest weights: a check whose changes are not
        taken."""
        if self.next == "round":
            self.next = "check"
            self.cause = [False, False]
        return self._round(sched, take=False)

    def _round(self, sched, take: bool) -> dict:
        K, k = sched.partitions, self.k
        full = self.next != "round"         # every pair's loss summed: an exact primal
        if self.next == "unshrink":         # every row active again, nothing shrunk
            self.active.fill(1)
            self.zu[:] = 0.0
            self.zs[:] = 0.0
            self.thresholds[0], self.thresholds[1] = np.inf, -np.inf
        following = 0 if full else (self.part + 1) % self.parts
        planned = sweep_parts(K, self.live) if following == 0 else self.parts
        res = sched.map_reduce(
            _cocoa_block, states=(self.alpha, self.dalpha, self.active, self.due),
            order="random", fuse=True, visits=None if full else self.due,
            args=(self.W, self._sigma(K), full, self.eta, self.thresholds, self.model,
                  self.unit, sched.seed, self.epochs, K > 1, (following, planned)),
            acc={"dW": Accumulator(self.W.shape), "dWb": Accumulator(self.W.shape),
                 "dzu": Accumulator(self.W.shape), "s": Accumulator((k, 11)),
                 "pgmax": Accumulator((k,), op="max"), "pgmin": Accumulator((k,), op="min"),
                 "room": Accumulator((k,), op="min"), "own": Accumulator((k,)),
                 "live": Accumulator(1)})
        s = res["s"]
        self.epochs += 1
        self.visits += int(s[:, 1].sum())
        reg = 0.5 * np.einsum("dk,dk->k", self.W, self.W)
        if not self.bias:
            reg -= 0.5 * self.W[-1] ** 2
        dual = s[:, 2] - reg - s[:, 3]                  # exact at the round's start
        self.dual[:] = np.fmax(self.dual, dual)
        if full:                                        # every row's loss: exact
            P = reg + s[:, 0]
            better = P < self.primal
            self.primal[better] = P[better]             # the best point evaluated so far
            self.Wcert[:, better] = self.W[:, better]
            self.gap[:] = rel_gap(self.primal, self.dual)
            estimate = self.gap
        else:                   # shrunk at 0: no loss; shrunk at C: linear in w (module doc)
            if following == 0:  # the visited pairs' losses summed over the sweep's parts
                self.shown[:] = reg + self.sweep[0] + s[:, 0] + self.zs - \
                    np.einsum("dk,dk->k", self.W, self.zu)
            P = self.shown                      # (within a sweep: the last sweep's)
            estimate = rel_gap(np.fmin(P, self.primal), self.dual)
        self.zu += res["dzu"]
        self.zs += s[:, 10]
        self.part, self.live = following, int(res["live"][0])
        if following == 0:
            self.parts = planned
        if full or following == 0:              # a check, or a sweep's last part
            self._next_round(full, estimate, np.fmax(self.sweep[1], res["pgmax"]),
                             np.fmin(self.sweep[2], res["pgmin"]), int(res["live"][0]),
                             sched.n_rows)
            self._new_sweep()
        else:                                   # the sweep goes on
            self.sweep[0] += s[:, 0]
            np.fmax(self.sweep[1], res["pgmax"], out=self.sweep[1])
            np.fmin(self.sweep[2], res["pgmin"], out=self.sweep[2])
            self.next = "round"
        done = full and self.gap.max() <= self.tol
        if take and not done:
            dWb = res["dWb"]
            dWi = res["dW"] - dWb
            self.eta[:] = best_steps(self.W, (dWb, dWi), s[:, 4:10], res["room"])
            self.W += self.eta[:, 0] * dWb + self.eta[:, 1] * dWi
            self._overlap(K, res)
        else:                                   # stopping here: the changes are not taken
            self.eta[:] = 0.0
        return {"kind": "check" if full else "cocoa",
                "primal": float((self.primal if full else P).sum()),
                "dual": float(self.dual.sum()),
                "gap": float(self.gap.max() if full else estimate.max()), "exact": full,
                "active": int(s[:, 1].sum()), "partitions": float(K),
                "step": float(self.eta[:, 1].min())}

    def _new_sweep(self) -> None:
        self.sweep[0], self.sweep[1], self.sweep[2] = 0.0, -np.inf, np.inf

    def _next_round(self, full, estimate, pgmax, pgmin, live, n_rows) -> None:
        """Whether the next round is full (module doc), and the shrinking thresholds: after
        a check, or a sweep's last part (``pgmax``, ``pgmin``: the sweep's; ``live``: the rows
        with an active pair)."""
        if full:
            by_gap, by_pg = self.cause
            if self.gap.max() > self.tol:
                if by_pg:           # LIBLINEAR's test fired too early: tighten it
                    self.eps_pg = max(self.eps_pg * 0.1, 1e-12)
                if by_gap:          # the estimate was optimistic: space the checks wider
                    self.check_misses = min(self.check_misses + 1, 2)
            self.check_due = self.visits + (n_rows // 2) * 2 ** self.check_misses
        if self.shrinking:
            self.thresholds[0] = np.where(pgmax > 0, pgmax, np.inf)
            self.thresholds[1] = np.where(pgmin < 0, pgmin, -np.inf)
        by_gap = bool(estimate.max() <= self.tol and self.visits >= self.check_due)
        by_pg = bool(np.max(pgmax - pgmin) <= self.eps_pg)
        self.next = "unshrink" if by_pg or live == 0 else "check" if by_gap else "round"
        self.cause = [by_gap, by_pg]


def _cocoa_block(block, views, args, acc) -> None:
    """One worker's round (``map_reduce`` kernel, its blocks fused into one):
    :func:`cocoa_settle`, then :func:`cocoa_rows` over the rows in a random order seeded by
    (seed, epoch, block); with ``measure`` (several partitions, so each call is one
    worker's) it adds its own ``‖Δw_k‖²`` for ``σ'``."""
    W, sigma, check, eta, thresholds, model, unit, seed, epoch, measure, part = args
    alpha, dalpha, active, due = views
    cocoa_settle(block.y, alpha, dalpha, eta, model, acc["s"])
    order = round_order(np.random.default_rng([seed, epoch, block.id]), due, check)
    pg = np.empty((W.shape[1], 2))
    pg[:, 0], pg[:, 1] = -np.inf, np.inf
    cocoa_rows((block.indptr, block.indices, block.data), unit, block.y, order, model, W,
               sigma, check, (alpha, dalpha, active, due), (thresholds[0], thresholds[1]),
               np.empty((2, W.shape[1])), acc["dW"], acc["dWb"], acc["dzu"], acc["s"], pg,
               acc["room"])
    slots = np.random.default_rng([seed, 0x5107, block.id]).integers(0, part[1], block.n_rows)
    cocoa_due(active, slots, part[0], due, acc["live"])
    if measure:
        acc["own"] += np.einsum("dk,dk->k", acc["dW"], acc["dW"])
    np.maximum(acc["pgmax"], pg[:, 0], out=acc["pgmax"])
    np.minimum(acc["pgmin"], pg[:, 1], out=acc["pgmin"])


def round_order(rng, due: np.ndarray, every: bool) -> np.ndarray:
    """The rows a worker's round visits, in a random order: all of them in a check or full
    epoch (``every``); else, when at most half of the rows are due, the due rows only (a
    uniformly random order of them, as the restriction of a permutation of all rows is). A
    round between checks on several workers visits one part of the active rows: the
    permutation of every row and the scan past the others, at random places, cost more than
    its visits (ww on 2·10^6 rows, 2 workers: the permutation a quarter of a worker's
    samples, the scan most of the kernel's). With most rows due (one worker: every active
    row) a permutation of all rows, which the kernel scans past the others: gathering the
    due rows in a random order would read them at random places (dcd, 10^7 rows, one
    worker: 0.066 passes/s against 0.070)."""
    if every:
        return rng.permutation(len(due))
    rows = np.flatnonzero(due)
    if 2 * len(rows) > len(due):
        return rng.permutation(len(due))
    return rows[rng.permutation(len(rows))]


def sweep_parts(K: int, live: int) -> int:
    """How many rounds the next sweep over the active rows is cut in (module doc): one on
    one worker; with several, ``_PARTS``, fewer when a part would give each worker fewer than
    ``_PART_ROWS`` of the ``live`` rows (a round must carry enough work for its exchange)."""
    if K <= 1:
        return 1
    return int(min(_PARTS, max(1, live // (K * _PART_ROWS))))


_MAX_STEP = 1e6         # the inside rows' step when none of them limits it


def best_steps(W, parts, sums, room) -> np.ndarray:
    """Per model, the steps ``(η_b, η_i)`` along the bound rows' and the inside rows'
    changes (``parts``: their ``Δw``; ``sums``: ``[Σ Δα, Σ D α Δα, Σ D Δα²]`` of each, side
    by side) that maximize the dual, a concave quadratic in them, over ``[0, 1] × [0, room]``
    (``room``: the largest step that keeps the inside rows in their box, ≥ 1 since each
    worker's own change is feasible). With ``g_p = Σ Δα_p − w·Δw_p − Σ D α Δα_p`` and
    ``H = [Δw_p·Δw_q] + diag(Σ D Δα_p²)`` the maximum of ``gᵀη − ½ ηᵀHη`` over the box is
    the best of the interior stationary point (when inside) and each edge's optimum; ``η =
    (1, 1)``, the workers' own changes, is a candidate, so the dual never gains less."""
    dWb, dWi = parts
    out = np.ones((W.shape[1], 2))
    for c in range(W.shape[1]):
        g = np.array([sums[c, 0] - W[:, c] @ dWb[:, c] - sums[c, 1],
                      sums[c, 3] - W[:, c] @ dWi[:, c] - sums[c, 4]])
        cross = dWb[:, c] @ dWi[:, c]
        H = np.array([[dWb[:, c] @ dWb[:, c] + sums[c, 2], cross],
                      [cross, dWi[:, c] @ dWi[:, c] + sums[c, 5]]])
        hi = np.array([1.0, min(max(float(room[c]), 1.0), _MAX_STEP)])
        out[c] = _box_qp(g, H, hi)
    return out


def _box_qp(g, H, hi) -> np.ndarray:
    """``argmax gᵀη − ½ ηᵀHη`` over ``0 ≤ η ≤ hi`` (2 variables, ``H`` positive
    semi-definite): the best of the corners, the interior stationary point and each edge's
    own optimum."""
    cands = [np.ones(2), np.zeros(2), hi.copy(), np.array([hi[0], 0.0]),
             np.array([0.0, hi[1]])]
    det = H[0, 0] * H[1, 1] - H[0, 1] * H[1, 0]
    if det > 1e-12 * H[0, 0] * H[1, 1] and det > 0:
        cands.append(np.linalg.solve(H, g))
    for j in range(2):                  # η_j at a bound, the other at its own optimum
        o = 1 - j
        if H[o, o] > 0:
            for v in (0.0, hi[j]):
                e = np.empty(2)
                e[j], e[o] = v, (g[o] - H[o, j] * v) / H[o, o]
                cands.append(e)
    best, best_v = np.ones(2), -np.inf
    for e in cands:
        e = np.clip(e, 0.0, hi)
        v = g @ e - 0.5 * e @ H @ e
        if v > best_v:
            best, best_v = e, v
    return best
