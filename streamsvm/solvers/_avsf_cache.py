"""avsf's hot-cache policy (module doc of :mod:`.avsf`, "the hot cache"; spec_003 §3.6):
which rows the cache (``schedule/_hot.py``) takes and gives back. Before an epoch, the
preference masses of the blocks and of the cache, and from a histogram of log p the
threshold ``τ_in`` of the cache's size; after a group's visits, the group's rows at least
``τ_in`` (and above the mean preference) enter, hottest first, while there is room; at the
end of the pass the rows below ``τ_in/2`` leave (hysteresis).
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels._avsf import avsf_masses

__all__ = ["HotCachePolicy"]

_BINS = 256         # bins of the histogram of log p behind τ_in
#: Blocks whose preferences one call of ``avsf_masses`` scans (then their pages of a
#: spilled ``p`` are dropped: 5 models × 3·10^6 rows, 120 MB, were otherwise mapped whole).
_PIECE_BLOCKS = 16


class HotCachePolicy:
    """The hot cache's admissions and evictions of :class:`~streamsvm.solvers.avsf.AVSFSolver`
    (a mixin over the solver's attributes: it reads ``k``, ``hot``, ``p``, ``hot_flag``,
    ``alpha``, ``bounds``, ``row_nnz`` and the parameters ``p_min``, ``p_max``, and keeps
    ``tau_in`` and ``p_mean``)."""

    def _masses(self, n, nb) -> np.ndarray:
        """The preference masses per model of the ``nb`` blocks' rows not hot (rows ``:nb``)
        and of the hot rows (row ``nb``); streamed, with them the mean preference and
        ``τ_in`` (:meth:`_threshold`, over each row's largest preference)."""
        k, hot = self.k, self.hot
        mass = np.zeros((nb + 1, k))
        hist = np.zeros(_BINS, np.int64)
        lo, width = math.log(self.p_min), math.log(self.p_max / self.p_min) / _BINS
        if not hot.whole:       # in pieces: one piece's pages of a spilled p mapped at once
            for g0 in range(0, nb, _PIECE_BLOCKS):
                g1 = min(nb, g0 + _PIECE_BLOCKS)
                avsf_masses(self.p.values, self.hot_flag.values, self.bounds[g0:g1 + 1],
                            mass[g0:g1], hist, lo, width)
                self.p.drop_rows(int(self.bounds[g0]), int(self.bounds[g1]))
        hp = hot.local["avsf.p"]
        mass[nb] = hp.sum(axis=0)
        if not hot.whole:
            if hot.n_rows:
                top = np.log(hp.max(axis=1))
                np.add.at(hist, np.clip(((top - lo) / width).astype(np.int64), 0, _BINS - 1), 1)
            self.p_mean = float(mass.sum(axis=0).max()) / n
            self.tau_in = self._threshold(hist, lo, width, self.p_mean)
        return mass

    def _threshold(self, hist, lo, width, mean) -> float:
        """τ_in: the lower edge of the bin where the hottest ``cache × ℓ`` rows end, and at
        least the mean preference: a row enters only when it is due more than once a pass
        (spec §3.6 says p > 1; as the preferences fall, to a mean of 0.15–0.2 on a9a at
        C = 100, that left the cache a quarter full of the rows due 2–6 times a pass)."""
        target = max(1, self.hot.max_rows)
        above = np.cumsum(hist[::-1])
        j = int(np.searchsorted(above, target))
        b = _BINS - 1 - min(j, _BINS - 1)
        return max(mean, math.exp(lo + b * width))

    def _admit(self, blocks) -> None:
        """The rows of ``blocks`` not hot whose largest preference is at least ``τ_in`` and
        above the mean enter the cache, hottest first, while there is room."""
        hot = self.hot
        for b in blocks:
            p = self.p.view(b)
            top = p.max(axis=1)
            rows = np.flatnonzero((top >= self.tau_in) & (top > self.p_mean) &
                                  (self.hot_flag.view(b) == 0))
            if len(rows):
                rows = rows[np.argsort(-top[rows], kind="stable")]
                hot.admit(b, rows, (self.alpha.view(b), p))
            if hot.full(self.row_nnz):
                break

    def _evict_cold(self) -> None:
        """The hot rows whose preferences fell below ``τ_in/2`` leave (hysteresis)."""
        hot = self.hot
        if not hot.whole and hot.n_rows:
            cold = hot.local["avsf.p"].max(axis=1) < 0.5 * self.tau_in
            if cold.any():
                hot.evict(cold)
