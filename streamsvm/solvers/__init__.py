"""Solvers: one module per method, registered by name in :data:`SOLVERS`."""

from . import avsf, dcd, newton, ww  # noqa: F401  (register "avsf", "dcd", "newton", "ww")
from ._base import SOLVERS, SolveResult

__all__ = ["SOLVERS", "SolveResult"]
