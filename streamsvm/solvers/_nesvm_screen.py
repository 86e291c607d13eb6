"""nesvm's safe screening (``screening``, hinge only; spec §4.5): the blocks a round may skip.

A full pass also gives, per block and model, the bound ``δ = min_i (m_i − 1)/‖x̄_i‖`` at
the reference point ``w_ref`` (``m_i`` the row's margin; the round's kernel sums it as the
block's slack). A row with ``m_i > 1`` adds nothing to a round (``u_i = 0``), and a point
within ``δ`` of ``w_ref`` keeps every row of the block there; so a block is skipped when,
for every model still training, both points of the round (``w`` and ``y``) lie within its
``δ``. The skipped blocks add exact zeros: the same iterates, fewer rows read. A full pass
refreshes the bounds every :data:`SCREEN_EVERY` rounds, and after a new homotopy stage.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Screening"]

SCREEN_EVERY = 10       # screening: a full pass refreshes the blocks' bounds this often


class Screening:
    """Safe screening for :class:`~streamsvm.solvers.nesvm.NesvmSolver` (a mixin; module
    doc). Owns ``delta`` (blocks × models), ``Wref``, ``ref_age`` and ``screened``;
    reads the sequences' ``W``, ``Y`` and ``kk`` and the solver's ``done`` and
    ``screening``."""

    def _start_screening(self, sched, D1: int, K: int) -> None:
        """The bounds, one row per block of the store with ``screening`` (none without)."""
        self.screened = 0
        # safe screening (spec §4.5): per block and model, min (m_i − 1)/‖x̄_i‖ at Wref
        nb = sched.n_blocks if self.screening else 0
        self.delta = np.full((nb, K), -np.inf)
        self.Wref = np.zeros((D1, K)) if self.screening else np.zeros((0, K))
        self.ref_age = np.zeros(1, dtype=np.int64)

    def _screen(self, two: bool):
        """The blocks this round must read (spec §4.5), or None for a full pass that
        refreshes the per-block bounds at the current point (the first, and every
        ``SCREEN_EVERY``-th round, and whenever a stage changed ``μ``): a block is
        skipped when, for every model still training, both points of the round (``w`` and
        ``y``) lie within its bound ``min_i (m_i − 1)/‖x̄_i‖`` of the reference point —
        then every row has ``m_i > 1``: ``u_i = 0``, nothing to add."""
        self.ref_age[0] += 1
        if self.ref_age[0] > SCREEN_EVERY or not np.isfinite(self.delta).any():
            return None
        live = ~self.done
        dist = np.sqrt(((self.W - self.Wref) ** 2).sum(axis=0))
        if two:
            moved = np.sqrt(((self.Y - self.Wref) ** 2).sum(axis=0))
            dist = np.where(self.kk > 0, np.maximum(dist, moved), dist)
        skip = (self.delta[:, live] > dist[live][None, :]).all(axis=1)
        self.screened += int(skip.sum())
        return ~skip

    def _refresh_bounds(self, slack: np.ndarray) -> None:
        """A full pass's per-block bounds, at the current point."""
        self.delta[...] = slack
        self.Wref[...] = self.W
        self.ref_age[0] = 0

    def _forget_bounds(self) -> None:
        """A new stage: the bounds were for the last stage's points."""
        self.delta[:] = -np.inf
