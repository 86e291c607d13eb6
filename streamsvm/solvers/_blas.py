"""BLAS on one thread for the host's small dense products."""

from __future__ import annotations

import contextlib

__all__ = ["single_blas"]

_CONTROLLER = []


@contextlib.contextmanager
def single_blas():
    """BLAS on one thread inside: the polish's interior point and newton's Hessians from the
    rows in RAM multiply and factor matrices of a few hundred rows, which OpenBLAS's
    threads slow down on 2 cores (a 200-row Cholesky 0.34 ms on one thread against 0.62 ms
    on two, a 250 × 257 dsyrk 2.4 ms against 6.5 ms, the same bits; usps's factorizations
    0.9 s against 5.2 s in a run); nothing else runs beside them."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER.append(ThreadpoolController())
    with _CONTROLLER[0].limit(limits=1, user_api="blas"):
        yield
