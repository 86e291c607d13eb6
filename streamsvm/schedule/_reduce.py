"""Accumulators the scheduler owns for :meth:`PassScheduler.map_reduce`.

A kernel adds its block's contribution into accumulator arrays it is handed; it never
allocates them. Two kinds:

* **run** accumulators (``per_block=False``, the default): one array per worker, zeroed (or
  set to the operation's identity) once, into which every block of that worker adds in
  visiting order — a d-vector gradient or a d×k matrix costs one array per worker, not
  one per block;
* **per-block** accumulators (``per_block=True``): set to the identity before each block and
  folded into the total by rank — (block id, occurrence) order, see
  :func:`~streamsvm.schedule._orders.visit_ranks` — so their floating-point result is the
  same for every visiting order (small arrays: scalars, per-class statistics).

Workers' partials are folded in a fixed order (worker by worker, each owning a fixed set of
blocks), so a run gives the same numbers every time. The local backend has one worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..exceptions import InvalidParameterError

__all__ = ["Accumulator", "Folder"]

_IDENTITY = {"sum": 0.0, "max": -np.inf, "min": np.inf}


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """What a reduction accumulates.

    Parameters
    ----------
    shape : int or tuple of int
    op : {"sum", "max", "min"} or callable, default="sum"
        How partials combine; a callable ``op(total, partial)`` updates ``total`` in place
        (then ``init`` gives its identity).
    dtype : dtype, default=float64
    per_block : bool, default=False
        Start from the identity at every block and fold by rank (module doc).
    init : array-like, optional
        The identity, when ``op`` is a callable (e.g. per-column identities).
    """

    shape: tuple
    op: str | Callable = "sum"
    dtype: str = "float64"
    per_block: bool = False
    init: object = None

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, (int, np.integer)) else tuple(self.shape)
        object.__setattr__(self, "shape", shape)
        if not callable(self.op) and self.op not in _IDENTITY:
            raise InvalidParameterError(f"The 'op' parameter of Accumulator must be 'sum', "
                                        f"'max', 'min' or a callable. Got {self.op!r} instead.")
        if callable(self.op) and self.init is None:
            raise InvalidParameterError("an Accumulator with a callable 'op' needs 'init'")

    def new(self) -> np.ndarray:
        """A fresh array at the identity."""
        if self.init is not None:
            return np.array(np.broadcast_to(np.asarray(self.init, dtype=self.dtype),
                                            self.shape))
        return np.full(self.shape, _IDENTITY[self.op], dtype=self.dtype)

    def fold(self, total: np.ndarray, part: np.ndarray) -> None:
        """``total ⊕= part`` in place."""
        if callable(self.op):
            self.op(total, part)
        elif self.op == "sum":
            np.add(total, part, out=total)
        elif self.op == "max":
            np.maximum(total, part, out=total)
        else:
            np.minimum(total, part, out=total)


class Folder:
    """The accumulators of one reduction: run arrays, per-block partials folded by rank."""

    def __init__(self, specs: dict, n_visits: int):
        self.specs = dict(specs or {})
        bad = [k for k, v in self.specs.items() if not isinstance(v, Accumulator)]
        if bad:
            raise InvalidParameterError(f"The 'acc' parameter of map_reduce must map names to "
                                        f"Accumulator(...). Got {bad[0]!r}: "
                                        f"{self.specs[bad[0]]!r} instead.")
        self.totals = {k: v.new() for k, v in self.specs.items()}
        self._per_block = [k for k, v in self.specs.items() if v.per_block]
        self._pending: dict[int, dict] = {}
        self._next = 0
        self.n = n_visits

    def arrays(self) -> dict:
        """The arrays a kernel adds into for its next block."""
        if not self._per_block:
            return self.totals
        acc = dict(self.totals)
        acc.update({k: self.specs[k].new() for k in self._per_block})
        return acc

    def done(self, rank: int, acc: dict) -> None:
        """The block of rank ``rank`` has added into ``acc``: fold its partials in order."""
        if not self._per_block:
            return
        self._pending[rank] = {k: acc[k] for k in self._per_block}
        while self._next in self._pending:
            part = self._pending.pop(self._next)
            self._next += 1
            for k, v in part.items():
                self.specs[k].fold(self.totals[k], v)

    def result(self) -> dict:
        return self.totals
