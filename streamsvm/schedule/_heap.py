"""Give the C heap's free pages back to the operating system (glibc's ``malloc_trim``).

Every pass allocates and frees the decoded blocks, a few hundred kB each, in several reader
threads, while the block cache and a resident-row slab keep some of them alive for longer.
glibc serves allocations of that size from its heaps (its mmap threshold rises to 32 MB
once a large buffer has been freed), so the freed blocks leave holes between the live
ones that the process keeps: on a 3 M-row store at ``--memory 200MB`` the train process
peaked 105 MB higher than the data it held. ``malloc_trim(0)`` returns every free page in
every arena (MADV_DONTNEED), so the scheduler calls it when a sweep ends and when a
reservation shrinks the cache: a few milliseconds each, against ~100 MB. Fixing glibc's mmap
threshold instead (``MALLOC_MMAP_THRESHOLD_=262144``) cut the peak as much but made each pass
2.3× slower (a page fault for every page of every block: 13.8 s of system time instead of
1.8 s on that run). A no-op where the C library has no ``malloc_trim``.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["release_free_heap"]


def _load():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _load()


def release_free_heap() -> None:
    """Return the C heap's free pages to the operating system (glibc); else nothing."""
    if _TRIM is not None:
        _TRIM(0)
