"""avsf's exact check (module doc of :mod:`.avsf`, "Stopping"; spec_003 §2.7, §3.6 item 5):
a read-only pass computing the exact projected gradients, primal and dual at the current
``w`` (over the hot rows when they hold the whole store); the test on the projected
gradients' spread; the exact dual objective kept every epoch.
"""

from __future__ import annotations

import numpy as np

from ..kernels._dcd import dcd_check, dcd_estimate
from ..schedule import Accumulator
from .dcd import _fold_stats, half_sq_norms

__all__ = ["AvsfCheck"]


class AvsfCheck:
    """The certificate of :class:`~streamsvm.solvers.avsf.AVSFSolver` (a mixin over the
    solver's attributes: it reads ``k``, ``hot``, ``alpha``, ``W``, ``st``, ``prob``,
    ``unit``, ``epochs`` and the parameters ``eps``, ``tol``, ``stop_rule``, and keeps
    ``pending``, ``last_check``, ``by_pg``, ``canstop`` and ``eps_now``)."""

    def _spread(self, hi, lo) -> float:
        if self.stop_rule == "liblinear":
            return float(np.max(hi - lo))
        return float(np.max(np.maximum(hi, -lo)))

    def _check_hot(self, hot, model, terms, stats) -> int:
        """The exact check over the hot rows holding the whole store: :func:`dcd_check`."""
        dcd_check(hot.X, self.unit, hot.y,
                  (hot.local["avsf.alpha"], np.ones((hot.n_rows, self.k), np.uint8)), model,
                  self.prob, (terms, stats))
        return hot.n_rows

    def _check(self, sched) -> dict:
        """Exact projected gradients, primal and dual at the current ``w``: a read-only pass
        (over the hot rows when they are the whole store)."""
        self.pending = False
        self.last_check = self.epochs
        k, hot = self.k, self.hot
        stats = np.zeros((k, 4))
        stats[:, 0], stats[:, 1] = -np.inf, np.inf
        terms = np.zeros((k, 3))
        model = (self.W, np.zeros_like(self.W[:-1]), np.zeros((k, 2)))
        if hot.whole:
            sched.sweep(self._check_hot, model, terms, stats, over=hot)
        else:
            hot.sync()
            res = sched.map_reduce(
                _check_block, states=(self.alpha,), args=(model, self.prob, self.unit),
                acc={"terms": Accumulator(terms.shape),
                     "stats": Accumulator(stats.shape, _fold_stats, per_block=True,
                                          init=stats)})
            terms, stats = res["terms"], res["stats"]
        cert = np.zeros((k, 2))
        dcd_estimate(model, terms, cert)
        primal, dual = cert[:, 0], cert[:, 1]
        gap = (primal - dual) / np.maximum(np.abs(primal), 1e-300)
        spread = self._spread(stats[:, 0], stats[:, 1])
        by_eps = self.eps is not None and spread <= self.eps
        if gap.max() > self.tol and not by_eps and self.by_pg:
            if self.eps is None:                # LIBLINEAR's test fired too early: tighten
                self.eps_now = max(self.eps_now * 0.1, 1e-12)
            self.canstop = False
        self.by_pg = False
        entry = self._entry("check", primal.sum(), dual.sum(), gap.max(), True, spread)
        if by_eps:
            entry["stop"] = True
        return entry

    def _dual(self) -> float:
        """The exact dual objective ``Σ α − ½‖w‖² − ½ Σ D α²`` (sums kept by the kernel)."""
        reg = half_sq_norms(self.W)
        return float((self.st[:, 3] - reg - self.st[:, 4]).sum())


def _check_block(block, views, args, acc) -> None:
    """The exact check on one block (``map_reduce`` kernel): dcd's check with every row
    active (AVSF shrinks none)."""
    model, prob, unit = args
    (alpha,) = views
    dcd_check((block.indptr, block.indices, block.data), unit, block.y,
              (alpha, np.ones(alpha.shape, np.uint8)), model, prob, (acc["terms"], acc["stats"]))
