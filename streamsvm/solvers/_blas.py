"""BLAS on one thread for the host's small dense products."""

from __future__ import annotations

import contextlib
import functools

__all__ = ["single_blas", "small_blas"]

_CONTROLLER = []
SMALL = 600         # Hessian columns from which BLAS's two threads pay on 2 cores (Cholesky
                    # factor and solve: 257 columns 0.27 ms on one thread, 0.37 ms on two; 600:
                    # 2.4 against 1.8 ms; 1,200: 17 against 12 ms)


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


def small_blas(method):
    """A newton method run with BLAS on one thread when its Hessians have fewer than
    :data:`SMALL` columns (``self.a``): there a pass's dense margins and sums, the Newton
    systems and the polish are products of a few hundred columns, and OpenBLAS's second
    thread, spinning between calls, took the core the solver needed (usps in RAM: 4.6 CPU s
    for 2.6 s of wall time; on one thread 2.4 s of both)."""
    @functools.wraps(method)
    def run(self, *args, **kw):
        if self.a >= SMALL:
            return method(self, *args, **kw)
        with single_blas():
            return method(self, *args, **kw)
    return run
