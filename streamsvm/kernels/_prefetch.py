"""``prefetch(arr, i)``: ask the CPU to start loading ``arr[i]`` into the cache.

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

__all__ = ["prefetch", "prefetch2"]


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
