"""``prefetch(arr, i)``: ask the CPU to start loading ``arr[i]`` into the cache; and
``prefetch_row(X, unit, i)``, every cache line of a CSR row.

Dual coordinate descent visits rows in a random order, so every visit starts with cache
misses on the row's CSR slice and its per-row state; the order is known in advance, so the
epoch loops prefetch a few visits ahead (``tools/bench.py --suite dcd`` measures the
result). A hint only: no effect on results, no fault on any index.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._jit import kernel_inline

__all__ = ["prefetch", "prefetch2", "prefetch_lines", "prefetch_row"]


@intrinsic
def prefetch(typingctx, arr, idx):
    """Prefetch the cache line holding ``arr[idx]`` (1-d array, integer index) for reading."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None
    return types.void(arr, idx), _codegen


@intrinsic
def prefetch2(typingctx, arr, i, j):
    """Prefetch the cache line holding ``arr[i, j]`` (2-d array) for reading."""
    if not isinstance(arr, types.Array) or arr.ndim != 2 or not isinstance(i, types.Integer) \
            or not isinstance(j, types.Integer):
        return None
    return types.void(arr, i, j), _codegen


def _codegen(context, builder, signature, args):
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, list(args[1:]),
                                   wraparound=False)
    i32 = ir.IntType(32)
    voidptr = cgutils.voidptr_t
    fnty = ir.FunctionType(ir.VoidType(), [voidptr, i32, i32, i32])
    fn = builder.module.declare_intrinsic("llvm.prefetch", [voidptr], fnty)
    # read, high temporal locality, data cache
    builder.call(fn, [builder.bitcast(ptr, voidptr), i32(0), i32(3), i32(1)])
    return context.get_dummy_value()


@kernel_inline
def prefetch_lines(arr, p0, p1):
    """Prefetch every cache line of ``arr[p0:p1]`` (64-byte lines)."""
    if p1 > p0:
        step = max(1, 64 // arr.itemsize)
        for p in range(p0, p1, step):
            prefetch(arr, p)
        prefetch(arr, p1 - 1)


@kernel_inline
def prefetch_row(X, unit, i):
    """The whole CSR slice of row ``i`` (a row spans several cache lines; prefetching only
    the first one left the others to miss in a random visit order)."""
    p0 = X[0][i]
    p1 = X[0][i + 1]
    prefetch_lines(X[1], p0, p1)
    if not unit:
        prefetch_lines(X[2], p0, p1)
