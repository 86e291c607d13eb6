"""Solvers: one module per method, registered by name in :data:`SOLVERS`."""

from . import dcd  # noqa: F401  (registers "dcd")
from ._base import SOLVERS, SolveResult

__all__ = ["SOLVERS", "SolveResult"]
