"""``PassScheduler.map_reduce_rows``: :meth:`~PassScheduler.map_reduce`'s reduction over a RAM
slab of resident rows that holds every row of the store.

The kernel sees the store's blocks cut from the slab, in the order a sequential pass visits
them, and the accumulators fold by the same reduction groups, tree and ranks
(``_reduce.py``), so the result has the bits the same kernel gives in a pass over the store,
run locally or on a cluster. It is not a pass: the rows are the solver's resident rows
(newton sums its Hessians there, at the points a pass has chosen), their visits the
solver's. The kernel gets no per-row states.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import InvalidParameterError
from ._blocks import Block
from ._orders import sweep_order, visit_ranks
from ._reduce import Folder

__all__ = ["map_reduce_rows"]


def map_reduce_rows(sched, kernel, acc: dict, args: tuple, rows) -> dict:
    """``kernel(block, (), args, arrays)`` on every block of the store cut from the RAM slab
    of ``rows`` (:attr:`ResidentRows.ram_full`, its rows in store order), the accumulators
    ``acc`` folded as :meth:`PassScheduler.map_reduce` folds them: the reduced arrays."""
    if rows.ram is None or not rows.ram_full:
        raise InvalidParameterError("map_reduce_rows needs a RAM slab holding every row of "
                                    "the store")
    sl = rows.ram
    if not np.array_equal(sl.ids, np.arange(sched.n_rows)):
        raise InvalidParameterError("map_reduce_rows needs the slab's rows in store order")
    indptr, indices, data = sl.X
    ids = sweep_order("sequential", sched.n_blocks, sched.seed, 0)
    folder = Folder(acc, ids, sched._layout.groups)
    for b, rank in zip(ids.tolist(), visit_ranks(ids).tolist()):
        lo, hi = sched.block_bounds(b)
        p0, p1 = int(indptr[lo]), int(indptr[hi])
        block = Block(id=b, row_start=lo, indptr=indptr[lo:hi + 1] - p0,
                      indices=indices[p0:p1], data=data[p0:p1] if len(data) else data,
                      y=sl.y[lo:hi], rank=rank)
        arrays = folder.arrays(b)
        kernel(block, (), args, arrays)
        folder.done(b, rank, arrays)
    return folder.result()
