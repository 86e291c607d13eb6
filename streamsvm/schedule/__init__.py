"""The pass scheduler: the only component that touches data (DESIGN.md §4).

Solvers stream a store's blocks through their kernels with :class:`PassScheduler`
(``blocks`` for sequential block methods, ``map_reduce`` for fused reductions), keep
per-row state in :class:`RowState` arrays it owns, and build weighted visiting orders with
:func:`weighted_schedule`.
"""

from ._blocks import Block
from ._memory import parse_memory
from ._orders import ORDERS, weighted_schedule
from ._scheduler import PassScheduler
from ._state import RowState

__all__ = ["Block", "ORDERS", "PassScheduler", "RowState", "parse_memory", "weighted_schedule"]
