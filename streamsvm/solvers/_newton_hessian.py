"""newton's Hessians from its resident rows (module doc of :mod:`.newton`, "Passes"): when
every row of the store fits the RAM slab, a pass sums no Hessian; the rows stay in RAM,
and after the pass each model's Hessians are summed there at its accepted point only.

A fused pass evaluates each model at three points and two smoothing levels and, before it
knows which point Armijo takes, would sum six Hessians per model (three with the squared
hinge); a step uses one point's (its level's, or the next level's). Summed after the pass
over the rows in RAM, with the pass's own arguments and the scheduler's reduction
(``map_reduce_rows``), they are the same sums in the same order, bit for bit, at a third
of the work: usps (256 dense features, 10 models) spent most of a pass on Hessians. The
rows' visits here are not passes over the store, as with cg's products (issue 12).
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np

from ..exceptions import ConvergenceWarning
from ..schedule import RowField
from ._blas import single_blas
from ._newton_pass import hessian_block, hessian_sums, square_hessians

__all__ = ["NearRows", "hessian_next_level", "hessians_at_accepted", "resident_rows",
           "warn_no_room"]

log = logging.getLogger("streamsvm.solvers.newton")

_LONG_ROWS = 32         # the Hessians from the rows only on rows of this many entries at
                        # least: a row's rank-one updates, ½·entries² a slot, then outweigh
                        # re-reading it from RAM (on for every store, at c911de5: usps (256
                        # entries) 13.6 s → 5.9 s, dna (46) 2.6 → 1.0; a9a (14) 0.38 → 0.51,
                        # mushrooms (21) 0.42 → 0.48, letter and pendigits (16) unchanged)
_SOON = 30.0           # a model's last Newton decrement within this many times its level's
                        # threshold: its next level's Hessian summed with its level's
_SHARE = 0.4            # the store's rows may take this share of the RAM slab's room (the
                        # block cache keeps its own copy of the store in the rest)


def _fields(k, n_states):
    """What newton keeps per resident row besides its entries: the polish's and CG's work
    arrays (‖x̄_i‖², an order and an index; per model a dual and a margin) and, for the
    state not kept (the curvature or the polish's dual), a float32 per model all the
    same."""
    return (RowField("float64", 3), RowField("float64", 2 * k),
            RowField("float32", k * (3 - n_states)))


def resident_rows(solver, sched, k):
    """newton's resident rows (``None`` when it keeps none): for the polish the rows near
    the margin (state ``newton.near`` bit 1, with the last polish's duals ``newton.a``), for
    cg the rows with curvature (bit 2, with their curvatures ``newton.h``), and every row
    (bit 4) when the whole store fits ``_SHARE`` of the RAM slab's room and its rows are
    long (``_LONG_ROWS``): the Hessians are summed from them (``solver.lazy_h``:
    :func:`hessians_at_accepted`)."""
    # the states' copies as fields: a uint8 and two float32 per model at most
    solver.lazy_h = not solver.cg and solver.nnz_per_row >= _LONG_ROWS and \
        sched.store_fits_ram(_fields(k, 1) + (RowField("uint8", k), RowField("float32", 2 * k)),
                             _SHARE)
    if not (solver.polishing or solver.cg or solver.lazy_h):
        return None
    if solver.lazy_h:
        log.info("newton: the store fits in RAM: each Hessian is summed from the rows kept "
                 "there, at the accepted point only")
    solver.near = sched.state("newton.near", np.uint8, width=k)
    states = (solver.near,)
    if solver.cg:                           # with each row's curvature per model
        solver.hrow = sched.state("newton.h", np.float32, width=k)
        states += (solver.hrow,)
    if solver.polishing:                    # the last polish's duals (NaN: not near)
        solver.apol = sched.state("newton.a", np.float32, width=k, fill=np.nan)
        states += (solver.apol,)
    solver.states = states
    return sched.resident_rows(solver.near, states, fields=_fields(k, len(states)),
                               ram=True, disk=False)


def hessians_at_accepted(solver, sched):
    """The Hessians of the models whose cache this step took from the pass
    (``solver.h_want``: model → its point), summed over the rows kept in RAM with the
    pass's own arguments (``solver.h_args``) and the cutoff of every other slot at
    infinity: ``sched.map_reduce_rows`` folds them as the pass would have, so each is the
    Hessian the pass would have summed, bit for bit, at one slot per model (its point's
    level) instead of six. The next level's (the pass's speculation) is summed only when
    the model moves to it (:func:`hessian_next_level`): most steps stay at their level,
    and on usps half of what remained of the Hessians' work went to that slot."""
    want, solver.h_want = solver.h_want, {}
    solver.h_next = {}
    if not want:
        return
    L, cutoff = solver.L, solver.h_args[0][8]
    nxt = {c: p for c, p in want.items() if L > 1 and np.isfinite(cutoff[c, p * L + 1])}
    # the next level's with this level's where the model is about to move to it (its last
    # Newton decrement near its level's threshold: a guess, which changes no bit of
    # either Hessian), the others' only once the model moves (hessian_next_level)
    soon = {c for c in nxt if solver.dec_ratio[c] < _SOON}
    _sum_slots(solver, sched, {c: [p * L] + ([p * L + 1] if c in soon else [])
                               for c, p in want.items()})
    solver.h_next = {c: p for c, p in nxt.items() if c not in soon}
    solver.h_sched = sched


def hessian_next_level(solver, models) -> None:
    """Sum the next level's Hessians (``H[c, 1]``) of ``models`` whose pass speculated it
    and that :func:`hessians_at_accepted` left unsummed (before a level change reads them,
    and before a checkpoint: a resumed run has no pass arguments to sum them from)."""
    due = {c: [solver.h_next.pop(c) * solver.L + 1] for c in list(models)
           if c in solver.h_next}
    if due:
        _sum_slots(solver, solver.h_sched, due, first=1)


def _sum_slots(solver, sched, slots, first=0) -> None:
    """``H[c, first:]`` of each model ``c`` in ``slots`` (model → its slots of the pass)."""
    args, _ = solver.h_args
    width = max(len(v) for v in slots.values())
    k = solver.k
    models = np.array(sorted(slots), dtype=np.int64)       # (the others are not computed)
    acc = hessian_sums(k, solver.d + 1, solver.a, *solver.h_args[1], width, len(models))
    cutoff = np.full_like(args[8], np.inf)
    pick = np.zeros((k, width), dtype=np.int64)
    for c, sl in slots.items():
        cutoff[c, sl] = args[8][c, sl]
        pick[c, :len(sl)] = sl
        pick[c, len(sl):] = sl[0] + 1       # (the next level's, at infinity: no sum)
    live = np.zeros(k, dtype=bool)
    live[models] = args[6][0][models]
    plan = (live, *args[6][1:])
    with single_blas():
        res = sched.map_reduce_rows(hessian_block, acc=acc, rows=solver.rows,
                                    args=(*args[:6], plan, args[7], cutoff, args[9], pick,
                                          models))
    H = square_hessians(res["H"])
    for j, c in enumerate(models.tolist()):
        sl = slots[c]
        solver.H[c, first:first + len(sl)] = H[j, :len(sl)]


class NearRows:
    """The rows of a RAM slab ``sl`` near some model's margin (state ``newton.near`` bit 1),
    compacted in their order: the slab the polish sees when the slab holds those rows alone,
    so that the polish's epochs (their random orders are drawn over the slab's rows) are
    the same whether every row is kept for the Hessians or not. :meth:`write_back` returns
    the polish's duals (``newton.a``) to ``sl``."""

    def __init__(self, sl):
        self._sl = sl
        self._keep = keep = np.flatnonzero((sl.local["newton.near"] & 1).any(axis=1))
        indptr, indices, data = sl.X
        lens = indptr[keep + 1] - indptr[keep]
        ptr = np.zeros(len(keep) + 1, dtype=indptr.dtype)
        np.cumsum(lens, out=ptr[1:])
        at = np.repeat(indptr[keep] - ptr[:-1], lens) + np.arange(int(ptr[-1]))
        self.X = (ptr, indices[at], data[at] if len(data) else data)
        self.y, self.n_rows = sl.y[keep], len(keep)
        self.local = {name: v[keep] for name, v in sl.local.items()}

    def write_back(self) -> None:
        self._sl.local["newton.a"][self._keep] = self.local["newton.a"]


def warn_no_room(solver, sched, room) -> None:
    """Say once per run that the budget leaves the RAM slab no room (``room`` ≤ 0 bytes):
    cg then keeps no rows with curvature (its Newton steps use the Hessian's diagonal
    alone) and the polish no rows near the margin, so passes grow many times (the 3·10^6-row
    store at 200 MB read in blocks of 32,768 rows, whose room in flight takes it all: no
    certificate in 200 passes; in the default 5,860-row blocks, certified in 11)."""
    if room > 0 or getattr(solver, "_warned_room", False) or not (solver.cg or
                                                                    solver.polishing):
        return
    solver._warned_room = True
    kept = " and ".join(what for what, on in (("its Newton steps", solver.cg),
                                                ("its hinge polish", solver.polishing)) if on)
    need = math.ceil((sched.memory - room) / 1e6) + 1
    warnings.warn(f"newton: the memory budget leaves no room in RAM for the rows {kept} "
                  f"keep (the blocks in flight and the per-row state take it all): expect "
                  f"many more passes; rows fit only above memory={need}MB", ConvergenceWarning,
                  stacklevel=2)
