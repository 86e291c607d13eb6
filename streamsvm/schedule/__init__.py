"""The pass scheduler: the only component that touches data (DESIGN.md §4).

Solvers see a store only through :class:`PassScheduler`: sweeps of blocks (``blocks``) and
of groups of resident blocks (``groups``), fused reductions into accumulators it owns
(``map_reduce`` with :class:`Accumulator`), rows kept resident in RAM or on scratch disk
(``resident_rows``), per-row state (:class:`RowState`), the memory budget (solvers declare
what they hold: :class:`Need`, :class:`RowField`) and the pass count. A :class:`Backend` runs the kernels: the local one here, threads of this process.
"""

from ._backend import Backend
from ._blocks import Block
from ._memory import parse_memory
from ._needs import Need, RowField
from ._orders import ORDERS, chunk_groups, weighted_schedule
from ._reduce import Accumulator
from ._resident import ResidentRows
from ._scheduler import Group, PassScheduler
from ._state import RowState

__all__ = ["Accumulator", "Backend", "Block", "Group", "Need", "ORDERS", "PassScheduler",
           "ResidentRows", "RowField", "RowState", "chunk_groups", "parse_memory",
           "weighted_schedule"]
