"""Deterministic reduction of per-block partial results.

Partials are folded left to right in ascending *rank* — (block id, occurrence) order, see
:func:`~streamsvm.schedule._orders.visit_ranks` — whatever order the blocks were visited
or finished in. A partial that arrives before all lower ranks waits in a small reorder
buffer. So the floating-point sums are fixed by the set of visits alone: the same for
every visiting order, cache budget, prefetch depth, and (for a future parallel or dask
backend) completion order.

Buffer cost: none for sequential sweeps (ranks arrive in order); for random or weighted
orders up to the number of visits. Keep partials small (scalars, per-class or k×k
arrays); for a large accumulator such as a d-vector gradient with d in the millions, add
into an array you own inside ``func`` during a ``"sequential"`` sweep instead.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["OrderedReducer", "add_partials", "copy_partial"]


def copy_partial(x):
    """Deep copy of a partial (arrays copied; tuples, lists and dicts rebuilt)."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, tuple):
        return tuple(copy_partial(v) for v in x)
    if isinstance(x, list):
        return [copy_partial(v) for v in x]
    if isinstance(x, dict):
        return {k: copy_partial(v) for k, v in x.items()}
    return x


def add_partials(acc, p):
    """``acc + p`` elementwise over scalars, arrays, tuples, lists and dicts.

    Arrays of ``acc`` are updated in place when shape and dtype allow (``acc`` is owned by
    the reducer, never a partial returned by ``func``).
    """
    if isinstance(acc, np.ndarray):
        if np.shape(p) == acc.shape and np.result_type(acc, p) == acc.dtype:
            np.add(acc, p, out=acc)
            return acc
        return acc + p
    if isinstance(acc, (tuple, list)) and isinstance(p, (tuple, list)) and len(acc) == len(p):
        return type(acc)(add_partials(a, b) for a, b in zip(acc, p))
    if isinstance(acc, dict) and isinstance(p, dict) and acc.keys() == p.keys():
        return {k: add_partials(acc[k], p[k]) for k in acc}
    if isinstance(acc, numbers.Number) or isinstance(acc, np.generic):
        return acc + p
    raise TypeError(f"map_reduce cannot add a partial of type {type(p).__name__} to an "
                    f"accumulator of type {type(acc).__name__}: every partial must have the "
                    f"structure of the first (or of init); pass combine= for other types")


class OrderedReducer:
    """Fold partials in ascending rank, buffering those that arrive early.

    Parameters
    ----------
    n : int
        Number of partials (ranks ``0 .. n-1``).
    init : object, optional
        Starting value; deep-copied. None: the first partial (by rank), deep-copied.
    combine : callable, optional
        ``combine(acc, partial) -> acc``; default :func:`add_partials`.

    Notes
    -----
    ``None`` partials are skipped (a ``func`` that only updates per-row state).
    """

    def __init__(self, n: int, init=None, combine=None):
        self.n = n
        self.value = copy_partial(init)
        self.combine = combine or add_partials
        self.max_buffered = 0
        self._next = 0
        self._buffer: dict[int, object] = {}

    def add(self, rank: int, partial) -> None:
        """Record the partial of rank ``rank`` and fold every partial now in order."""
        self._buffer[rank] = partial
        self.max_buffered = max(self.max_buffered, len(self._buffer) - 1)
        while self._next in self._buffer:
            p = self._buffer.pop(self._next)
            self._next += 1
            if p is None:
                continue
            self.value = copy_partial(p) if self.value is None else self.combine(self.value, p)

    def result(self):
        """The folded value (``init`` copy or None if there were no partials)."""
        if self._next != self.n:
            raise RuntimeError(f"reduction incomplete: {self._next} of {self.n} partials folded")
        return self.value
