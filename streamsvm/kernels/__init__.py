"""Numba kernels: CSR primitives (``_csr``); losses and solver epochs build on them.

Every kernel is a module-level ``@njit(cache=True, nogil=True)`` function of arrays and
scalars that writes only into arguments named ``out*`` (DESIGN.md §7).
"""

from ._csr import (csr_matmat, csr_matvec, csr_matvec_subset, csr_rmatmat_add, csr_rmatvec_add,
                   csr_rmatvec_subset_add, row_axpy, row_axpy_multi, row_dot, row_dot_multi,
                   row_sq_norms, csr_take_rows, csr_check,
                   values_within, indptr_check)

__all__ = [
    "row_dot", "row_axpy", "row_dot_multi", "row_axpy_multi", "row_sq_norms",
    "csr_matvec", "csr_matvec_subset", "csr_rmatvec_add", "csr_rmatvec_subset_add",
    "csr_matmat", "csr_rmatmat_add", "csr_take_rows", "csr_check",
    "values_within", "indptr_check",
]
