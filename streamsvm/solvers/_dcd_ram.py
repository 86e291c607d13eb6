"""dcd's RAM slab: its own per-row arrays, LIBLINEAR's epochs over it, and one-vs-rest
class by class when it holds every row.

One-vs-rest in memory, class by class (LIBLINEAR's way): sharing each read of a row among
all classes pays when rows come from the store, where one read serves every model. When the
whole store is in RAM there is no read to share, and the shared visit costs: a row stays in
the visit list while any class is still active on it, every class's threshold and stopping
test is the slowest class's, and the k weight columns of a row's features sit side by side
in memory where one class uses one. So with every row in the RAM slab and more than one
class, dcd runs LIBLINEAR's epochs one class at a time on contiguous copies of that class's
columns (its α, shrink flags, margins and weights), each class with its own ε, its own
shrinking thresholds and its own exact checks: when its test fires, the kernel checks that
class exactly at once (one read of the rows for its model) and the class is done at an
exact gap ≤ ``tol`` or goes on (``dcd_classes_epochs``). Once every class is certified the
iteration's certificate is exact, with no check pass over all classes (which, before, ran
each time every class's estimate was ready: on vowel, hinge, five such rounds of epochs and
check took 7.4 ms, the classes' own checks 5.3 ms, the fastest of 40 fits). A class that
used its share of ``max_passes`` waits for that check pass instead. The contiguous copies
are made once and kept from call to call until the check (or a checkpoint) needs the
solver's own arrays again. Visits count as passes at one k-th each (a class's epoch reads
every row for one model, and so does its check). Each class gets its share of
``max_passes`` (LIBLINEAR's per-class ``max_iter``). Measured with ``python tools/bench.py
--suite quick`` (BENCHMARKS.md, quick suite, multiclass).

Squared hinge: a class can switch to the primal (LIBLINEAR switches ``-s 1`` to ``-s 2``
after 300 dual iterations). Dual CD crawls on badly conditioned data (pendigits' features
run to 100: after 15 epochs its gap has not moved), where Newton-CG on the primal
(``kernels/_sqh_newton.py``) needs 10–15 steps. Rather than LIBLINEAR's fixed limit, each
class is probed: its dual runs one epoch, then up to ``PROBE_EPOCHS``; the fall of its
estimated gap between the two (decades per epoch) projects the epochs still needed to
``tol``, and a class projecting more than ``SWITCH_AFTER`` goes primal for good (a
sparse text-like set, 20 classes, 50,000 features, projects about 13 and stays dual: there
the dual is faster, 1.0 s against 1.4 s). A primal class keeps its Newton iterate as its
``W`` (not ``Σ y α x̄``: on pendigits that point's primal is 250 times the iterate's) and
``α_i = 2 C_i max(0, 1 − z_i)`` with that ``α``'s dual value, so its certificate stays a
true duality gap; its Newton runs until its own gap is below ``tol``/2 (tightened tenfold
if the exact check disagrees).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..kernels._csr import row_sq_norms
from ..kernels._dcd import dcd_classes_epochs, dcd_slab_epochs, dcd_terms_add
from ..kernels._sqh_newton import sqh_newton
from ._base import rel_gap

__all__ = ["RamSlab", "PerClass"]


class RamSlab:
    """dcd's own per-row arrays of the scheduler's RAM slab (``‖x̄_i‖²`` and the margins of
    the last visit) and LIBLINEAR's in-memory epochs over it."""

    def __init__(self, solver):
        self.s = weakref.proxy(solver)     # no cycle: the solver's O(d) arrays go with it
        self.qd = self.margin = None
        self.version = 0            # the scheduler's RAM slab these arrays belong to
        self.margins = False        # margins recorded since the slab was installed
        self.active = 0             # rows with an active model

    def duals(self):
        local = self.s.rows.ram.local
        return local["dcd.alpha"], local["dcd.active"], self.margin

    def refresh(self) -> None:
        """New arrays when the scheduler has just installed a slab."""
        rows = self.s.rows
        sl = rows.ram
        if sl is None or self.version == rows.ram_version:
            return
        self.qd = np.empty(sl.n_rows, np.float32)
        row_sq_norms(sl.X, float(self.s.bias) ** 2, self.qd)
        self.margin = np.zeros((sl.n_rows, self.s.k), np.float32)
        self.version = rows.ram_version
        self.margins, self.active = False, sl.n_rows

    def leave(self) -> None:
        """The slab's state back to the scheduler's states (its certificate terms first)."""
        s = self.s
        if s.rows.ram is None:
            return
        if self.margins:                # else terms still holds the sweep's sums
            s.terms[:] = 0.0            # the rows outside the slab are all shrunk
            dcd_terms_add(s.rows.ram.y, self.duals(), s.prob, s.terms)
        s.rows.leave_ram()
        self.qd = self.margin = None
        self.version = 0

    def epochs(self, sched, pg):
        """In-memory epochs until a pass of visits (one kernel call):
        ``(epochs, PG spread)``."""
        s = self.s
        info = np.zeros(5)
        rng_state = sched.rng(s.epochs, 1).integers(2**63, size=1, dtype=np.uint64)
        control = (s.shrinking, max(1, sched.n_rows), s.eps_pg, s.gap_trigger,
                   s.check_due - s.visits)
        s.visits += sched.sweep(self._epochs_on, pg, control, rng_state, info,
                                over=s.rows).visits
        self.active = int(info[4])
        s.cert_fresh = self.margins = True
        if info[3]:                # everything shrunk: un-shrink (LIBLINEAR does the same)
            s.unshrink()
        return max(1, int(info[0])), float(info[2]) if info[0] else -np.inf

    def _epochs_on(self, sl, pg, control, rng_state, info) -> int:
        """:func:`dcd_slab_epochs` over the slab ``sl``: the row visits it made."""
        s = self.s
        dcd_slab_epochs(sl.X, s.unit, sl.y, self.qd, self.duals(), s.model, s.prob, s.shrink,
                        control, rng_state, (np.empty(sl.n_rows, np.int64), np.empty((s.k, 3))),
                        (pg, s.cert, info))
        return int(info[1])

    def state_dict(self) -> tuple[dict, dict]:
        return {"slab.margin": self.margin}, {"active": self.active, "margins": self.margins}

    def load_state_dict(self, arrays: dict, meta: dict) -> None:
        self.refresh()
        self.margin[...] = arrays["slab.margin"]
        self.active, self.margins = meta["active"], meta["margins"]


class PerClass:
    """The per-class state and epochs of a :class:`~streamsvm.solvers.dcd.DCDSolver` whose
    RAM slab holds every row (module doc)."""

    FIELDS = ("eps", "plan", "certified", "ready", "spent", "dual_visits", "decided", "lgap",
              "lvisits", "primal", "pdual")

    PROBE_EPOCHS = 3
    """Squared hinge: the dual epochs of a class before its switch is decided (:meth:`_probe`)."""
    SWITCH_AFTER = 20.0
    """... and the dual epochs still needed (projected) above which it goes primal."""
    NEWTON_STEPS = 100
    """Newton steps of one call (the class is then checked, and goes on if it must)."""

    def __init__(self, solver):
        k = solver.k
        self.s = weakref.proxy(solver)     # no cycle: the solver's O(d) arrays go with it
        self.eps = np.full(k, 0.1)                 # LIBLINEAR's default ε, per class
        # [visits since its last exact check, visits due before an estimate-driven one,
        # misses of the estimate] (the kernel's own checks: kernels/_dcd.py)
        self.plan = np.zeros((k, 3), dtype=np.int64)
        self.certified = np.zeros(k, dtype=bool)   # exact gap ≤ tol at its current W
        self.ready = np.zeros(k, dtype=bool)       # certified, or its share used
        # row visits of each class since its last check: a class that used its share of
        # max_passes (max_passes visits per row, LIBLINEAR's per-class max_iter) waits for
        # the check, so at max_passes every class has had its share, not the first one all
        self.spent = np.zeros(k, dtype=np.int64)
        self.dual_visits = np.zeros(k, dtype=np.int64)  # own dual CD visits since the start
        # squared hinge: the classes switched to the primal Newton (LIBLINEAR -s 1 -> -s 2)
        # and their dual value at the last Newton call
        self.primal = np.zeros(k, dtype=bool)
        self.decided = np.zeros(k, dtype=bool)
        self.lgap = np.full(k, np.nan)             # log10 gap and visits at the probe's start
        self.lvisits = np.zeros(k, dtype=np.int64)
        self.pdual = np.full(k, np.nan)
        self.visits = 0                            # row visits not yet counted as passes
        self.cm = None      # class-major copies (duals, model) kept from step to step

    def _class_major(self):
        """``(duals, model)`` as the kernel takes them, class by class contiguous: copied
        from the solver's row-major arrays once, then kept until :meth:`sync`."""
        if self.cm is None:
            s, local = self.s, self.s.rows.ram.local
            duals = tuple(_transposed(a) for a in
                          (local["dcd.alpha"], local["dcd.active"], s.ramslab.margin))
            # before the first epoch W = zu = 0: fresh zeros, not a copy that writes (and so
            # page-faults in) k·d values the epochs may never touch (zu)
            model = tuple(np.zeros(a.shape[::-1]) if s.epochs == 0 else _transposed(a)
                          for a in (s.W, s.zu))
            self.cm = (duals, (model[0], model[1], s.zs))
        return self.cm

    def sync(self, model: bool = True) -> None:
        """The class-major copies back into the solver's arrays (before anything else reads
        or changes them: the exact check, a checkpoint, the result); ``model=False``: the
        per-row arrays only, the weights taken from :meth:`coef` instead."""
        if self.cm is None:
            return
        s, local = self.s, self.s.rows.ram.local
        duals, cmodel = self.cm
        pairs = [(duals[0], local["dcd.alpha"]), (duals[1], local["dcd.active"]),
                 (duals[2], s.ramslab.margin)]
        if model:
            pairs += [(cmodel[0], s.W), (cmodel[1], s.zu)]
        for src, out in pairs:
            _transposed(src, out)
        self.cm = None

    def coef(self) -> tuple[np.ndarray, np.ndarray]:
        """The weights (k, d) and the bias weights (k,) for the result: views of the
        class-major copy itself when there is one (writing it back into ``W`` would
        page-fault in a second k·d array: 0.1 s for 105 classes × 55,000 features), then
        :meth:`sync` of the per-row arrays."""
        W = self.cm[1][0] if self.cm is not None else _transposed(self.s.W)
        self.sync(model=False)
        return W[:, :-1], W[:, -1]

    def iteration(self, sched) -> dict:
        """One outer iteration of the solver (its history entry): the classes' epochs
        (:meth:`step`), exact when every class is certified by its own check at its current
        ``W``; or, once each class is certified or used its share of ``max_passes``, the
        solver's exact check of all classes."""
        s = self.s
        if self.ready.all():
            s.pending = [False, False]
            return s._check(sched)
        s.epochs += self.step(sched)[0]
        s.cert_fresh = True                 # each class's estimate, from its epochs
        primal, dual = s._objectives()
        return s._entry("slab", primal, dual, rel_gap(primal, dual), bool(self.certified.all()))

    def step(self, sched):
        """Epochs of every dual class not ready for the check, each in turn on its own
        contiguous copy (one kernel call), then Newton on the primal classes:
        ``(epochs, PG spread)``."""
        swept = sched.sweep(self._step_on, sched, over=self.s.rows)
        self.s.visits += swept.visits
        return swept.value

    def _step_on(self, sl, sched):
        """:meth:`step` over the slab ``sl``: ``(row visits, (epochs, PG spread))``, a visit of
        one class's model counting as a k-th of a row visit (the rest carried over)."""
        waiting = np.flatnonzero(~self.ready)
        dual = waiting[~self.primal[waiting]]
        epochs, spread = (self._dual_epochs(sched, dual) if len(dual)
                          else (0, -np.inf))
        if self.s.prob.squared:          # squared hinge: the dual classes too slow go primal
            self._probe(dual)
        primal = waiting[self.primal[waiting]]
        if len(primal):
            epochs += self._newton(sched, primal)
        rows = self.visits // self.s.k
        self.visits %= self.s.k
        return rows, (max(1, epochs), spread)

    def _dual_epochs(self, sched, waiting):
        s, sl = self.s, self.s.rows.ram
        k, n = s.k, sl.n_rows
        duals, model = self._class_major()
        pg, info = np.zeros((k, 3)), np.zeros((k, 6))
        seeds = sched.rng(s.epochs, 1).integers(2**63, size=k, dtype=np.uint64)
        share = float(s.max_passes) * n
        per_call = self._visits_per_call(sl, len(waiting))
        left = np.maximum(1, np.minimum(per_call, share - self.spent)).astype(np.int64)
        if s.prob.squared:               # squared hinge: stop at the probe's epochs
            to = np.where(self.dual_visits < n, n, self.PROBE_EPOCHS * n) - self.dual_visits
            left = np.where(~self.decided & (to > 0), np.minimum(left, to), left)
        control = (waiting.astype(np.int64), s.shrinking, left, s.tol, max(1, n // 2),
                   self.eps, self.plan, True)
        dcd_classes_epochs(sl.X, s.unit, sl.y, s.ramslab.qd, duals, model, s.prob, s.shrink,
                           control, seeds, (np.empty(n, np.int64), np.empty((1, 3)),
                                            np.empty((1, 4)), np.empty(5)), (pg, s.cert, info))
        visits = info[waiting, 1].astype(np.int64)
        self.visits += int(visits.sum())
        self.spent[waiting] += visits
        self.dual_visits[waiting] += visits
        self.certified[waiting] = info[waiting, 5] != 0
        self.ready[waiting] = self.certified[waiting] | (self.spent[waiting] >= share)
        spread = np.where(info[waiting, 0] > 0, info[waiting, 2], -np.inf)
        return int(info[waiting, 0].sum()), float(spread.max())

    def _probe(self, classes) -> None:
        """The switch to the primal, decided once per class from its dual's progress: the
        estimated gap after about one epoch and after ``PROBE_EPOCHS`` give a rate (decades
        per epoch); a class that would need more than ``SWITCH_AFTER`` epochs more at that
        rate goes primal."""
        s, n = self.s, self.s.rows.ram.n_rows
        cert = s.cert[classes]
        gap = rel_gap(cert[:, 0], cert[:, 1])
        lgap = np.log10(np.maximum(gap, 1e-300))
        first = ~self.decided[classes] & np.isnan(self.lgap[classes]) \
            & (self.dual_visits[classes] >= n)
        self.lgap[classes[first]] = lgap[first]
        self.lvisits[classes[first]] = self.dual_visits[classes[first]]
        due = ~self.decided[classes] & (self.dual_visits[classes] >= self.PROBE_EPOCHS * n)
        for c, lg in zip(classes[due], lgap[due]):
            self.decided[c] = True
            if self.ready[c]:
                continue
            rate = (self.lgap[c] - lg) / max(1e-300, (self.dual_visits[c] - self.lvisits[c]) / n)
            need = (lg - np.log10(s.tol)) / rate if rate > 0 else np.inf
            self.primal[c] = need > self.SWITCH_AFTER

    def _newton(self, sched, classes) -> int:
        """Newton-CG (``kernels/_sqh_newton.py``) on each primal class until its own gap is
        below ``tol``/2, from its current weights: the Newton steps taken."""
        s, sl = self.s, self.s.rows.ram
        duals, model = self._class_major()
        n, d = sl.n_rows, model[1].shape[1]
        pos, Cp, Cn, _, B = s.prob
        work = (np.empty(n, np.int64), np.empty((5, n)), np.zeros((6, d + 1, 1)))
        w, info = np.empty((d + 1, 1)), np.zeros(5)
        steps = 0
        for c in classes:
            w[:, 0] = model[0][c]
            duals[1][c] = 1                 # no shrinking; nothing at a bound (U = ∞)
            s.shrink[0][c], s.shrink[1][c] = np.inf, -np.inf
            sqh_newton(sl.X, s.unit, sl.y, (pos[c], Cp[c], Cn[c], B), w,
                       (0.5 * s.tol, self.NEWTON_STEPS), work, (duals[0][c], duals[2][c], info))
            model[0][c] = w[:, 0]
            s.cert[c] = info[3], info[4]
            self.pdual[c] = info[4]
            steps += int(info[0])
            self.visits += int(info[2])
            self.spent[c] += int(info[2])
            self.certified[c] = info[3] - info[4] <= s.tol * abs(info[3])
            self.ready[c] = self.certified[c] or self.spent[c] >= s.max_passes * n
        return steps

    def primal_duals(self, cert) -> None:
        """The dual value of each primal class (its ``W`` is the primal iterate, not ``Σ y α
        x̄``, so the dual computed from ``W`` is not its dual) into ``cert[:, 1]``."""
        cert[self.primal, 1] = self.pdual[self.primal]

    WORK_PER_CALL = 8_000_000
    """Row entries a kernel call visits at least (about 10 ms), shared among the classes
    it runs: on small data one pass of visits per call left Python's per-call overhead
    larger than the epochs themselves."""

    def _visits_per_call(self, sl, classes: int) -> int:
        per_row = 1 + len(sl.X[1]) // max(1, sl.n_rows)
        return max(1, sl.n_rows, self.WORK_PER_CALL // (per_row * classes))

    def after_check(self, gap: np.ndarray) -> None:
        """The global exact check's gaps per class (run once every class was certified or
        used its share of ``max_passes``): the classes above ``tol`` get a new share."""
        above = gap > self.s.tol
        self.ready[above] = self.certified[above] = False
        self.spent[above] = 0

    def state_dict(self) -> tuple[dict, dict]:
        """(The solver syncs the class-major copies first.)"""
        return {f"per_class.{n}": getattr(self, n) for n in self.FIELDS}, {"visits": self.visits}

    def load_state_dict(self, arrays: dict, meta: dict) -> None:
        for n in self.FIELDS:
            getattr(self, n)[...] = arrays[f"per_class.{n}"]
        self.visits = int(meta["visits"])


def _transposed(src, out=None, tile=256):
    """``src.T`` copied into ``out`` (a new C-contiguous array by default), tile by tile:
    numpy's copy of a large transposed array walks one of them with a stride of a whole row
    (105 classes × 55,000 features: 75 ms, tiled 5 ms)."""
    if out is None:
        out = np.empty(src.shape[::-1], dtype=src.dtype)
    n0, n1 = out.shape
    for a in range(0, n0, tile):
        for b in range(0, n1, tile):
            out[a:a + tile, b:b + tile] = src[b:b + tile, a:a + tile].T
    return out
