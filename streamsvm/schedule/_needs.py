"""What a solver holds in memory, declared as data: the scheduler alone turns it into bytes.

A solver says *what* it must keep whatever the budget — its models, their running sums, the
sums a pass accumulates — as :class:`Need` records (a shape, a dtype, how many), and what each
resident row costs it beside its CSR entries as per-row fields (:class:`RowField`). The
scheduler computes every byte from them (:meth:`PassScheduler.check_budget`, the room of the
resident and hot rows), so no solver does byte arithmetic, and a wrong count is the
scheduler's to fix, once, for every solver.

Shapes may name a dimension the scheduler knows and the solver does not need to: ``"block"``
(the rows of the largest block).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["Need", "RowField"]


@dataclasses.dataclass(frozen=True)
class Need:
    """Arrays a solver holds whatever the budget.

    Parameters
    ----------
    shape : tuple of int or str
        The shape of one array; ``"block"`` stands for the rows of the largest block.
    dtype : dtype, default float64
    count : int, default 1
        How many such arrays.
    per_pass : bool, default False
        The sums of a :meth:`PassScheduler.map_reduce` pass (run accumulators): the pass
        holds one array per level of its reduction tree, the scheduler counts them all.
    """

    shape: tuple
    dtype: str = "float64"
    count: int = 1
    per_pass: bool = False

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, (int, np.integer, str)) else \
            tuple(self.shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(self.dtype).str)

    def nbytes(self, dims: dict) -> int:
        """Bytes of ``count`` arrays, the named dimensions taken from ``dims``."""
        n = math.prod(int(dims[s]) if isinstance(s, str) else int(s) for s in self.shape)
        return self.count * n * np.dtype(self.dtype).itemsize


@dataclasses.dataclass(frozen=True)
class RowField:
    """A value (or ``width`` values) a solver keeps for each of its resident rows, beside the
    rows' CSR entries, labels, ids and the local copies of its per-row states (which the
    scheduler counts itself)."""

    dtype: str = "float64"
    width: int = 1

    def nbytes(self) -> int:
        return int(self.width) * np.dtype(self.dtype).itemsize
