"""Ordered read-ahead: load the next items in threads while the consumer works on this one.

Store reads (zarr decompression, fsspec/S3 I/O) release the GIL and so do the
``nogil`` numba kernels, so reading block j+1..j+depth overlaps the kernel on block j.
The threads live exactly as long as the generator: closing it (``break``, an exception in
the consumer, garbage collection) cancels reads not yet started, waits for the running
ones and joins every thread — nothing leaks into the next sweep.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
from collections.abc import Callable, Iterable, Iterator

__all__ = ["read_ahead"]


def read_ahead(keys: Iterable, load: Callable, depth: int, *,
               lookup: Callable | None = None, threads: int | None = None) -> Iterator[tuple]:
    """Yield ``(key, value, loaded)`` for every key, in order.

    Parameters
    ----------
    keys : iterable
        Items to load, in the order they are consumed.
    load : callable
        ``load(key) -> value``; runs in a worker thread (in the consumer when
        ``depth == 0``). An exception it raises is re-raised in the consumer when that
        key's turn comes; later keys are then cancelled.
    depth : int
        Loads kept in flight ahead of the consumer. 0 loads synchronously, without
        threads.
    lookup : callable, optional
        ``lookup(key) -> value or None``, called in the consumer thread when the key is
        scheduled; a non-None value is used without calling ``load`` (a cache hit).
    threads : int, optional
        Threads running ``load`` (at most ``depth``; default ``depth``). Fewer threads
        than loads in flight keep CPU-bound loads (decompression) off the cores the
        consumer computes on while still queueing work ahead of it.

    Yields
    ------
    key
    value
    loaded : bool
        True when ``value`` came from ``load``, False when from ``lookup``.
    """
    lookup = lookup or (lambda key: None)
    if depth == 0:
        for key in keys:
            value = lookup(key)
            yield (key, value, False) if value is not None else (key, load(key), True)
        return
    workers = depth if threads is None else max(1, min(int(threads), depth))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                 thread_name_prefix="streamsvm-read")
    pending: collections.deque = collections.deque()

    def schedule(key):
        value = lookup(key)
        pending.append((key, value, False) if value is not None else
                       (key, pool.submit(load, key), True))

    it = iter(keys)
    try:
        for key in itertools.islice(it, depth):
            schedule(key)
        while pending:
            key, value, loaded = pending.popleft()
            if loaded:
                value = value.result()
            for nxt in itertools.islice(it, 1):
                schedule(nxt)
            yield key, value, loaded
    finally:
        for _, value, loaded in pending:
            if loaded:
                value.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
