"""``ww``: the Weston–Watkins multiclass SVM by dual block coordinate descent with the exact
Walrus subproblem solver (spec_002).

Problem (spec §1.2, a joint model: one weight vector per class, trained together)::

    min_W  P(W) = ½‖W‖_F² + Σ_i C_{y_i} Σ_{c ≠ y_i} max(0, 1 − (w_{y_i} − w_c)ᵀx̄_i)

``x̄_i = (x_i, B)``: no bias by default (the paper's setting); ``bias=B > 0`` appends a
regularized constant feature (LIBLINEAR's ``-B``; an unregularized offset would break the
dual's box, spec §1.2). ``C_y = C·class_weight[y]``. Prediction: ``argmax_c w_cᵀx̄``.

Dual (spec §1.4, the β-form): per row ``k − 1`` multipliers ``β_i ∈ [0, C_{y_i}]^{k−1}`` (a
per-row state of the scheduler, width ``k − 1``, float64: it spills to scratch disk like any
state when it does not fit the budget) and their sum ``γ_i``; ``W = Σ_i x̄_i β_iᵀ π σ_{y_i}``
and ``D(β) = Σ_i γ_i − ½‖W‖²``. One pass is one outer iteration of Algorithm 1: the blocks in
a new seeded order, the rows of each block in a seeded permutation; each row's block of the
dual is minimized exactly by Walrus (``kernels/_ww.py``), a row whose β is 0 and whose
margins are all ≥ 1 is skipped without a solve (exact, spec §2.3).

Certificate, with no pass of its own (spec §8): the weights at the end of a pass are copied;
the next pass, while it trains, also sums the hinge losses of that copy, so at its end the
copy's primal ``P`` is known, and its dual ``D = Σ γ − ½‖W‖²`` was known when the copy was
taken: the duality gap of the last pass's iterate, exact. The model returned is that
certified iterate (one pass older than the newest weights). Two stopping rules, both
reported in the history: the relative gap ``(P − D)/P ≤ tol`` (the same meaning as every
other solver's ``tol``), and the paper's ``DG_t ≤ gap_decay · DG_1`` with ``DG_1`` the gap
after the first outer iteration (``gap_decay`` 0.0009 as in the paper's final table; 0
turns it off). ``max_passes`` ends with an exact read-only pass at the newest weights.

Whole store in RAM (``slab=True`` and every row fits the budget): the store is read once
into the RAM slab and the passes are rounds over it, never over the store again. A round is
one sweep over every row that trains and, fused in, sums the loss of the weights it starts
from (their exact gap: the certified iterate, as above), then sweeps of the rows not shrunk
(a row skipped, or whose β a sweep left unchanged, sits out until the next round). How many:
the gap falls about linearly in log scale with the row visits, so the last two certificates
predict the visits to the nearer stopping rule, and the round aims 30% past them (a round
that falls short costs another sweep over every row). The first round has no shrunk sweeps,
so the second certifies the iterate of exactly one epoch: ``DG_1`` is the paper's. Measured
against a compiled C++ reimplementation of the paper's solver (``tools/ww_ref.cpp``, which
certifies every epoch, as the paper's code does): README, "ww".

Part of the store in RAM: after each pass the rows still active (β ≠ 0 or a margin < 1)
are swept again and again in RAM while they fit the budget, with shrinking (a row whose β a
sweep leaves unchanged sits out the next sweeps, until a sweep over all of them decides),
until the largest projected gradient is a tenth of the pass's. When the whole store fits,
the slab holds every row (the sweeps visit the active ones), and where the sweeps stop the
gap of the newest weights is evaluated from the slab alone: exact, so a run can end there
without another pass over the store (history kind ``slab``).

On a dask cluster (``scheduler=``) ``ww`` runs the distributed loop of ``_ww_cocoa.py``
instead (local Walrus epochs with shrinking on every worker, the best steps along their
combined changes): the same problem and certificate, other iterates.

Two classes (a binary store): Weston–Watkins with ``C`` is the binary hinge SVM with
``2C`` (spec §7.12), so ww solves it with ``C/2``: the binary hinge SVM with the user's
``C``, the problem every other solver solves with that ``C``. ``u = w_+ − w_−`` is returned
as a binary model and declared as that problem, so its objective is ``2·P(W)``.
"""

from __future__ import annotations

import numpy as np

from ..kernels import row_sq_norms
from ..kernels._ww import ww_epoch, ww_scores_loss
from ..schedule import RowField
from ._base import register
from ._ww_cocoa import WestonWatkinsCocoa
from ._ww_common import WestonWatkinsBase, class_index

__all__ = ["WestonWatkinsSolver"]

_SLAB_SWEEPS = 50       # most sweeps of the RAM slab between two passes ...
_SLAB_PG = 0.1          # ... which stop once a sweep's largest |PG| is below this × the pass's
_SLAB_STREAM = 0x77     # the key of the slab sweeps' orders (sched.rng)
_AIM = 1.3              # whole store in RAM: aim this far past the visits the gaps predict
                        # (a round that falls short costs a sweep over every row)


@register("ww")
class WestonWatkinsSolver(WestonWatkinsBase):
    """The Weston–Watkins SVM by dual block coordinate descent and Walrus (module doc)."""

    state_version = 3                   # (the cluster loop's checkpoints are version 2)
    whole = False           # the RAM slab holds every row (set by start)

    def for_cluster(self, store):
        """On a dask cluster: the distributed loop on the same problem
        (``_ww_cocoa.py``)."""
        return WestonWatkinsCocoa(**self.get_params())

    def start(self, sched) -> None:
        self._start_common(sched, "the weights (newest, previous pass's, certified)")
        self.act = sched.state("ww.active", np.uint8, fill=1)
        self.sweeps = 0
        # the active rows, kept in RAM between passes (their β, γ and flags copied there)
        # a slab row keeps its class index and ‖x̄_i‖² besides (_slab_rows)
        self.rows = sched.resident_rows(
            self.act, (self.beta, self.gamma, self.act),
            fields=(RowField("int64"), RowField("float64")), ram=self.slab, disk=False)
        # the whole store fits: every row goes to the slab from the first pass on (the sweeps
        # visit the active ones; the gap is then exact from the slab alone)
        self.whole = self.slab and self.rows.fits_ram()
        if self.whole:
            self.rows.collect_to = "ram"
        self.trend = np.full(4, np.nan)         # (visits, gap) at the last two certificates
        self._slab_arrays = (0, None, None)     # (slab version, class indices, ‖x̄_i‖²)

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()

    state_arrays = ("W", "Wcert", "gsum", "cert", "gap1", "trend")
    state_values = ("epochs", "sweeps", "visits")

    def state_dict(self):
        arrays, meta = super().state_dict()
        if self.whole:                      # the slab stays between iterations (β lives there)
            self.rows.save_into(arrays, meta)
        return arrays, meta

    def load_state_dict(self, arrays, meta) -> None:
        super().load_state_dict(arrays, meta)
        if "rows" in meta:
            self.rows.load_from(arrays, meta)
    history_extras = ("gap_decay", "pg_max", "slab_sweeps")

    # -- one outer iteration: a training pass that certifies the last one's iterate -------
    def step(self, sched) -> dict:
        """A pass over the store (training, and the loss of the weights it starts from),
        then sweeps of the active rows in RAM when they were collected; a round in RAM
        when the whole store fits (:meth:`_ram_round`)."""
        if self.whole:
            return self._ram_round(sched)
        rows = self.rows
        Wprev = self.W.copy()
        out = np.zeros(4)
        # a spilled β: one block's pages resident (drop); the active rows counted and
        # collected as the blocks go by (rows)
        self.visits += sched.sweep(self._pass_block, sched, Wprev, self._scratch(), out,
                                   over="store", order="random",
                                   states=(self.beta, self.gamma, self.act), rows=rows,
                                   drop=(self.beta,)).visits
        self.epochs += 1
        self._certify(Wprev, *self._objectives(Wprev, out[0], self.gsum[0]))
        self.gsum[0] = out[1]
        sweeps, certified = self._slab_sweeps(sched, float(out[3])) if rows.ram is not None \
            else (0, False)
        rows.leave_ram()                           # (so a checkpoint holds the newest β)
        rows.plan()                                # the next pass collects them when they fit
        entry = self._entry("slab" if certified else "stream", active=int(rows.kept()[0]))
        entry["pg_max"], entry["slab_sweeps"] = float(out[3]), sweeps
        return entry

    def _pass_block(self, block, views, sched, Wprev, scratch, out) -> None:
        """The pass's :func:`ww_epoch` over one block, its rows in a seeded order."""
        B = self.costs.B
        X = (block.indptr, block.indices, block.data)
        q = np.empty(block.n_rows)
        row_sq_norms(X, B * B, q)
        order = sched.block_rng(block).permutation(block.n_rows).astype(np.int64)
        ww_epoch(X, self.unit, class_index(block.y, self.binary), q, order, views, self.costs,
                 (self.W, Wprev, True, False), scratch, out)

    def _epoch_on(self, sl, y, q, order, states, model, out) -> int:
        """:func:`ww_epoch` over the RAM slab ``sl``'s rows ``order`` (``states``: their β,
        γ and flags): the rows visited."""
        ww_epoch(sl.X, self.unit, y, q, order, states, self.costs, model, self._scratch(), out)
        return len(order)

    # -- the whole store in RAM: rounds of one evaluating sweep and shrunk sweeps ---------
    def _ram_round(self, sched) -> dict:
        """One round over a RAM slab holding every row (module doc, "Whole store in RAM"):
        a sweep over every row that trains and sums the loss of the weights it starts from
        (their exact gap: the certified iterate), then — from the second round on and
        unless a rule holds — sweeps of the rows not shrunk, as many visits as the gaps so
        far say are needed to reach the stopping rule before the next certificate."""
        rows = self.rows
        if rows.ram is None:
            rows.load_all()                 # one bulk read of the store; no streamed pass
        sl = rows.ram
        y, q = self._slab_rows(sl)
        beta, gamma, live = sl.local["ww.beta"], sl.local["ww.gamma"], sl.local["ww.active"]
        n, first, visits0 = sl.n_rows, self.epochs == 0, self.visits
        Wprev = self.W.copy()
        out = np.zeros(4)
        order = sched.rng(self.sweeps, _SLAB_STREAM).permutation(n).astype(np.int64)
        self.sweeps += 1
        self.visits += sched.sweep(self._epoch_on, y, q, order, (beta, gamma, live),
                                   (self.W, Wprev, not first, True), out,
                                   over=rows).visits
        self.epochs += 1
        # at W = 0 every pair's hinge is 1: P(0) = Σ_i C_i (k − 1), no evaluation needed
        loss = float(self.costs.Cp[y].sum()) * (self.k - 1) if first else float(out[0])
        self._certify(Wprev, *self._objectives(Wprev, loss, self.gsum[0]))
        self.gsum[0] = out[1]
        self.trend[:2] = self.trend[2:]
        self.trend[2:] = visits0, self.cert[0] - self.cert[1]
        rel, _, by_decay = self._rules(*self.cert[:2])
        sweeps = 0
        if not first and not (rel <= self.tol or by_decay):
            # (none after the first sweep: the next round certifies the iterate of one
            # epoch, DG_1 as in the paper)
            sweeps = self._shrunk_sweeps(sched, sl, y, q, self._visits_wanted(sched))
        entry = self._entry("slab", active=int(np.count_nonzero(live)))
        entry["pg_max"], entry["slab_sweeps"] = float(out[3]), sweeps
        return entry

    def _slab_rows(self, sl):
        """The slab's class indices and ``‖x̄_i‖²``, computed once per slab."""
        version, y, q = self._slab_arrays
        if version != self.rows.ram_version:
            B = self.costs.B
            y = class_index(sl.y, self.binary)
            q = np.empty(sl.n_rows)
            row_sq_norms(sl.X, B * B, q)
            self._slab_arrays = (self.rows.ram_version, y, q)
        return y, q

    def _visits_wanted(self, sched) -> int:
        """Row visits of shrunk sweeps before the next round: the gap falls about linearly
        in log scale with the visits, so from the last two certificates, ``_AIM`` times the
        visits that reach the nearer stopping rule's gap, less this round's sweep (when the
        gap rose: the last spacing again); at most 4× the visits between those certificates
        and ``_SLAB_SWEEPS`` sweeps of the slab."""
        va, ga, vb, gb = self.trend
        target = self.tol * abs(self.cert[0])
        if self.gap_decay > 0 and self.gap1[0] > 0:
            target = max(target, self.gap_decay * self.gap1[0])
        if not vb > va:
            return 0
        if ga > gb > target > 0:
            need = _AIM * np.log(gb / target) * (vb - va) / np.log(ga / gb)
        else:                               # no trend (the gap rose): the last spacing again
            need = vb - va
        want = need - (self.visits - vb)
        return int(min(max(want, 0.0), 4.0 * (vb - va), _SLAB_SWEEPS * float(sched.n_rows)))

    def _shrunk_sweeps(self, sched, sl, y, q, visits) -> int:
        """Sweeps of the slab rows not shrunk (a row skipped, or whose β a sweep left
        unchanged, sits out the following ones until the next round's sweep over every
        row), a new seeded order each, until ``visits`` row visits are made, no row is left,
        ``_SLAB_SWEEPS`` sweeps or ``max_passes``: the sweeps made."""
        beta, gamma, live = sl.local["ww.beta"], sl.local["ww.gamma"], sl.local["ww.active"]
        done, sweeps = 0, 0
        while done < visits and sweeps < _SLAB_SWEEPS and sched.passes < self.max_passes:
            idx = np.flatnonzero(live).astype(np.int64)
            if len(idx) == 0:
                break
            order = idx[sched.rng(self.sweeps, _SLAB_STREAM).permutation(len(idx))]
            self.sweeps += 1
            sweeps += 1
            swept = sched.sweep(self._epoch_on, y, q, order, (beta, gamma, live),
                                (self.W, self.W, False, True),
                                np.zeros(4), over=self.rows)
            self.visits += swept.visits
            done += swept.visits
        if sweeps:
            self.gsum[0] = float(gamma.sum())
        return sweeps

    def _scratch(self):
        k = self.k
        return (np.empty(k), np.empty(k), np.empty(k - 1), np.empty(k - 1), np.empty(k),
                np.empty(k - 1), np.empty(k - 1), np.empty(k), np.empty(k, np.int64))

    def _slab_sweeps(self, sched, pg_pass) -> tuple[int, bool]:
        """Sweeps of the RAM slab's rows (a new seeded order each), with shrinking: a row
        skipped, or whose β a sweep left unchanged, sits out the following sweeps. Once a
        sweep's largest projected gradient is below ``_SLAB_PG`` of the pass's (or no row is
        left), one sweep over every slab row decides: below again, the sweeps stop, else they
        go on. At most ``_SLAB_SWEEPS``; their row visits count as passes (``rows / n``).

        When the slab holds every row of the store, the duality gap of the newest weights is
        exact from the slab alone: it is evaluated when the sweeps stop (a read-only visit of
        the rows, counted too), and when it meets a stopping rule the weights are certified
        there, with no pass over the store: ``(sweeps, certified)``."""
        sl = self.rows.ram
        beta, gamma = sl.local["ww.beta"], sl.local["ww.gamma"]
        y, q = self._slab_rows(sl)
        before = float(gamma.sum())
        live = sl.local["ww.active"].copy()       # the rows not shrunk
        n, full, certified = 0, True, False
        for n in range(1, _SLAB_SWEEPS + 1):
            if sched.passes >= self.max_passes:     # the budget is spent: the driver decides
                n -= 1
                break
            idx = np.flatnonzero(live).astype(np.int64)
            order = idx[sched.rng(self.sweeps, _SLAB_STREAM).permutation(len(idx))]
            self.sweeps += 1
            out = np.zeros(4)
            self.visits += sched.sweep(self._epoch_on, y, q, order, (beta, gamma, live),
                                       (self.W, self.W, False, True), out,
                                       over=self.rows).visits
            stop = out[3] <= _SLAB_PG * pg_pass or not live.any()
            if self.rows.ram_full and (stop and full or n == _SLAB_SWEEPS):
                certified = self._certify_slab(sched, sl, y, float(gamma.sum()) - before)
                if certified:
                    break
            if stop:
                if full:
                    break
                live[:] = sl.local["ww.active"]     # un-shrink: the next sweep decides
                full = True
            else:
                full = False
        self.gsum[0] += float(gamma.sum()) - before
        return n, certified

    def _certify_slab(self, sched, sl, y, dgamma) -> bool:
        """The exact duality gap of the newest weights over a slab holding every row;
        certified (the model returned) when a stopping rule holds."""
        W = self.W
        primal, dual = self._objectives(W, self._slab_loss(sched, sl, y), self.gsum[0] + dgamma)
        rel, _, by_decay = self._rules(primal, dual)
        if rel <= self.tol or by_decay:
            self._certify(W.copy(), primal, dual)
            return True
        return False

    def _slab_loss(self, sched, sl, y) -> float:
        """The summed hinge loss of the newest weights over the slab's rows (read-only, its
        row visits counted)."""
        loss = np.zeros(1)
        self.visits += sched.sweep(self._loss_on, y, loss, over=self.rows).visits
        return float(loss[0])

    def _loss_on(self, sl, y, out_loss) -> int:
        """:func:`ww_scores_loss` over every row of the slab ``sl``: their number."""
        ww_scores_loss(sl.X, self.unit, y, self.W, self.costs, np.empty(self.k), out_loss)
        return sl.n_rows

    def final_check(self, sched) -> dict:
        """An exact read-only pass at the newest weights (over the slab when it holds every
        row)."""
        W = self.W
        if self.whole and self.rows.ram is not None:
            loss = self._slab_loss(sched, self.rows.ram, self._slab_rows(self.rows.ram)[0])
        else:
            loss = self._store_loss(sched, W)
        self._certify(W.copy(), *self._objectives(W, loss, self.gsum[0]))
        entry = self._entry("check", active=int(self.rows.kept()[0]))
        entry["pg_max"], entry["slab_sweeps"] = np.nan, 0
        return entry

    def _certify(self, W, primal, dual) -> None:
        self.Wcert[...] = W
        self.cert[:] = primal, dual, self._rules(primal, dual)[0]
        if self.epochs == 2 and np.isnan(self.gap1[0]):
            self.gap1[0] = primal - dual            # DG_1: iterate 1, certified by pass 2
