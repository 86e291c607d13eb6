"""avsf's visit codes (module doc of :mod:`.avsf`, "Out of core"): the hot rows' visits of
an epoch, drawn and shuffled once and dealt to the groups; each group's two blocks' visits
with its slice of them (and, with ``cache_visits``, extra visits of the hot rows) in one
shuffled list and one kernel call (:func:`~streamsvm.kernels._avsf.avsf_group`); the
epoch's visits all in the hot rows when no block has any (:func:`avsf_visits`).
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels._avsf import NSRC, avsf_codes, avsf_group, avsf_shuffle, avsf_visits

__all__ = ["AvsfVisits"]


class AvsfVisits:
    """The visit codes and kernel calls of :class:`~streamsvm.solvers.avsf.AVSFSolver` (a
    mixin over the solver's attributes: it reads ``k``, ``hot``, ``alpha``, ``p``,
    ``hot_flag``, ``unit``, ``model``, ``prob``, ``st``, ``epochs``, ``tau_in``, ``p_mean``,
    ``row_nnz`` and the parameters ``change_rate``, ``p_min``, ``p_max``, ``cache``,
    ``cache_visits``, keeps the buffers ``codes``, ``hbuf``, ``wbuf`` and ``extra_steps``,
    and offers a group's hot rows to the cache by :meth:`HotCachePolicy._admit`)."""

    def _adapt(self, sched):
        inv_l = 1.0 / sched.n_rows
        return (self.epochs == 0, float(self.change_rate), float(self.p_min), float(self.p_max),
                math.log(self.p_max / self.p_min), inv_l)

    def _hot_codes(self, budget, state):
        """The hot rows' visits of an epoch (``budget`` per model), shuffled: the buffer
        holding them and their number."""
        hot = self.hot
        m = int(budget.sum())
        H = self._hot_buffer(m)
        if hot.n_rows:
            used = avsf_codes(hot.local["avsf.p"], np.zeros(hot.n_rows, np.uint8), budget, 2,
                              H, 0, np.empty(hot.n_rows), state)
            avsf_shuffle(H, used, state)
        return H, m

    def _hot_buffer(self, m) -> np.ndarray:
        """The buffer of an epoch's hot-row visits (the groups' lists use ``codes``)."""
        if len(self.hbuf) < m:
            self.hbuf = np.empty(int(1.25 * m) + 16, np.int64)
        return self.hbuf

    def _hot_visits(self, hot, H, m, adapt) -> int:
        """An epoch's visits all in the hot rows (no block has a budget): :func:`avsf_visits`;
        the row visits they make (a visit of one model counting a k-th)."""
        avsf_visits(*self._sources(), H, m, self.unit, self.model, self.prob, adapt, self.st)
        return m // self.k

    def _group_on(self, g, sched, budget, H, edges) -> None:
        """:meth:`_group` of the sweep's group ``g``, with its slice of the hot visits."""
        self._group(sched, list(g.blocks), budget, H[edges[g.position]:edges[g.position + 1]])

    def _group(self, sched, blocks, budget, H) -> None:
        """The visits of up to two blocks' rows and a slice of the hot rows' visits, in one
        shuffled list and one kernel call; then the blocks' hottest rows into the cache."""
        k, hot = self.k, self.hot
        b0 = blocks[0]
        b1 = blocks[1] if len(blocks) > 1 else b0
        nb = len(blocks)
        budgets = np.zeros((2, k), np.int64)
        for j, b in enumerate(blocks):
            budgets[j] = budget[b.id]
        size = int(budgets.sum()) + len(H)
        rows = max(b0.n_rows, b1.n_rows)
        if self.cache_visits > 0 and hot.n_rows:    # dual cached loops (module doc)
            extra = int(self.cache_visits * size) // k + 1
            hp = hot.local["avsf.p"]
            more = np.empty(extra * k, np.int64)
            st = np.array([sched.block_seed(b0) ^ 0x5EED], dtype=np.uint64)
            used = avsf_codes(hp, np.zeros(hot.n_rows, np.uint8), np.full(k, extra), 2, more,
                              0, np.empty(hot.n_rows), st)
            H = np.concatenate([H, more[:used]])
            self.extra_steps += extra
            size += used
        if len(self.codes) < size:
            self.codes = np.empty(int(1.25 * size) + 16, np.int64)
        if len(self.wbuf) < rows:
            self.wbuf = np.empty(rows)
        state = np.array([sched.block_seed(b0)], dtype=np.uint64)
        count = np.zeros(2, np.int64)
        hf = self.hot_flag
        avsf_group(*self._sources(b0, b1), (hf.view(b0), hf.view(b1)), budgets, nb, H,
                   (self.codes, self.wbuf, state), self.unit, self.model, self.prob,
                   self._adapt(sched), self.st, (self.tau_in, self.p_mean, count))
        if self.cache > 0 and count.any() and not hot.full(self.row_nnz):
            self._admit([b for j, b in enumerate(blocks) if count[j]])

    def _sources(self, b0=None, b1=None):
        """``(Xs, ys, alphas, ps)`` of the kernels: two blocks and the hot rows (the hot rows
        three times when no block is resident)."""
        hot = self.hot
        Xh, ah, ph = hot.X, hot.local["avsf.alpha"], hot.local["avsf.p"]
        if b0 is None:
            return (Xh,) * NSRC, (hot.y,) * NSRC, (ah,) * NSRC, (ph,) * NSRC
        yh = hot.y.astype(b0.y.dtype, copy=False)
        return (((b0.indptr, b0.indices, b0.data), (b1.indptr, b1.indices, b1.data), Xh),
                (b0.y, b1.y, yh), (self.alpha.view(b0), self.alpha.view(b1), ah),
                (self.p.view(b0), self.p.view(b1), ph))
