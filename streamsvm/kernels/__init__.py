"""Numba kernels: CSR primitives (``_csr``); losses and solver epochs build on them.

Every kernel is a module-level ``@njit(cache=True, nogil=True)`` function of arrays and
scalars (grouped in tuples) that writes only into arguments named ``out*`` (DESIGN.md §7).
"""

from ._costs import Costs
from ._csr import (csr_check, csr_matmat, csr_matvec, csr_rmatmat_add, csr_rmatvec_add,
                   csr_take_rows, indptr_check, is_unit, kept_rows, row_axpy, row_axpys,
                   row_axpys_cols, row_dot, row_dots, row_gather, row_sq_axpy, row_sq_norm,
                   row_sq_norms, take_rows, values_within, w_add, w_at)

__all__ = [
    "Costs",
    "w_at", "w_add", "is_unit", "row_dot", "row_axpy", "row_dots", "row_axpys", "row_axpys_cols",
    "row_sq_axpy", "row_gather", "row_sq_norm",
    "csr_matvec", "csr_rmatvec_add", "csr_matmat", "csr_rmatmat_add", "row_sq_norms",
    "csr_take_rows", "take_rows", "kept_rows", "csr_check", "indptr_check", "values_within",
]
