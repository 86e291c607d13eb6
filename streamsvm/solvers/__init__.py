"""Solvers: one module per method, registered by name in :data:`SOLVERS`."""

from . import alm, avsf, dcd, nesvm, newton, ww  # noqa: F401  (register each solver by name)
from ._base import SOLVERS, SolveResult

__all__ = ["SOLVERS", "SolveResult"]
